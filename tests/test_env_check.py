"""The version matrix, the environment checks and ``diag env`` (issue #21)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from diag.analyses.env_check import env_rules, environment_check, fires
from diag.analyses.findings import device_findings
from diag.analyses.version_matrix import MATRIX, cann_family, check_versions, norm_npu
from diag.errors import DiagError
from diag.store import Store
from tests.conftest import CORPUS, FIXTURES, ingest_into

ENV = FIXTURES / "env"
REAL_RANK0 = CORPUS / "ascend" / "msinsight" / "test" / "st" / "level2" / "rank_0_ascend_pt"
MISMATCH = (
    "CANN 8.0.0 and torch_npu 2.1.0.post8 do not pair: install torch_npu 2.1.0.post10 (or CANN 8.0.RC3)"
)
WORKER_LOG = """\
INFO 06-11 09:30:01 [__init__.py:41] - ascend -> vllm_ascend:register
vLLM Ascend Version: 0.9.1
PyTorch version: 2.5.1
[pip3] torch-npu==2.5.1.post1
+ export ASCEND_LAUNCH_BLOCKING=1
+ source /usr/local/Ascend/ascend-toolkit/set_env.sh
LD_LIBRARY_PATH=/usr/local/Ascend/ascend-toolkit/8.2.RC1/lib64
[rank0]: RuntimeError: NPU function error: call aclnnMatmul failed, error code is 561103
"""


def _store(tmp_path: Path, *folders: Path) -> Store:
    store = Store(tmp_path / "env.duckdb")
    ingest_into(store, folders)
    return store


def _run_folder(tmp_path: Path, fixture: str, name: str = "rank_0_ascend_pt") -> Path:
    dst = tmp_path / fixture / name
    shutil.copytree(ENV / fixture / "rank_0_ascend_pt", dst)
    return dst


# -- the matrix ---------------------------------------------------------------------------------------------------


def test_matrix_rows_parse_and_every_row_has_a_source():
    m = tomllib.loads(MATRIX.read_text(encoding="utf-8"))
    assert m["date_read"] == "2026-12-01"
    counts = {k: len(m[k]) for k in ("torch_npu", "python", "vllm_ascend", "driver", "mindie")}
    assert counts == {"torch_npu": 62, "python": 14, "vllm_ascend": 36, "driver": 4, "mindie": 1}
    for table in counts:
        for row in m[table]:
            assert row["source"] in m["sources"], row
            assert m["sources"][row["source"]].strip(), row
    # the whole published tables: the oldest and the newest Ascend/pytorch rows, the first vLLM-Ascend release
    npu = {(r["torch_npu"], r["cann"]) for r in m["torch_npu"]}
    assert {("2.12.0", "9.1.0"), ("1.5.0.post2", "5.0.2"), ("2.1.0.post8", "8.0.RC3")} <= npu
    assert ("0.7.3", "8.1.RC1") in {(r["vllm_ascend"], r["cann"]) for r in m["vllm_ascend"]}


def test_versions_normalise_as_the_matrix_header_says():
    assert norm_npu("2.8.0post2") == "2.8.0.post2"
    assert norm_npu("2.9.0.post1+git4c901a4") == "2.9.0.post1"
    assert cann_family("8.2.RC1.alpha003") == cann_family("8.2.rc1") == "8.2.RC1"
    assert cann_family("8.5.1") == cann_family("8.5.0") == "8.5"
    checks = check_versions({"torch_npu": "2.9.0", "cann": "8.5.1"})  # a patch release of CANN 8.5.0
    assert (checks["torch_npu"].status, checks["cann"].status) == ("supported", "supported")


def test_no_build_of_the_pytorch_for_this_cann_says_change_cann():
    # the pair sample_traces/generate.py writes: torch_npu 2.5.1 is published for CANN 8.1.RC1 (and 8.0.0 by vLLM-Ascend)
    checks = check_versions({"torch_npu": "2.5.1", "cann": "8.0.RC3"})
    assert checks["cann"].reason == (
        "CANN 8.0.RC3 and torch_npu 2.5.1 do not pair: install CANN 8.1.RC1 or 8.0.0 (CANN 8.0.RC3 has no torch_npu "
        "for PyTorch 2.5.1; its builds are torch_npu 2.4.0, 2.3.1.post2 or 2.1.0.post8)"
    )


def test_unknown_versions_are_said_not_guessed():
    checks = check_versions({"torch_npu": "3.0.0", "cann": "8.0.0"})
    assert checks["torch_npu"].status == "unknown"
    assert checks["torch_npu"].reason == "torch_npu 3.0.0 is in no published pairing"
    assert checks["cann"].status == "supported"  # CANN 8.0.0 is published; nothing to pair it against


def test_vllm_ascend_driver_and_python_rows():
    checks = check_versions(
        {
            "vllm_ascend": "0.9.1",
            "vllm": "0.9.2",
            "torch_npu": "2.5.1.post1",
            "cann": "8.2.RC1",
            "python": "3.12",
            "torch": "2.5.1",
        }
    )
    assert checks["vllm_ascend"].status == "mismatched"
    assert checks["vllm_ascend"].reason == (
        "vLLM-Ascend 0.9.1 is released for vLLM 0.9.1, torch_npu 2.5.1.post1, CANN 8.2.RC1; this run has vLLM 0.9.2"
    )
    assert (
        checks["python"].reason == "PyTorch 2.5.1 supports Python 3.9, 3.10 or 3.11; this run has Python 3.12"
    )
    drv = check_versions({"cann": "9.0.0", "driver": "24.1.0"})["driver"]
    assert drv.status == "mismatched"
    assert check_versions({"cann": "9.0.0", "driver": "25.5.1"})["driver"].status == "supported"


# -- a real profiler_info, unedited and edited ---------------------------------------------------------------------


def test_fixture_is_the_real_corpus_file():
    if not REAL_RANK0.is_dir():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    for name in ("profiler_info_0.json", "profiler_metadata.json"):
        assert (ENV / "supported" / "rank_0_ascend_pt" / name).read_bytes() == (
            REAL_RANK0 / name
        ).read_bytes()


def test_real_profiler_info_is_a_supported_pairing(tmp_path):
    with _store(tmp_path, _run_folder(tmp_path, "supported")) as store:
        result = environment_check(store)
    assert (
        result["answer"]
        == "CANN 8.3.RC1, torch_npu 2.7.1: a published pairing (version matrix read 2026-12-01)"
    )
    assert [(v["component"], v["version"], v["from"], v["status"]) for v in result["versions"]] == [
        ("cann", "8.3.RC1", "profiler_info", "supported"),
        ("torch_npu", "2.7.1", "profiler_info", "supported"),
    ]
    # its ENV_VARIABLES: ASCEND_GLOBAL_LOG_LEVEL=3 and expandable segments on, the rest recorded unset
    assert [(s["name"], s["value"], s["status"]) for s in result["settings"]] == [
        ("ASCEND_GLOBAL_LOG_LEVEL", "3", "ok"),
        ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", "ok"),
    ]
    assert result["findings"] == []


def test_mismatched_pair_is_flagged_with_the_versions_to_install(tmp_path):
    with _store(tmp_path, _run_folder(tmp_path, "mismatched")) as store:
        result = environment_check(store, run_id=1)
        findings = [f for f in device_findings(store, 1) if f.category == "environment"]
    assert result["answer"] == MISMATCH
    assert [(v["component"], v["status"], v["expected"]) for v in result["versions"]] == [
        ("cann", "mismatched", "torch_npu 2.1.0.post10"),
        ("torch_npu", "mismatched", "CANN 8.0.RC3"),
    ]
    assert len(findings) == 1
    assert findings[0].title == f"Version mismatch: {MISMATCH}"
    assert findings[0].evidence["owner"] == "stack"
    assert len(result["findings"]) == 1


# -- environment checks ------------------------------------------------------------------------------------------

# (name, when) → (a value the rule fires on, a good value it does not fire on); every rule needs a row here
CRAFTED = {
    ("ASCEND_LAUNCH_BLOCKING", "in"): ("1", "0"),
    ("ASCEND_GLOBAL_LOG_LEVEL", "in"): ("1", "3"),
    ("ASCEND_SLOG_PRINT_TO_STDOUT", "in"): ("1", "0"),
    ("ASCEND_GLOBAL_EVENT_ENABLE", "in"): ("1", "0"),
    ("TASK_QUEUE_ENABLE", "in"): ("0", "2"),
    ("HCCL_CONNECT_TIMEOUT", "lt"): ("60", "1200"),
    ("HCCL_CONNECT_TIMEOUT", "gt"): ("7200", "1200"),
    ("HCCL_EXEC_TIMEOUT", "in"): ("0", "1836"),
    ("HCCL_BUFFSIZE", "lt"): ("100", "400"),
    ("HCCL_OP_EXPANSION_MODE", "in"): ("HOST", "AIV"),
    ("HCCL_DETERMINISTIC", "in"): ("true", "false"),
    ("HCCL_ALGO", "set"): ("level0:NA;level1:ring", ""),
    ("PYTORCH_NPU_ALLOC_CONF", "lacks"): ("max_split_size_mb:32", "expandable_segments:True"),
    ("ACLNN_CACHE_LIMIT", "lt"): ("1000", "100000"),
    ("HOST_CACHE_CAPACITY", "in"): ("0", "20"),
    ("CPU_AFFINITY_CONF", "in"): ("0", "1"),
    ("INF_NAN_MODE_ENABLE", "in"): ("0", "1"),
    ("CUDA_LAUNCH_BLOCKING", "in"): ("1", "0"),
    ("NCCL_DEBUG", "in"): ("INFO", "WARN"),
    ("NCCL_P2P_DISABLE", "in"): ("1", "0"),
}


def test_every_env_rule_fires_on_a_crafted_value_and_not_on_a_good_one():
    checks = env_rules()["check"]
    assert {(c["name"], c["when"]) for c in checks} == set(CRAFTED)
    for c in checks:
        bad, good = CRAFTED[(c["name"], c["when"])]
        assert fires(c, bad), c["name"]
        assert not fires(c, good), c["name"]
        assert c["source"] in env_rules()["sources"] and c["status"] in ("bad", "advice")
        assert c["cost"] and c["advice"], c["name"]
    assert fires(next(c for c in checks if c["name"] == "PYTORCH_NPU_ALLOC_CONF"), "")  # unset = true


def _with_env(tmp_path: Path, variables: dict[str, str]) -> Path:
    folder = _run_folder(tmp_path, "supported")
    meta_path = folder / "profiler_metadata.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["ENV_VARIABLES"] = variables
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    return folder


def test_crafted_env_in_profiler_metadata_is_checked(tmp_path):
    ascend = {n: bad for (n, _), (bad, _) in CRAFTED.items() if not n.startswith(("CUDA", "NCCL"))}
    ascend["HCCL_CONNECT_TIMEOUT"] = "60"
    with _store(tmp_path, _with_env(tmp_path, ascend)) as store:
        result = environment_check(store)
    statuses = {s["name"]: s["status"] for s in result["settings"]}
    assert statuses == {n: next(c["status"] for c in env_rules()["check"] if c["name"] == n) for n in ascend}
    bad = sorted(f["title"].split(":")[0] for f in result["findings"])
    assert bad == [
        "ASCEND_GLOBAL_LOG_LEVEL=1",
        "ASCEND_LAUNCH_BLOCKING=1",
        "ASCEND_SLOG_PRINT_TO_STDOUT=1",
        "HCCL_CONNECT_TIMEOUT=60",
        "HCCL_DETERMINISTIC=true",
        "HCCL_EXEC_TIMEOUT=0",
        "TASK_QUEUE_ENABLE=0",
    ]
    assert {f["evidence"]["owner"] for f in result["findings"]} == {"config"}
    assert result["answer"].endswith(
        "; 7 setting(s) cost time: " + ", ".join(f"{n}={ascend[n]}" for n in statuses if statuses[n] == "bad")
    )


def test_good_env_gives_no_advice(tmp_path):
    good = {n: g for (n, _), (_, g) in CRAFTED.items() if not n.startswith(("CUDA", "NCCL"))}
    with _store(tmp_path, _with_env(tmp_path, good)) as store:
        result = environment_check(store)
    assert {s["status"] for s in result["settings"]} == {"ok"}
    assert result["findings"] == []


def test_versions_and_settings_printed_in_a_log(tmp_path):
    folder = _run_folder(tmp_path, "supported")
    (folder / "worker.log").write_text(WORKER_LOG, encoding="utf-8")
    with _store(tmp_path, folder) as store:
        result = environment_check(store)
    rows = {(v["component"], v["version"], v["from"]): v["status"] for v in result["versions"]}
    assert rows == {
        ("cann", "8.3.RC1", "profiler_info"): "supported",
        ("cann", "8.2.RC1", "log worker.log:7"): "mismatched",  # the set_env path of another install
        ("torch_npu", "2.7.1", "profiler_info"): "supported",
        ("torch_npu", "2.5.1.post1", "log worker.log:4"): "mismatched",
        ("torch", "2.5.1", "log worker.log:3"): "mismatched",
        ("vllm_ascend", "0.9.1", "log worker.log:2"): "mismatched",
    }
    assert ("ASCEND_LAUNCH_BLOCKING", "1", "log worker.log:5", "bad") in {
        (s["name"], s["value"], s["from"], s["status"]) for s in result["settings"]
    }


# -- diag env ----------------------------------------------------------------------------------------------------


def test_cli_env_json_and_text(tmp_path, capsys):
    from diag.cli import main  # in-process: three subprocesses cost 10 s of imports

    db = tmp_path / "env.duckdb"
    _store(tmp_path, _run_folder(tmp_path, "mismatched")).close()
    assert main(["env", "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"run_id", "job_id", "versions", "settings", "findings"}
    assert (out["run_id"], out["job_id"]) == (1, None)
    assert set(out["versions"][0]) >= {"component", "version", "from", "status", "expected"}
    assert set(out["settings"][0]) >= {"name", "value", "status", "advice", "owner", "source"}
    assert out["findings"][0]["category"] == "environment"
    assert main(["env", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == MISMATCH
    assert "│ torch_npu │ 2.1.0.post8 │ profiler_info │ mismatched │ CANN 8.0.RC3" in text
    assert main(["env", "--db", str(db), "--run", "1", "--job", "1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "diag: error: Invalid value for '--run' / '--job': give --run or --job, not both",
        "Try 'diag env --help' for help.",
    ]


def test_several_runs_need_a_choice(tmp_path):
    with _store(
        tmp_path, _run_folder(tmp_path, "supported"), _run_folder(tmp_path, "mismatched", "rank_1")
    ) as s:
        with pytest.raises(
            DiagError, match="several runs in the database: pick one with --run ID or --job ID"
        ):
            environment_check(s)
        assert environment_check(s, run_id=2)["answer"] == MISMATCH


# -- the postmortem's and the Runs page's Environment sections ------------------------------------------------------


def test_postmortem_environment_carries_the_check(tmp_path):
    from diag.analyses.postmortem_env import environment

    with _store(tmp_path, _with_env(tmp_path, {"ASCEND_LAUNCH_BLOCKING": "1"})) as store:
        env = environment(store, 1)
    assert env["version check"] == (
        "CANN 8.3.RC1, torch_npu 2.7.1: a published pairing (version matrix read 2026-12-01); "
        "1 setting(s) cost time: ASCEND_LAUNCH_BLOCKING=1"
    )
    assert env["setting advice"] == {
        "ASCEND_LAUNCH_BLOCKING": "1 (bad): unset it or export ASCEND_LAUNCH_BLOCKING=0 for performance runs "
        "(1 is for locating the failing operator)"
    }


def test_runs_page_environment_section(tmp_path, monkeypatch):
    from tests.conftest import open_page

    _store(tmp_path, _run_folder(tmp_path, "mismatched")).close()
    at = open_page(monkeypatch, tmp_path / "env.duckdb", "app_pages/01_runs.py")
    assert [w.value for w in at.warning] == [MISMATCH]
    assert "Environment" in [h.value for h in at.subheader]
    versions = next(d.value for d in at.dataframe if "pairs with" in d.value.columns)
    assert versions.values.tolist() == [
        ["cann", "8.0.0", "profiler_info", "mismatched", "torch_npu 2.1.0.post10"],
        ["torch_npu", "2.1.0.post8", "profiler_info", "mismatched", "CANN 8.0.RC3"],
    ]


def test_a_cuda_run_is_not_judged_by_the_ascend_tables(tmp_path):
    from tests.conftest import SAMPLES

    with _store(tmp_path, SAMPLES / "generated" / "llm_decode_cuda") as store:
        result = environment_check(store)
    assert (
        result["answer"]
        == "A cuda run: diag holds no version matrix for it (the tables are the Ascend stack's)"
    )
    assert (result["versions"], result["findings"]) == ([], [])


def test_a_database_of_logs_only_is_checked_from_its_lines(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "worker.log").write_text(WORKER_LOG, encoding="utf-8")
    with _store(tmp_path, tmp_path / "logs") as store:
        result = environment_check(store)
    assert result["run_id"] is None
    assert result["answer"] == (
        "CANN 8.2.RC1, torch_npu 2.5.1.post1, PyTorch 2.5.1, vLLM-Ascend 0.9.1: a published pairing (version matrix "
        "read 2026-12-01); 1 setting(s) cost time: ASCEND_LAUNCH_BLOCKING=1"
    )
    assert [(f["run_id"], f["evidence"]["owner"]) for f in result["findings"]] == [(None, "config")]


def test_every_version_line_rule_reads_its_example_in_duckdb():
    import duckdb

    from diag.analyses.env_check import line_rules

    rules = line_rules()
    with duckdb.connect() as con:
        for rule in rules["line"]:
            got = con.execute(
                "SELECT regexp_matches($x, $pre), regexp_extract($x, $p, 1)",
                {"x": rule["example"], "pre": rules["prefilter"]["pattern"], "p": rule["pattern"]},
            ).fetchone()
            assert got == (True, rule["version"]), rule
