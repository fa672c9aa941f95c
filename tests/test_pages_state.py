"""What the pages a person reads show on the sample database (`diag app`'s first launch, plus a second multi-rank
job): `—` instead of None in every table, and one selected run / job honoured by every page (app.state)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import FIXTURES, ingest_into, open_page

MY_PAGES = [
    "app_pages/01_runs.py",
    "app_pages/04_stalls.py",
    "app_pages/05_fallback.py",
    "app_pages/08_compare.py",
    "app_pages/10_serving.py",
    "app_pages/11_cluster.py",
    "app_pages/12_glossary.py",
]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`diag app`'s sample set (diag.commands.app.ensure_samples) and a generated 4-rank job beside it."""
    from diag.commands.app import ensure_samples
    from diag.store import Store
    from sample_traces.generate_cluster import generate

    root = tmp_path_factory.mktemp("pages")
    db = root / "samples.duckdb"
    assert ensure_samples(str(db)) >= 2
    generate(root / "job4", ranks=4, tp=2, steps=2, seed=7, slow_link=(0, 2))
    serving = FIXTURES / "serving"
    with Store(str(db)) as store:  # and serving results of both platforms, for the Serving page
        ingest_into(
            store, [root / "job4", serving / "ok_sglang_h100.txt", serving / "ok_aisbench_atlas_a3.txt"]
        )
    return db


def _run_id(db: Path, sql: str) -> int:
    from app import data

    return data._store(str(db))[0].cursor().execute(sql).fetchall()[0][0]


def _none_cells(at) -> list[str]:  # noqa: ANN001
    """Every table cell the page draws as a missing value ("None" on screen) or as the text None / nan."""
    bad = []
    for i, frame in enumerate([d.value for d in at.dataframe] + [t.value for t in at.table]):
        for col in frame.columns:
            for row, v in enumerate(frame[col]):
                missing = v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                if missing or str(v) in ("None", "nan", "NaN", "<NA>"):
                    bad.append(f"table {i} column {col!r} row {row}: {v!r}")
    return bad


def test_no_table_cell_shows_none_on_any_page(sample_db, monkeypatch, tmp_path):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    aicpu = _run_id(sample_db, "SELECT run_id FROM runs WHERE name = 'mstt_timeline_advice'")
    at.selectbox(key="runs_select").select(aicpu).run()  # the run with AI_CPU ops: Fallback draws its tables
    seen, offenders = 0, {}
    for page in MY_PAGES:
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        seen += len(at.dataframe) + len(at.table)
        if bad := _none_cells(at):
            offenders[page] = bad[:5]
    assert offenders == {}
    assert seen >= 12  # Runs, Stalls ×2, Fallback, Compare ×3, Serving ×4, Cluster, Glossary at least


def test_every_column_is_at_least_as_wide_as_its_label(sample_db, monkeypatch, tmp_path):
    import json

    from app.tables import CHAR_PX, PAD_PX

    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    narrow = []
    for page in MY_PAGES[:-1]:  # the Glossary's table is static and wraps
        at.switch_page(page).run()
        for frame in at.dataframe:
            for label, cfg in json.loads(frame.proto.columns).items():
                if label == "_index":  # hide_index
                    continue
                if cfg.get("width", 0) < PAD_PX + CHAR_PX * len(label):
                    narrow.append(f"{page}: {label}")
    assert narrow == []
    at.switch_page("app_pages/10_serving.py").run()
    summary = json.loads(at.dataframe[0].proto.columns)
    assert summary["TPOT p99 ms"]["width"] >= PAD_PX + CHAR_PX * len("TPOT p99 ms")


def test_runs_table_writes_a_dash_for_an_unknown_rank(sample_db, monkeypatch, tmp_path):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    df = at.dataframe[0].value
    row = df[df["name"] == "mstt_timeline_advice"].iloc[0]
    assert (row["rank"], row["steps"]) == ("—", 1)  # steps is complete: it stays a number
    assert list(df.columns[:6]) == ["run", "platform", "name", "rank", "steps", "span (ms)"]
    assert any("17 columns: scroll sideways" in c.value for c in at.caption)


