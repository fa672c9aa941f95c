"""Before / after on the same platform (#21): two generated runs differing only in one op's duration name that op.

The runs come from ``sample_traces/generate.py`` with one seed; ``sample_traces/_before_after.py`` scales the
MatMulV2 kernels of the copy by 1.2 in kernel_details.csv and trace_view.json and edits its recorded CANN version.
A run with another seed is the same workload with other step-to-step noise; a 2-step pair has no spread.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.analyses.before_after import CANNOT_TELL, SLOWER, before_after, before_after_findings
from diag.commands.compare import compare as compare_command
from diag.store import Store
from sample_traces._before_after import another_capture, edit_environment, rename_op, scale_op
from sample_traces.generate import generate
from tests.conftest import FIXTURES, SAMPLES, ingest_into, open_page

FACTOR = 1.2
OP = "MatMulV2"


def _generated(root: Path, name: str, *, seed: int = 3, steps: int = 5) -> Path:
    generate(root / name, steps=steps, layers=2, ranks=1, seed=seed)
    (root / name / "ground_truth.json").unlink()
    return next((root / name).glob("rank*_ascend_pt"))


def _slower_copy(src: Path, root: Path, name: str, rename: bool = False, **fields: str) -> Path:
    dst = root / name / src.name
    shutil.copytree(src, dst)
    scale_op(dst, OP, FACTOR)
    if rename:  # TransData gone, TransDataV2 new: ops on one side only
        assert rename_op(dst, "TransData", "TransDataV2") == 5
    edit_environment(dst, fields, {})
    return dst


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory) -> tuple[Path, dict[str, int], dict[str, Path]]:  # noqa: ANN001
    """before, after (MatMulV2 × 1.2, CANN 8.0.RC3 → 8.1.RC1), noise (another seed), short / short_after (2 steps)."""
    root = tmp_path_factory.mktemp("before_after")
    before = _generated(root, "before")
    dirs = {
        "before": before,
        "after": _slower_copy(before, root, "after", rename=True, cann_version="8.1.RC1"),
        "noise": _generated(root, "noise", seed=4),
    }
    dirs["short"] = _generated(root, "short", steps=2)
    dirs["short_after"] = _slower_copy(dirs["short"], root, "short_after")
    db = root / "pair.duckdb"
    run: dict[str, int] = {}
    with Store(db) as store:
        for name, path in dirs.items():  # one at a time: each is the newest run after its ingest
            ingest_into(store, [path])
            run[name] = store.cursor().execute("SELECT max(run_id) FROM runs").fetchall()[0][0]
    assert sorted(run.values()) == [1, 2, 3, 4, 5]
    return db, run, dirs


def test_the_scaled_op_is_the_one_regression_with_its_percent(pair_db):
    db, run, _ = pair_db
    with Store(db, read_only=True) as store:
        result = before_after(store, run["before"], run["after"])
    significant = [r for r in result["ops"] if r["significant"]]
    assert [(r["name"], r["verdict"]) for r in significant] == [(OP, SLOWER)]
    assert significant[0]["delta_pct"] == pytest.approx(100 * (FACTOR - 1), abs=1.0)
    assert significant[0]["calls_per_step_a"] == significant[0]["calls_per_step_b"] == 9.0
    assert [r["name"] for r in result["classes"] if r["significant"]] == ["gemm"]
    assert (result["steps_a"], result["steps_b"]) == (5, 5)
    gone, new = result["only_a"], result["only_b"]
    assert [(r["name"], r["verdict"], r["calls_per_step_a"], r["per_step_b_ms"]) for r in gone] == [
        ("TransData", "gone", 1.0, 0.0)
    ]
    assert [(r["name"], r["verdict"], r["calls_per_step_b"], r["per_step_b_ms"]) for r in new] == [
        ("TransDataV2", "new", 1.0, pytest.approx(gone[0]["per_step_a_ms"]))
    ]
    assert result["environment"]["changes"] == [
        {"key": "cann_version", "label": "CANN", "before": "8.0.RC3", "after": "8.1.RC1", "kind": "stack"}
    ]
    assert result["environment"]["owner"] == "stack"
    assert result["answer"] == (
        "MatMulV2 is 20.0 % slower after (0.13 ms per step, beyond the step-to-step spread of 0.02 ms); "
        "between these runs CANN changed 8.0.RC3 → 8.1.RC1 (stack)"
    )


def test_an_identical_pair_and_a_noise_only_pair_have_nothing_significant(pair_db):
    db, run, _ = pair_db
    with Store(db, read_only=True) as store:
        same = before_after(store, run["before"], run["before"])
        noise = before_after(store, run["before"], run["noise"])
    for result in (same, noise):
        assert result["can_tell"] and not [
            r["name"] for r in result["ops"] + result["classes"] if r["significant"]
        ]
    assert same["answer"] == (
        "no op changed beyond the step-to-step spread; no recorded version or setting differs: the change is in "
        "the code or the input"
    )
    assert same["environment"]["owner"] == noise["environment"]["owner"] == "code"
    assert max(abs(r["delta_pct"]) for r in noise["ops"]) > 0  # the seeds do differ: noise, not a copy


def test_two_steps_cannot_tell(pair_db):
    db, run, _ = pair_db
    with Store(db, read_only=True) as store:
        result = before_after(store, run["short"], run["short_after"])
        assert before_after_findings(store, run["short"], run["short_after"]) == []
    assert not result["can_tell"] and {r["verdict"] for r in result["ops"]} == {CANNOT_TELL}
    assert result["answer"].startswith(
        "cannot tell: 2 steps before, 2 after (at least 3 steps on each side give the step-to-step spread)"
    )


def test_the_regression_finding_carries_the_owner(pair_db):
    db, run, _ = pair_db
    with Store(db, read_only=True) as store:
        (finding,) = before_after_findings(store, run["before"], run["after"])
    js = finding.to_json()
    assert (js["category"], js["owner"], js["run_id"], js["evidence"]["op"]) == (
        "regression",
        "stack",
        run["after"],
        OP,
    )
    assert [s["owner"] for s in js["owner_steps"]] == ["stack"]
    assert js["title"] == "MatMulV2 20.0 % slower than run 1: +0.130 ms per step"


def test_cli_prints_the_before_after_view_and_json_adds_the_key(pair_db, capsys):
    db, run, _ = pair_db
    compare_command(run["before"], run["after"], db=str(db), as_json=False)  # diag compare, in-process
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("MatMulV2 is 20.0 % slower after (0.13 ms per step")
    row = next(line for line in lines if line.startswith("│ MatMulV2"))
    assert [c.strip() for c in row.strip("│").split("│")] == [
        "MatMulV2", "gemm", "9.0", "0.648", "0.778", "+0.130", "+20.0%", "0.017", "slower"
    ]  # fmt: skip
    assert any(line.replace(" ", "") == "│CANN│8.0.RC3│8.1.RC1│stack│" for line in lines)
    assert lines[-1] == (
        "1. (stack) pin the versions of the run before (CANN 8.0.RC3) and rerun; if the regression goes with the "
        "new version, report it to the vendor with both profiles (diag bugreport)"
    )
    compare_command(run["before"], run["after"], db=str(db), as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert {"classes", "overall", "warnings", "biggest_loss"} <= set(out)  # the keys of today stay
    assert out["warnings"][0] == (
        "both runs are ascend: the comparison is meant for an Ascend run against a CUDA run; read as before (A) "
        "and after (B) they are compared op by op beyond noise (diag compare, Before / after)"
    )
    assert out["before_after"]["answer"] == lines[0]
    assert [r["name"] for r in out["before_after"]["ops"] if r["significant"]] == [OP]
    (finding,) = out["before_after"]["findings"]
    assert (finding["category"], finding["owner"], finding["evidence"]["op"]) == ("regression", "stack", OP)


def test_a_cross_platform_pair_has_no_before_after(pair_db, tmp_path, capsys):
    """An Ascend run against a CUDA run: the view of today, ``before_after`` null in --json."""
    db, run, _ = pair_db
    copy = tmp_path / "cross.duckdb"
    shutil.copy(db, copy)
    with Store(copy) as store:
        ingest_into(store, [SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"])
        cuda = store.cursor().execute("SELECT max(run_id) FROM runs").fetchall()[0][0]
    compare_command(run["before"], cuda, db=str(copy), as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["before_after"] is None and out["classes"]
    compare_command(run["before"], cuda, db=str(copy), as_json=False)
    text = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"A = run {run['before']} ") for line in text)  # the class table, as today
    assert not any("slower after" in line for line in text)


def test_the_reverse_pair_is_faster_not_slower(pair_db):
    db, run, _ = pair_db
    with Store(db, read_only=True) as store:
        result = before_after(store, run["after"], run["before"])
        assert before_after_findings(store, run["after"], run["before"]) == []
    assert result["answer"] == (
        "no op is slower beyond the step-to-step spread; MatMulV2 is 16.7 % faster; between these runs CANN "
        "changed 8.1.RC1 → 8.0.RC3 (stack)"
    )


def test_page_draws_the_before_after_section(pair_db, monkeypatch):
    db, run, _ = pair_db
    at = open_page(monkeypatch, db, "app_pages/08_compare.py")
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (run["before"], run["after"])
    assert "Before / after" in [s.value for s in at.subheader]
    assert any(m.value.startswith("MatMulV2 is 20.0 % slower after") for m in at.markdown)
    ops = next(df.value for df in at.dataframe if "verdict" in df.value.columns)
    assert ops[["op", "Δ %", "verdict"]].values.tolist() == [[OP, 20.0, "slower"]]


# -- the environment diff on a real profiler_info / profiler_metadata pair -----------------------------------


def _env_copy(root: Path, name: str, info: dict[str, str], env: dict[str, str]) -> Path:
    dst = root / name / "rank_0_ascend_pt"
    shutil.copytree(FIXTURES / "env" / "supported" / "rank_0_ascend_pt", dst)
    edit_environment(dst, info, {"USER": name, **env})  # USER: no prefix diag reads; keeps each copy distinct
    if name == "after":
        another_capture(dst)  # a second capture: its own profiler_info, its own run
    return dst


@pytest.mark.parametrize(
    ("info", "env", "owner", "steps", "sentence"),
    [
        ({"cann_version": "8.1.RC1"}, {}, "stack", ["stack"], "CANN changed 8.3.RC1 → 8.1.RC1 (stack)"),
        ({}, {"HCCL_BUFFSIZE": "400"}, "config", ["config"], "HCCL_BUFFSIZE changed 200 → 400 (config)"),
        (
            {"cann_version": "8.1.RC1"},
            {"HCCL_BUFFSIZE": "400"},
            "config",
            ["config", "stack"],
            "CANN changed 8.3.RC1 → 8.1.RC1 (stack) and HCCL_BUFFSIZE 200 → 400 (config)",
        ),
    ],
)
def test_environment_diff_names_the_owner(tmp_path, info, env, owner, steps, sentence):
    before = _env_copy(tmp_path, "before", {}, {"HCCL_BUFFSIZE": "200"})
    after = _env_copy(tmp_path, "after", info, {"HCCL_BUFFSIZE": "200", **env})
    assert json.loads((before / "profiler_info_0.json").read_text())["cann_version"] == "8.3.RC1"
    with Store(tmp_path / "env.duckdb") as store:
        ingest_into(store, [before])
        ingest_into(store, [after])
        result = before_after(store, 1, 2)
    envd = result["environment"]
    assert envd["sentence"] == f"between these runs {sentence}"
    assert (envd["owner"], [s["owner"] for s in envd["owner_steps"]]) == (owner, steps)
    assert result["answer"].endswith(envd["sentence"])


def test_a_cuda_pair_places_kernels_in_the_profiler_steps(pair_db, tmp_path):
    """CUDA and CUDA: the Kineto twins of both runs (sample_traces/generate_cuda.py); their kernels carry no step
    id, so the ProfilerStep windows give the per-step totals."""
    from sample_traces.generate_cuda import generate as cuda_twin

    _, _, dirs = pair_db
    traces = []
    for name in ("before", "after"):
        cuda_twin(dirs[name].parent, tmp_path / name)
        traces.append(tmp_path / name / "h100_decode_tp1.pt.trace.json")
    with Store(tmp_path / "cuda.duckdb") as store:
        for trace in traces:
            ingest_into(store, [trace])
        result = before_after(store, 1, 2)
    significant = [(r["op_class"], r["verdict"]) for r in result["ops"] if r["significant"]]
    assert (result["steps_a"], result["steps_b"], significant) == (5, 5, [("gemm", SLOWER)])
    assert next(r for r in result["ops"] if r["significant"])["delta_pct"] == pytest.approx(20.0, abs=1.0)


def test_real_level1_and_level2_captures_cannot_tell_and_name_the_profiler_level(corpus, tmp_path):
    """Two real torch_npu captures of one workload (Ascend/msinsight test data) at Level1 and Level2: one step
    each, so no spread; the recorded difference is the profiler level, a setting."""
    text = corpus / "ascend" / "msinsight" / "test" / "data" / "pytorch" / "text"
    with Store(tmp_path / "real.duckdb") as store:
        for level in ("level1", "level2"):
            ingest_into(store, [text / level / "rank0_ascend_pt"])
        result = before_after(store, 1, 2)
        assert before_after_findings(store, 1, 2) == []
    assert (result["steps_a"], result["steps_b"], result["can_tell"]) == (1, 1, False)
    assert {r["verdict"] for r in result["ops"]} == {CANNOT_TELL}
    assert {r["spread_ms"] for r in result["ops"]} == {None}
    assert result["answer"] == (
        "cannot tell: 1 step before, 1 after (at least 3 steps on each side give the step-to-step spread); "
        "between these runs profiler level changed Level1 → Level2 (config)"
    )


@pytest.mark.parametrize(
    ("delta", "spread", "before", "verdict"),
    [
        (0.10, 0.01, 1.0, SLOWER),  # 10 % of the op, 1 % of the step, 10 × the spread
        (-0.10, 0.01, 1.0, "faster"),
        (0.10, 0.04, 1.0, "within noise"),  # 2.5 × the spread: k = 3 not reached
        (0.04, 0.001, 1.0, "within noise"),  # 4 % of the op: under min_change_pct (5)
        (
            0.004,
            0.0001,
            0.05,
            "within noise",
        ),  # 8 % of the op but 0.04 % of the step: under min_step_share_pct
    ],
)
def test_each_threshold_of_before_after_is_needed(delta, spread, before, verdict):
    """[before_after] in rules/thresholds.toml: k × spread, min_change_pct and min_step_share_pct, each alone
    keeps a change within noise (step time 10 ms)."""
    from diag.analyses.before_after import _verdict

    assert _verdict(delta, spread, before, 10.0, can_tell=True) == verdict
