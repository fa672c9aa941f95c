"""The CUDA ↔ Ascend glossary (diag/rules/glossary.toml): its rows, its page and its tooltips."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.conftest import REAL_AICPU_TRACE, ROOT, cli_json, open_page

GLOSSARY = ROOT / "diag" / "rules" / "glossary.toml"
REQUIRED = [  # the terms the pages use and issue #17 asks for
    "Cube", "Vector", "AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA", "SDMA", "HCCL", "HCCS",
    "RoCE", "Plane", "Free", "Preparing", "Computing", "Communication(Not Overlapped)", "TransData", "aclnn",
    "aclop", "ACL graph", "torchair", "GE", "plog", "stream", "task", "Kernel Details", "E2E",
]  # fmt: skip


def _rows() -> list[dict]:
    with open(GLOSSARY, "rb") as fh:
        return tomllib.load(fh)["term"]


def test_every_term_has_a_meaning_and_names_are_unique():
    rows = _rows()
    assert len(rows) >= 25
    names = [n.casefold() for r in rows for n in [r["term"], *r.get("aliases", [])]]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for r in rows:
        assert set(r) <= {"term", "zh", "meaning", "meaning_zh", "cuda", "cuda_zh", "aliases"}, r["term"]
        assert r["meaning"].strip() and "\n" not in r["meaning"] and len(r["meaning"]) <= 160, r["term"]
    assert set(REQUIRED) <= {r["term"] for r in rows}


def test_help_for_is_the_data_file_text_for_a_term_or_an_alias():
    from app.glossary import help_for

    row = next(r for r in _rows() if r["term"] == "AI_CPU")
    expected = f"**AI_CPU**: {row['meaning']} CUDA counterpart: {row['cuda']}. (中文: {row['zh']})"
    assert help_for("AI_CPU") == help_for("aicpu") == help_for("KERNEL_AICPU") == expected
    assert help_for("no such word") == ""


def test_glossary_page_lists_every_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    at = open_page(monkeypatch, tmp_path / "empty.duckdb", "app_pages/12_glossary.py")
    table = at.table[0].value
    assert list(table["term"]) == [r["term"] for r in _rows()]
    assert list(table["CUDA counterpart"]) == [r["cuda"] for r in _rows()]
    at.text_input(key="glossary_filter").input("NVLink").run()
    assert list(at.table[0].value["term"]) == ["HCCS"]


def test_tooltips_on_runs_and_stalls_are_the_glossary_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import json

    from app.glossary import help_for

    db = tmp_path / "g.duckdb"
    assert cli_json("ingest", str(REAL_AICPU_TRACE.parent), "--db", str(db))[0] == 0
    at = open_page(monkeypatch, db)
    metric = next(m for m in at.metric if m.label == "AI_CPU tasks (CPU fallback)")
    assert metric.proto.help == help_for("AI_CPU")
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["AI_CPU tasks"]["help"] == help_for("AI_CPU")
    at.switch_page("app_pages/04_stalls.py").run()
    metric = next(m for m in at.metric if m.label == "communication not overlapped")
    assert metric.proto.help == help_for("Communication(Not Overlapped)")
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["Idle (ms)"]["help"] == "Idle (nothing on device). " + help_for("Free")
