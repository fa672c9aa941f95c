"""The Ops page (AppTest): the op table with the CUDA baseline's classes beside it, one op's shapes, PMU per op."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ingest_into, open_page
from tests.test_ops import ASCEND_RANK0, CUDA_TRACE
from tests.test_ops_shapes import write_prefill_run

PAGE = "app_pages/14_ops.py"


@pytest.fixture(scope="module")
def page_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The generated Ascend rank 0, its CUDA baseline and a generated prefill at growing lengths."""
    from diag.store import Store

    root = tmp_path_factory.mktemp("ops_page")
    write_prefill_run(root / "prefill")
    db = root / "ops.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [ASCEND_RANK0, CUDA_TRACE, root / "prefill"]).ok
        rows = store.cursor().execute("SELECT run_id, source FROM runs").fetchall()
    ids = {
        "decode": next(r for r, s in rows if ASCEND_RANK0.name in s),
        "cuda": next(r for r, s in rows if "h100" in s),
        "prefill": next(r for r, s in rows if s.endswith("rank0_1_20250115093320983_ascend_pt")),
    }
    return db, ids


def _open(monkeypatch: pytest.MonkeyPatch, db: Path, run_id: int):  # noqa: ANN202
    at = open_page(monkeypatch, db)
    at.session_state["run_id"] = run_id
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def test_op_table_with_the_cuda_baseline_beside_it(monkeypatch: pytest.MonkeyPatch, page_db) -> None:  # noqa: ANN001
    db, ids = page_db
    at = _open(monkeypatch, db, ids["decode"])
    assert [t.value for t in at.title] == ["Ops"]
    assert at.selectbox(key=f"ops_baseline_{ids['decode']}").value == ids["cuda"]  # the compare page's pair
    table = at.dataframe[0].value
    first = table.iloc[0]
    assert (first["op type"], first["op class"], first["core"], first["calls"]) == (
        "MatMulV2",
        "gemm",
        "AI_CORE",
        68,
    )
    assert (first["total ms"], first["mean µs"], first["share %"]) == (3.882, 57.1, 50.2)
    assert (first["B total ms"], first["A/B class per step"]) == (
        "3.376",
        "1.15",
    )  # a gap below: drawn as text
    assert len(table) == 13  # every op type of the 212 kernels
    shapes = at.dataframe[1].value  # the largest op with shapes is drilled into first
    assert at.selectbox(key=f"ops_shape_op_{ids['decode']}").value == "MatMulV2"
    assert sorted(shapes["calls"]) == [4, 16, 16, 16, 16] and shapes["total ms"].iloc[0] == 1.426
    assert any("5 distinct input shape(s). No activity dimension varies" in c.value for c in at.caption)
    per_step = at.dataframe[2].value  # in the expander: distinct shapes per step
    assert list(per_step["step"]) == [11, 12, 13, 14] and set(per_step["distinct shapes"]) == {5}
    pmu = at.dataframe[3].value
    assert {"aic_mac_ratio", "aiv_mte2_ratio", "cube_utilization(%)"} <= set(pmu.columns)


def test_by_class_and_the_varying_sequence_of_a_prefill(monkeypatch: pytest.MonkeyPatch, page_db) -> None:  # noqa: ANN001
    db, ids = page_db
    at = _open(monkeypatch, db, ids["prefill"])
    caption = next(c.value for c in at.caption if "distinct input shape" in c.value)
    assert caption.startswith("4 distinct input shape(s). Varying: KV length")
    assert "query sequence (S1 of BSH; heads in TND)" in caption
    labels = list(at.dataframe[1].value["varying"])
    assert labels[0] == (
        "query sequence (S1 of BSH; heads in TND) = 4,096 · KV length (S2 of BSH; KV heads in TND) = 4,096"
    )
    at.radio(key="ops_by").set_value("class").run()
    assert not at.exception
    assert list(at.dataframe[0].value["op class"])[:2] == ["attention_prefill", "gemm"]


def test_a_long_table_is_cut_and_says_where_the_rest_is(monkeypatch: pytest.MonkeyPatch, page_db) -> None:  # noqa: ANN001
    db, ids = page_db
    monkeypatch.setattr("app.ops_widgets.MAX_ROWS", 2)
    at = _open(monkeypatch, db, ids["prefill"])
    assert list(at.dataframe[0].value["op type"]) == ["PromptFlashAttention", "MatMulV2"]
    assert "The largest 2 of 3 rows; `diag ops --by op --top 0` lists every one." in [
        c.value for c in at.caption
    ]


def test_chart_labels_name_the_varying_dimensions_in_short() -> None:
    from app.ops_widgets import short_varying

    values = [
        {"dim": "query_seq", "label": "query sequence (S1 of BSH; heads in TND)", "value": 4096},
        {"dim": "kv_len", "label": "KV length (S2 of BSH; KV heads in TND)", "value": 4096},
        {"dim": None, "label": "input 3 axis 0", "value": 7},
    ]
    assert short_varying(values) == "S1 4,096 · KV 4,096 · input 3 axis 0 7"
    assert short_varying([]) is None