@pytest.mark.parametrize(
    ("selected", "expect_b"),
    [
        ("SELECT run_id FROM runs WHERE name = 'msinsight_level2_rank0_ascend_pt'", "cuda"),
        ("SELECT run_id FROM runs WHERE platform = 'cuda'", "ascend"),
    ],
)
def test_compare_opens_on_the_selected_run_against_the_other_platform(
    sample_db, monkeypatch, tmp_path, selected, expect_b
):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    run = _run_id(sample_db, selected)
    at.selectbox(key="runs_select").select(run).run()
    at.switch_page("app_pages/08_compare.py").run()
    assert not at.exception, at.exception
    a, b = at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value
    platform_b = _run_id(sample_db, f"SELECT platform FROM runs WHERE run_id = {int(b)}")
    assert (a, platform_b) == (run, expect_b)


def test_a_run_chosen_on_compare_is_the_selected_run_everywhere(sample_db, monkeypatch, tmp_path):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    at.switch_page("app_pages/08_compare.py").run()
    rank1 = _run_id(sample_db, "SELECT run_id FROM runs WHERE name LIKE 'rank1_3003034%'")
    at.selectbox(key="cmp_a").select(rank1).run()
    at.switch_page("app_pages/04_stalls.py").run()
    assert at.selectbox(key="stalls_run").value == rank1
    assert f"selected run: **{rank1}**" in [c.value for c in at.sidebar.caption]


def test_cluster_opens_the_job_holding_the_selected_run(sample_db, monkeypatch, tmp_path):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    at.switch_page("app_pages/11_cluster.py").run()
    # the Runs page opened on run 1 (the first sample: rank 0 of the TP=2 job): its job, not the biggest one
    tp2 = _run_id(sample_db, "SELECT job_id FROM jobs WHERE name = 'llm_decode_tp2'")
    assert at.selectbox(key="cluster_job").value == tp2
    assert any(c.value.startswith("2 ranks · 4 step(s)") for c in at.caption), [c.value for c in at.caption]
    job4_rank2 = _run_id(sample_db, "SELECT run_id FROM runs WHERE name LIKE 'rank2_460226%'")
    at.switch_page("app_pages/01_runs.py").run()
    at.selectbox(key="runs_select").select(job4_rank2).run()
    at.switch_page("app_pages/11_cluster.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="cluster_job").value == _run_id(
        sample_db, "SELECT job_id FROM jobs WHERE name = 'job4'"
    )


def test_a_table_is_as_tall_as_its_rows_up_to_a_cap_and_gaps_read_a_dash(monkeypatch):
    from app import tables

    drawn: list[dict] = []
    monkeypatch.setattr(tables.st, "dataframe", lambda df, **kw: drawn.append({"df": df, **kw}))
    monkeypatch.setattr(tables.st, "caption", lambda text: drawn.append({"caption": text}))
    outcomes = pd.DataFrame({"status": ["ok"] * 14, "rows": [3] * 13 + [None], "ms": [1.25] * 13 + [None]})
    tables.show_table(outcomes)
    assert drawn[0]["height"] == 38 + 35 * 14  # every one of 14 rows shows (10 did before)
    shown = drawn[0]["df"]
    assert list(shown["rows"])[-2:] == ["3", "—"] and list(shown["ms"])[-2:] == ["1.25", "—"]
    tables.show_table(pd.DataFrame({"n": range(40)}))
    assert drawn[1]["height"] == 38 + 35 * 16
    assert drawn[2] == {"caption": "40 rows: scroll the table for the rest"}


def test_runs_step_picker_reads_whole_run_and_a_step_choice_is_the_selected_step(
    sample_db, monkeypatch, tmp_path
):
    at = open_page(monkeypatch, sample_db, uploads=tmp_path / "uploads")
    picker = at.selectbox(key="runs_step")
    assert picker.value == "whole run"  # not the placeholder "Choose an option" (a None value)
    assert picker.options[:3] == ["whole run", "step 11", "step 12"]  # the CUDA sample's ProfilerStep#11…
    picker.select(12).run()
    assert at.session_state["step"] == 12
    assert any(c.value.endswith(", step 12") for c in at.sidebar.caption)
