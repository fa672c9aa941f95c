"""diag.analyses.op_util's sums are reproducible to the last digit (issue #25): the shapes are costed once per
distinct (op, shapes, dtypes) and each call takes its cost from that list, and every sum adds exact 9-place decimals,
whatever the plan or the number of threads. Checked against a recomputation in Python: every call costed on its own
row by cost_sql, the sums taken one call after another."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pytest

from diag.analyses.op_util import PMU_COMPUTE, PMU_MEMORY, cost_sql, op_utilization
from diag.sql_text import SqlFragment
from diag.store import Store
from tests.conftest import CORPUS, ingest_into

ST_LEVEL2 = CORPUS / "ascend/msinsight/test/st/level2/rank_0_ascend_pt"  # 2,463 real kernels with PMU columns
PMU = PMU_COMPUTE + PMU_MEMORY


@pytest.fixture(scope="module")
def level2(tmp_path_factory: pytest.TempPathFactory) -> Store:
    if not ST_LEVEL2.is_dir():
        pytest.skip("../shared/corpus is not present")
    store = Store(str(tmp_path_factory.mktemp("order") / "l2.duckdb"))
    assert ingest_into(store, [ST_LEVEL2]).ok
    store.cursor().execute("UPDATE runs SET device_name = 'Ascend910B3'")
    yield store
    store.close()


def _per_call(store: Store) -> list[tuple]:
    """(name, start_ns, dur_ns, flops, bytes, {pmu column: value}) of every call, each costed on its own row."""
    rows = SqlFragment("""SELECT name, op_type AS op, start_ns, dur_ns, input_shapes, input_dtypes, output_shapes,
                                 output_dtypes, pmu_values, c.names FROM kernels LEFT JOIN pmu_columns c USING (file_id)
                          WHERE kernels.run_id = 1""")
    got = store.cursor().execute(
        f"SELECT name, start_ns, dur_ns, flops, bytes, pmu_values, names FROM ({cost_sql(rows)})"
    )
    out = []
    for name, start, dur, flops, nbytes, values, names in got.fetchall():
        pmu = dict(zip(names or [], values or [], strict=True))
        out.append((name, start, dur, flops, nbytes, {m: pmu.get(m) for m in PMU}))
    return sorted(out, key=lambda r: (r[0], r[1]))  # the (name, start) order of op_util's sums


def _recomputed(calls: list[tuple]) -> dict[str, dict]:
    """Per kernel name: Σ flops, Σ bytes of the costed calls and each PMU ratio's duration-weighted mean, the
    float sums taken one call after another."""
    acc: dict[str, dict] = defaultdict(lambda: {"flops": 0.0, "bytes": 0.0, "n": 0, "pmu": defaultdict(list)})
    for name, _start, dur, flops, nbytes, pmu in calls:
        a = acc[name]
        if flops is not None and nbytes is not None and dur > 0:
            a["flops"] += flops
            a["bytes"] += nbytes
            a["n"] += 1
        for m, v in pmu.items():
            if v is not None:
                a["pmu"][m].append((v * dur, dur))
    out = {}
    for name, a in acc.items():
        ratios = {}
        for m in PMU:
            terms = a["pmu"].get(m)
            if terms:
                total = 0.0
                for weighted, _ in terms:
                    total += weighted
                ratios[m] = total / sum(d for _, d in terms) if sum(d for _, d in terms) else None
            else:
                ratios[m] = None
        out[name] = {
            "flops": a["flops"] if a["n"] else None,
            "bytes": a["bytes"] if a["n"] else None,
            **ratios,
        }
    return out


def _figures(rows: list[dict]) -> dict[str, dict]:
    return {r["name"]: {"flops": r["flops"], "bytes": r["bytes"], **{m: r[m] for m in PMU}} for r in rows}


def test_sums_equal_a_call_by_call_recomputation(level2: Store) -> None:
    got = _figures(op_utilization(level2, 1, "kernel"))
    want = _recomputed(_per_call(level2))
    assert len(got) == len(want) == 59
    assert sum(f["flops"] is not None for f in got.values()) == 29
    assert sum(f["aiv_vec_ratio"] is not None for f in got.values()) == 44
    # each term is summed as an exact 9-place decimal (op_util.exact_sum), the recomputation as floats in call
    # order: equal to 12 significant digits; the thread-count test below holds them to the last digit
    assert got.keys() == want.keys()
    for name, figures in got.items():
        for key, value in figures.items():
            expected = want[name][key]
            assert (value is None) == (expected is None), (name, key)
            assert value is None or math.isclose(value, expected, rel_tol=1e-12), (name, key, value, expected)


def test_same_figures_on_one_thread_and_on_four(level2: Store) -> None:
    cur = level2.cursor()
    results = []
    for threads in (1, 4, 1):
        cur.execute(f"SET threads = {threads}")
        results.append(op_utilization(level2, 1, "op"))
    cur.execute("RESET threads")
    assert results[0] == results[1] == results[2]


def test_a_call_stored_twice_counts_once(tmp_path: Path) -> None:
    if not ST_LEVEL2.is_dir():
        pytest.skip("../shared/corpus is not present")
    with Store(str(tmp_path / "dup.duckdb")) as store:
        assert ingest_into(store, [ST_LEVEL2]).ok
        before = op_utilization(store, 1, "kernel")
        store.cursor().execute("INSERT INTO kernels SELECT * FROM kernels WHERE run_id = 1 LIMIT 100")
        after = op_utilization(store, 1, "kernel")
    assert sum(r["calls"] for r in before) == sum(r["calls"] for r in after) == 2463
    assert after == before
