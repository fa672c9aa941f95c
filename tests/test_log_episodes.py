"""Log diagnosis by incident episode (diag.analyses.log_episodes), wrappers within their own source, the
scope of ``diag logs`` / ``diag report`` with no run, OOM advice from the record's own figures, and
explanations templated from the record (rules/log_fields.toml).  Records are inserted as the parser stores
them (origin / codes / figures set), plus the trap gallery (tests/fixtures/traps/) ingested for real."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from diag.analyses import log_diagnosis as diagnosis
from diag.analyses.postmortem import build_postmortem
from diag.store import Store
from tests.conftest import FIXTURES, cli_json, ingest_into, open_page, run_cli

TRAPS = FIXTURES / "traps"
GIB = 1 << 30
MIB = 1 << 20
T0 = 1_750_848_323_000_000_000  # 2025-06-25 10:45:23 (log local time as if UTC)
S = 1_000_000_000


def make_store(
    tmp_path: Path,
    files: dict[str, list[dict]],
    runs: dict[str, int] | None = None,
    jobs: dict[int, int] | None = None,
) -> Store:
    """A store holding ``files`` (name → records as the parser stores them); ``runs``: name → run_id;
    ``jobs``: run_id → job_id."""
    store = Store(tmp_path / "db.duckdb")
    cur = store.cursor()
    for job_id in sorted(set((jobs or {}).values())):
        cur.execute(
            "INSERT INTO jobs (job_id, job_key, name) VALUES (?, ?, ?)", [job_id, f"job{job_id}", "job"]
        )
    for run_id in sorted(set((runs or {}).values())):
        cur.execute(
            "INSERT INTO runs (run_id, run_key, job_id, name, platform) VALUES (?, ?, ?, ?, 'ascend')",
            [run_id, f"run{run_id}", (jobs or {}).get(run_id), f"rank{run_id}"],
        )
    rules = diagnosis.log_rules()["rule"]
    for file_id, (name, recs) in enumerate(files.items(), start=1):
        run_id = (runs or {}).get(name)
        cur.execute(
            "INSERT INTO files (file_id, run_id, relpath, source, sha256, status, parser) "
            "VALUES (?, ?, ?, ?, ?, 'ok', 'cann_log')",
            [file_id, run_id, name, f"/logs/{name}", f"sha{file_id}"],
        )
        for no, r in enumerate(recs, start=1):
            rule = rules.get(r.get("rule_id") or "", {})
            cur.execute(
                "INSERT INTO log_records (run_id, file_id, record_no, line_no, line_count, ts_ns, level, pid, "
                "rank, code, origin, codes, figures, message, raw, category, rule_id, severity) "
                "VALUES (?, ?, ?, ?, 1, ?, 'ERROR', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, file_id, no, no, r.get("ts_ns"), r.get("pid"), r.get("rank"), r.get("code"),
                 r.get("origin"), r.get("codes"), json.dumps(r["figures"]) if "figures" in r else None,
                 r["raw"], r["raw"], rule.get("category"), r.get("rule_id"), rule.get("severity")],
            )  # fmt: skip
    return store


def by_category(causes: list) -> dict[str, object]:
    return {c.category: c for c in causes}


# -- 1. episodes, not files ----------------------------------------------------------------------------------
def test_untimed_record_takes_time_only_from_its_own_source(tmp_path):
    # a console capture of two processes: the OOM line of process B has no time stamp of its own; the line
    # before it (process A) has one — B must not borrow it
    store = make_store(tmp_path, {"console.log": [
        {"origin": "train pid=8464", "ts_ns": T0, "code": "EI0002", "rule_id": "hccl_notify_timeout",
         "raw": "(train pid=8464) EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out."},
        {"origin": "VllmWorker TP1 pid=961", "rule_id": "oom_torch_npu",
         "raw": "(VllmWorker TP1 pid=961) RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB"},
    ]})  # fmt: skip
    causes = by_category(diagnosis.root_causes(store))
    oom, hccl = causes["oom"], causes["hccl_timeout"]
    assert (oom.first_ns, oom.last_ns) == (None, None)
    assert hccl.first_ns == T0 and oom.episode != hccl.episode and oom.echo_of is None
    assert oom.origins == ["VllmWorker TP1 pid=961"] and hccl.origins == ["train pid=8464"]


def test_untimed_record_takes_the_time_of_its_own_source_nearby(tmp_path):
    store = make_store(tmp_path, {"console.log": [
        {"origin": "P1", "rule_id": "task_timeout", "code": "507048",
         "raw": "(P1) RuntimeError: NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048"},
        {"origin": "P2", "ts_ns": T0 - 3600 * S, "rule_id": "oom_torch_npu", "raw": "(P2) NPU out of memory."},
        {"origin": "P1", "ts_ns": T0, "code": "ERR00100", "rule_id": "wrapper_pta",
         "raw": "(P1) [ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 PTA call acl api failed"},
    ]})  # fmt: skip
    timeout = by_category(diagnosis.root_causes(store))["task_timeout"]
    assert timeout.first_ns == T0 and timeout.evidence[0].ts_ns is None and timeout.evidence[0].eff_ns == T0


def test_rank_comes_from_the_record_or_its_own_source(tmp_path):
    # '[rank6]:' is read on the recompile line only; the OOM record of another process must not get rank 6
    store = make_store(tmp_path, {"console.log": [
        {"origin": "rank6", "ts_ns": T0, "rank": 6, "rule_id": "recompile_limit",
         "raw": "[rank6]:W1101 02:43:39.336000 143 convert_frame.py:896] [1/64] torch._dynamo hit config.cache_size_limit (64)"},
        {"origin": "rank6", "ts_ns": T0 + S, "rule_id": "recompile_guard",
         "raw": "[rank6]:W1101 02:43:40.336000 143 guards.py:1] size mismatch at index 2. expected 1696, actual 1248"},
        {"ts_ns": T0 + 2 * S, "rule_id": "oom_torch_npu", "raw": "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"},
    ]})  # fmt: skip
    causes = by_category(diagnosis.root_causes(store))
    assert causes["oom"].ranks == [] and causes["recompile"].ranks == [6]
    assert [e.rank for e in causes["recompile"].evidence] == [6, 6]  # its source's one rank, not borrowed


def test_ranks_of_one_job_failing_together_are_one_episode(tmp_path):
    # rank 0's device exception, then rank 1's EI0002 ~1800 s later (HCCL_EXEC_TIMEOUT): one failure
    store = make_store(tmp_path, {
        "rank0/plog-100_20250625104000000.log": [
            {"ts_ns": T0, "rank": 0, "code": "EZ9999", "rule_id": "device_aicore_exception",
             "raw": "[ERROR] RUNTIME(100,python3):2025-06-25-10:45:23.000.000 [device_error_proc.cc:1409]100 report error module_type=5, module_name=EZ9999"}],
        "rank1/plog-101_20250625104000000.log": [
            {"ts_ns": T0 + 1836 * S, "rank": 1, "code": "EI0002", "rule_id": "hccl_notify_timeout",
             "raw": "[ERROR] ASCENDCL(101,python3):2025-06-25-11:15:59.000.000 [log_inner.cpp:161]101 EI0002: The wait execution of the Notify register times out."}],
    })  # fmt: skip
    first, second = diagnosis.root_causes(store)
    assert (first.category, first.ranks, second.category, second.ranks) == (
        "device_exception",
        [0],
        "hccl_timeout",
        [1],
    )
    assert second.episode == first.episode and second.echo_of == 1
    assert [e.episode for e in diagnosis.episodes(store)] == [1]


def test_different_runs_never_share_an_episode(tmp_path):
    # two runs (no job) failing one second apart: neither is the other's echo
    store = make_store(tmp_path, {
        "a/plog-1_20250625104000000.log": [
            {"ts_ns": T0, "code": "EZ9999", "rule_id": "device_aicore_exception",
             "raw": "[ERROR] RUNTIME(1,python3):2025-06-25-10:45:23.000.000 [x.cc:1]1 module_name=EZ9999"}],
        "b/plog-2_20250625104000000.log": [
            {"ts_ns": T0 + S, "code": "EI0002", "rule_id": "hccl_notify_timeout",
             "raw": "[ERROR] ASCENDCL(2,python3):2025-06-25-10:45:24.000.000 [y.cc:1]2 EI0002: The wait execution of the Notify register times out."}],
    }, runs={"a/plog-1_20250625104000000.log": 1, "b/plog-2_20250625104000000.log": 2})  # fmt: skip
    causes = by_category(diagnosis.root_causes(store))
    assert causes["device_exception"].episode != causes["hccl_timeout"].episode
    assert causes["hccl_timeout"].echo_of is None
    assert [(e.episode, e.runs) for e in diagnosis.episodes(store)] == [(1, [1]), (2, [2])]


def test_runs_of_one_job_share_an_episode_and_diag_logs_job(tmp_path):
    plogs = {f"rank{r}/plog-{r}_20250625104000000.log": r + 1 for r in range(3)}
    records = [
        {"ts_ns": T0, "rank": 0, "code": "EZ9999", "rule_id": "device_aicore_exception",
         "raw": "[ERROR] RUNTIME(1,python3):2025-06-25-10:45:23.000.000 [x.cc:1]1 module_name=EZ9999"},
        {"ts_ns": T0 + 1800 * S, "rank": 1, "code": "EI0002", "rule_id": "hccl_notify_timeout",
         "raw": "[ERROR] ASCENDCL(2,python3):2025-06-25-11:15:23.000.000 [y.cc:1]2 EI0002: The wait execution of the Notify register times out."},
        {"ts_ns": T0 + 1800 * S, "rank": 2, "code": "EI0002", "rule_id": "hccl_notify_timeout",
         "raw": "[ERROR] ASCENDCL(3,python3):2025-06-25-11:15:23.000.000 [y.cc:1]3 EI0002: The wait execution of the Notify register times out."},
    ]  # fmt: skip
    store = make_store(
        tmp_path,
        {name: [rec] for name, rec in zip(plogs, records, strict=True)},
        runs=plogs,
        jobs={1: 7, 2: 7},
    )  # run 3 (rank 2) is outside the job: its EI0002 is no echo of the job's device exception
    causes = diagnosis.root_causes(store)
    job_eps = {c.episode for c in causes if c.ranks != [2]}
    assert len(job_eps) == 1 and [c.echo_of for c in causes if c.ranks == [1]] == [1]
    assert [c.echo_of for c in causes if c.ranks == [2]] == [None]
    store.close()
    code, out = cli_json("logs", "--db", str(tmp_path / "db.duckdb"), "--job", "7")
    assert code == 0 and out["job"] == 7 and out["episode"] is None
    assert [(c["category"], c["ranks"], c["echo_of"]) for c in out["root_causes"]] == [
        ("device_exception", [0], None), ("hccl_timeout", [1], 1),
    ]  # fmt: skip
    assert sorted(r["rank"] for r in out["records"]) == [0, 1]


def test_far_apart_failures_of_one_source_are_two_episodes(tmp_path):
    store = make_store(tmp_path, {"plog-7_20250625104000000.log": [
        {"ts_ns": T0, "code": "EI0006", "rule_id": "hccl_link_setup", "raw": "EI0006: Getting socket times out."},
        {"ts_ns": T0 + 7200 * S, "rule_id": "oom_torch_npu", "raw": "RuntimeError: NPU out of memory."},
    ]})  # fmt: skip
    eps = diagnosis.episodes(store)
    assert [(e.episode, e.start_ns, e.root_cause["category"]) for e in eps] == [
        (1, T0, "hccl_timeout"), (2, T0 + 7200 * S, "oom"),
    ]  # fmt: skip


def test_wrapper_wraps_only_a_code_of_its_own_source(tmp_path):
    store = make_store(tmp_path, {"console.log": [
        {"origin": "P1", "ts_ns": T0, "code": "ERR00100", "rule_id": "wrapper_pta",
         "raw": "(P1) [ERROR] 2025-06-25-10:45:23 (PID:1, Device:0, RankID:0) ERR00100 PTA call acl api failed"},
        {"origin": "P2", "ts_ns": T0, "code": "EI0002", "rule_id": "hccl_notify_timeout",
         "raw": "(P2) EI0002: [PID: 2] 2025-06-25-10:45:23.100.000 The wait execution of the Notify register times out."},
        {"origin": "P1", "ts_ns": T0 + 60 * S, "code": "EZ3002", "codes": ["EZ3002"], "rule_id": "op_unsupported_engine",
         "raw": "(P1) EZ3002: [PID: 1] 2025-06-25-10:46:23.000.000 Optype [TransData] of Ops kernel [AIcoreEngine] is unsupported."},
        {"origin": "P3", "ts_ns": T0, "code": "ERR00100", "rule_id": "wrapper_pta",
         "raw": "(P3) [ERROR] 2025-06-25-10:45:23 (PID:3, Device:1, RankID:1) ERR00100 PTA call acl api failed"},
        {"origin": "P3", "code": "507035", "codes": ["507035"],
         "raw": "(P3) [Error]: The vector core execution is abnormal. runtime result = 507035"},
    ]})  # fmt: skip
    wrapper = by_category(diagnosis.root_causes(store))["error_wrapper"]
    wraps = {e.origin: e.wraps for e in wrapper.evidence}
    # P1: the next code of P1 is 60 s later (past wrap_window_s) and P2's EI0002 is another process's
    assert wraps == {"P1": None, "P3": "507035"}


# -- 2. scope: the latest incident episode -------------------------------------------------------------------
def two_incidents(tmp_path: Path) -> Store:
    return make_store(tmp_path, {
        "014_console.log": [
            {"origin": "train pid=8464", "ts_ns": T0, "code": "507048", "rule_id": "task_timeout",
             "raw": "(train pid=8464) RuntimeError: NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048"},
            {"origin": "train pid=8464", "ts_ns": T0, "code": "EI0002", "rule_id": "hccl_notify_timeout",
             "raw": "(train pid=8464) EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out."}],
        "006_console.log": [
            {"origin": "VllmWorker TP1 pid=961", "ts_ns": T0 + 86400 * S, "rule_id": "oom_torch_npu",
             "raw": "(VllmWorker TP1 pid=961) RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB"}],
    })  # fmt: skip


def test_report_without_scope_covers_the_latest_incident_episode(tmp_path):
    store = two_incidents(tmp_path)
    pm = build_postmortem(store)
    assert pm.episode == 2 and [e["episode"] for e in pm.episodes] == [1, 2]
    assert pm.scope == (
        "latest incident episode #2 (2025-06-26 10:45:23.000000; 006_console.log; VllmWorker TP1 pid=961)"
    )
    assert pm.root_cause["category"] == "oom"
    said = [s.text for s in pm.what_happened]
    assert not any("Device task timeout" in t or "HCCL" in t.split("Not covered")[0] for t in said)
    assert said[-1].startswith(
        "Not covered here: 1 other episode(s): episode #1 (2025-06-25 10:45:23.000000;"
    )
    assert [s.text for s in pm.contributing] == []


def test_cli_logs_json_names_the_episode(tmp_path):
    two_incidents(tmp_path).close()
    code, out = cli_json("logs", "--db", str(tmp_path / "db.duckdb"))
    assert code == 0 and out["episode"] == 2 and out["run"] is None and out["job"] is None
    assert [c["category"] for c in out["root_causes"]] == ["oom"] and out["root_causes"][0]["episode"] == 2
    assert [
        (e["episode"], e["files"], e["origins"], e["root_cause"]["category"]) for e in out["episodes"]
    ] == [
        (1, ["/logs/014_console.log"], ["train pid=8464"], "hccl_timeout"),
        (2, ["/logs/006_console.log"], ["VllmWorker TP1 pid=961"], "oom"),
    ]
    assert out["scope"].startswith("latest incident episode #2") and "1 other episode(s)" in out["scope"]
    code, out = cli_json("logs", "--db", str(tmp_path / "db.duckdb"), "--all-episodes")
    assert out["episode"] is None and {c["episode"] for c in out["root_causes"]} == {1, 2}
    code, out = cli_json("logs", "--db", str(tmp_path / "db.duckdb"), "--episode", "1")
    assert {c["category"] for c in out["root_causes"]} == {"hccl_timeout", "task_timeout"}


def test_cli_report_episode_option(tmp_path):
    two_incidents(tmp_path).close()
    code, out = cli_json_report(tmp_path, "--episode", "1")
    assert code == 0 and out["episode"] == 1 and out["root_cause"]["category"] == "hccl_timeout"
    assert out["scope"] == "episode #1 (2025-06-25 10:45:23.000000; 014_console.log; train pid=8464)"
    proc = run_cli("report", "--db", str(tmp_path / "db.duckdb"), "--episode", "9")
    assert proc.returncode == 1 and "no episode 9 (there are 2)" in proc.stderr


def cli_json_report(tmp_path: Path, *args: str) -> tuple[int, dict]:
    proc = run_cli("report", "--db", str(tmp_path / "db.duckdb"), "--format", "json", *args)
    return proc.returncode, json.loads(proc.stdout) if proc.returncode == 0 else {}


def test_logs_page_shows_one_episode_at_a_time(tmp_path, monkeypatch):
    two_incidents(tmp_path).close()
    at = open_page(monkeypatch, tmp_path / "db.duckdb", "app_pages/07_logs.py")
    assert at.selectbox(key="logs_episode").value == 2
    heads = [m.value for m in at.markdown if m.value.startswith("**#")]
    assert len(heads) == 1 and "Out of device memory" in heads[0]
    at.selectbox(key="logs_episode").select(1).run()
    heads = [m.value for m in at.markdown if m.value.startswith("**#")]
    assert len(heads) == 2 and "HCCL communication failure" in heads[0] and "Device task timeout" in heads[1]


# -- 3. advice from the figures ------------------------------------------------------------------------------
def oom_cause(tmp_path: Path, figures: dict) -> object:
    store = make_store(tmp_path, {"oom.log": [
        {"ts_ns": T0, "rule_id": "oom_torch_npu", "figures": figures,
         "raw": "RuntimeError: NPU out of memory. Tried to allocate ..."}]})  # fmt: skip
    return diagnosis.root_causes(store)[0]


def test_oom_advice_says_fragmentation_when_the_figures_show_it(tmp_path):
    rc = oom_cause(tmp_path, {"requested_bytes": 2 * GIB, "free_bytes": int(1.2 * GIB), "capacity_bytes": int(60.97 * GIB),
                              "allocated_bytes": int(49.47 * GIB), "reserved_bytes": int(57.55 * GIB)})  # fmt: skip
    assert rc.advice == [
        "Requested 2.00 GiB with 1.20 GiB free of 60.97 GiB.",
        "Reserved 57.55 GiB vs allocated 49.47 GiB: 8.08 GiB held by the caching allocator — fragmentation likely "
        "(try PYTORCH_NPU_ALLOC_CONF=expandable_segments:True).",
    ]
    assert rc.fix.startswith(rc.advice[0])


def test_oom_advice_claims_no_fragmentation_the_figures_contradict(tmp_path):
    # corpus 006: 22 MiB asked, 10.24 GiB allocated, 10.65 GiB reserved, 19.52 MiB free of 60.97 GiB
    rc = oom_cause(tmp_path, {"requested_bytes": 22 * MIB, "free_bytes": int(19.52 * MIB), "capacity_bytes": int(60.97 * GIB),
                              "allocated_bytes": int(10.24 * GIB), "reserved_bytes": int(10.65 * GIB)})  # fmt: skip
    assert rc.advice[0] == "Requested 22.00 MiB with 19.52 MiB free of 60.97 GiB."
    assert rc.advice[1] == (
        "Reserved 10.65 GiB vs allocated 10.24 GiB: 419.84 MiB held by the caching allocator (3.8% of reserved): "
        "most of it is in use by tensors."
    )
    assert "fragmentation likely" not in rc.fix
    assert "reserved ≫ allocated" not in rc.fix
    assert rc.advice[2].startswith("50.30 GiB of the 60.97 GiB device is neither free nor reserved")


def test_oom_without_figures_gives_no_figure(tmp_path):
    rc = oom_cause(tmp_path, {})
    assert rc.advice == [] and "GiB" not in rc.fix and "reserved ≫ allocated" not in rc.fix


# -- 4. explanations that say what the log says --------------------------------------------------------------
FAIL_ON_LIMIT = (
    "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive "
    "recompilations can degrade performance due to the compilation overhead of each recompilation. To monitor "
    "recompilations, enable TORCH_LOGS=recompiles. If recompilations are expected, consider increasing "
    "torch._dynamo.config.cache_size_limit to an appropriate value."
)


def test_fail_on_recompile_limit_is_a_hard_failure_not_a_fallback(tmp_path):
    store = make_store(
        tmp_path, {"c.log": [{"ts_ns": T0, "rule_id": "recompile_limit_fail", "raw": FAIL_ON_LIMIT}]}
    )
    rc = diagnosis.root_causes(store)[0]
    assert rc.title == "Recompile limit hit: FailOnRecompileLimitHit (a hard failure)"
    assert rc.severity == "high"  # a hard failure stops the job: above the warning form's medium
    assert "eager" not in rc.explanation and "did not fall back" in rc.explanation
    assert "recompile_limit" in rc.explanation and "with fullgraph=True" in rc.explanation
    assert "the log's hint: raise torch._dynamo.config.cache_size_limit" in rc.fix


def test_recompile_limit_warning_names_the_limit_and_claims_no_more(tmp_path):
    line = "[rank6]:W1101 02:43:39.336000 143 convert_frame.py:896] [1/64] torch._dynamo hit config.cache_size_limit (64)"
    store = make_store(tmp_path, {"c.log": [{"ts_ns": T0, "rule_id": "recompile_limit", "raw": line}]})
    rc = diagnosis.root_causes(store)[0]
    assert rc.title == "Recompile limit hit"
    assert rc.explanation == "Dynamo reached its recompile limit: cache_size_limit (64)."


def test_aclnn_op_is_named(tmp_path):
    line = ("RuntimeError: aclnnLightningIndexer or aclnnLightningIndexerGetWorkspaceSize not in libopapi.so, "
            "or libopapi.sonot found.")  # fmt: skip
    store = make_store(tmp_path, {"c.log": [{"ts_ns": T0, "rule_id": "op_not_found_aclnn", "raw": line}]})
    rc = diagnosis.root_causes(store)[0]
    assert "aclnn operator, aclnnLightningIndexer, that" in rc.explanation
    assert "one that has aclnnLightningIndexer" in rc.fix


FIELDS = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_fields.toml"


def fields_file() -> dict:
    return (
        tomllib.loads(FIELDS.read_text(encoding="utf-8"))["field"]
        if FIELDS.is_file()
        else {"none": {"pattern": "x"}}
    )


@pytest.mark.parametrize("name", sorted(k for k, v in fields_file().items() if v["pattern"]))
def test_field_reads_its_example(name):
    from diag.analyses import log_explain

    spec = fields_file()[name]
    assert log_explain.read_fields([spec["example"]]).get(name) == spec["value"]


def test_templates_name_only_known_fields_and_render_without_them():
    from diag.analyses import log_explain

    rules = diagnosis.log_rules()["rule"]
    known = set(fields_file())
    for rid, rule in rules.items():
        for key in ("title", "explanation", "fix"):
            text = rule.get(key, "")
            assert set(re.findall(r"\{(\w+)\}", text)) <= known, (rid, key)
            bare = log_explain.render(text, {})
            assert not re.search(r"[{}«»]", bare), (rid, key, bare)


# -- 5. the trap gallery -------------------------------------------------------------------------------------
def ns(text: str) -> int:
    """'2025-09-04 09:50:11.954378' (log local time, stored as if UTC) → int ns."""
    from datetime import UTC, datetime

    day, frac = text.split(".")
    base = datetime.strptime(day, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(base.timestamp()) * S + int(frac.ljust(9, "0"))


def ingest_trap(tmp_path: Path, name: str) -> Store:
    store = Store(tmp_path / "db.duckdb")
    summary = ingest_into(store, [TRAPS / name / "console.log"])
    assert [f.status for f in summary.files] == ["ok"]
    return store


def assert_from_own_records(store: Store, rc) -> None:  # noqa: ANN001
    """The root cause's time, ranks and codes are those of its own records (or their own source's)."""
    refs = [(e.file_id, e.record_no) for e in rc.evidence]
    own = (
        store.cursor()
        .execute(
            "SELECT ts_ns, rank, code, codes, origin FROM log_records WHERE list_contains(?, [file_id, record_no])",
            [[list(r) for r in refs]],
        )
        .fetchall()
    )
    assert {e.origin for e in rc.evidence} == {o for *_, o in own} and len(own) == len(refs)
    assert rc.first_ns is None or rc.first_ns in {e.eff_ns for e in rc.evidence}
    codes = {c for _, _, code, codes, _ in own for c in (codes or []) + [code] if c}
    assert {c["code"] for c in rc.codes} <= codes
    assert set(rc.ranks) <= {e.rank for e in rc.evidence}


def test_trap_concatenated_logs_every_cause_from_its_own_records(tmp_path):
    store = ingest_trap(tmp_path, "concatenated_logs")
    causes = diagnosis.root_causes(store)
    for rc in causes:
        assert_from_own_records(store, rc)
    got = {
        c.category: (c.episode, c.first_ns, c.ranks, sorted(k["code"] for k in c.codes), c.origins)
        for c in causes
    }
    assert got["device_exception"] == (
        2,
        ns("2025-09-04 09:50:11.954378"),
        [],
        ["0x31", "EZ9999"],
        ["pid 838"],
    )
    assert got["oom"] == (3, None, [], [], ["VllmWorker TP1 pid=961"])  # untimed: no stranger's time, no rank
    assert got["hccl_timeout"] == (1, ns("2025-06-25 10:45:23.586187"), [8], ["EI0002"], ["train pid=8464"])
    assert got["task_timeout"][:4] == (1, ns("2025-06-25 10:45:23.0"), [8], ["507048"])
    eps = diagnosis.episodes(store)
    assert [(e.episode, e.origins, e.incident) for e in eps] == [
        (1, ["train pid=8464"], True), (2, ["pid 838"], True), (3, ["VllmWorker TP1 pid=961"], True),
        (4, ["rank0"], False),
    ]  # fmt: skip


def test_trap_concatenated_logs_report_names_one_episode(tmp_path):
    store = ingest_trap(tmp_path, "concatenated_logs")
    pm = build_postmortem(store)
    assert pm.episode == 2 and pm.root_cause["category"] == "device_exception"
    assert pm.scope == "latest incident episode #2 (2025-09-04 09:50:11.954378; console.log; pid 838)"
    told = [s.text for s in pm.what_happened]
    assert told[0].startswith("2025-09-04 09:50:11.954378 — First error: Device exception")
    assert told[-1].startswith("Not covered here: 3 other episode(s): episode #1 (2025-06-25 10:45:23.000000")
    assert not any("Out of device memory" in t or "HCCL" in t for t in told[:-1])


def test_trap_wrapper_other_process(tmp_path):
    store = ingest_trap(tmp_path, "wrapper_other_process")
    causes = by_category(diagnosis.root_causes(store))
    wrapper = causes["error_wrapper"]
    assert [(e.origin, e.code, e.wraps) for e in wrapper.evidence] == [
        ("VllmWorker TP1 pid=1066924", "ERR00100", None)
    ]  # the EI0002 on the next line is worker TP0's
    device, hccl = causes["device_exception"], causes["hccl_timeout"]
    assert (device.rank, device.origins, [c["code"] for c in device.codes]) == (
        1,
        ["VllmWorker TP1 pid=1066924"],
        ["507035"],
    )
    assert device.first_ns == ns("2025-04-29 18:46:11.0")  # its own source's stamp, one record away
    assert (hccl.origins, hccl.echo_of, hccl.episode) == (["VllmWorker TP0 pid=1066923"], 1, device.episode)
    for rc in causes.values():
        assert_from_own_records(store, rc)


def test_trap_one_device_exception_is_one_cause(tmp_path):
    store = ingest_trap(tmp_path, "one_device_exception")
    serious = [c for c in diagnosis.root_causes(store) if c.severity == "high"]
    assert [(c.category, c.count, c.episode) for c in serious] == [("device_exception", 2, 1)]
    device = serious[0]
    assert device.first_ns == device.last_ns == ns("2026-04-15 11:19:38.491647")  # the block's own time
    assert sorted(k["code"] for k in device.codes) == ["507015", "EZ9999"]
    # the device's own report (line 3) leads; the API return-code line (line 1) only echoes it (#16)
    assert [e.line_no for e in device.evidence] == [3, 1]
    assert [e.episode for e in diagnosis.episodes(store)] == [1]
    assert "errorStr: The DDR address of the MTE instruction is out of range" in device.explanation


def _incident_causes(store: Store) -> list[tuple[str, tuple[int, ...], int | None, tuple[str, ...], int]]:
    """(category, ranks, first time, codes, first evidence line) of every high / medium root cause."""
    return [
        (
            rc.category,
            tuple(rc.ranks),
            rc.first_ns,
            tuple(sorted(c["code"] for c in rc.codes)),
            rc.evidence[0].line_no,
        )
        for rc in diagnosis.root_causes(store)
        if rc.severity in ("high", "medium")
    ]


@pytest.mark.corpus
def test_corpus_logs_concatenated_keep_their_own_root_causes(corpus, tmp_path):
    # A console capture made by pasting real logs one after another (a blank line between), as people do: every
    # incident root cause found in a log alone is found in the paste with the same category, ranks, time and codes
    # — nothing borrowed from the neighbouring paste, no two pastes' untimed errors stitched into one cause.
    # The logs the trap fixtures were built from are left out (the rules were checked on those).
    trap_sources = {"001", "005", "006", "014", "015", "017", "018", "028"}
    logs = sorted(p for p in (corpus / "cann_logs").glob("*.log") if p.name[:3] not in trap_sources)
    alone: dict[str, list] = {}
    offsets: dict[str, int] = {}
    lines: list[str] = []
    for i, log in enumerate(logs):
        store = Store(tmp_path / f"alone{i}.duckdb")
        ingest_into(store, [log])
        alone[log.name] = sorted(c[:4] for c in _incident_causes(store))
        store.close()
        offsets[log.name] = len(lines)
        lines += log.read_bytes().decode("utf-8", errors="replace").splitlines() + [""]
    (tmp_path / "paste").mkdir()
    (tmp_path / "paste" / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "paste.duckdb")
    ingest_into(store, [tmp_path / "paste"])
    pasted = _incident_causes(store)
    order = sorted(offsets, key=offsets.get)

    def pasted_from(line_no: int) -> str:
        return [name for name in order if offsets[name] < line_no][-1]

    together = {name: sorted(c[:4] for c in pasted if pasted_from(c[4]) == name) for name in order}
    assert sum(map(len, alone.values())) >= 30  # the corpus' incidents, not an empty comparison
    assert {n: c for n, c in together.items() if c != alone[n]} == {}


@pytest.mark.parametrize(("between", "episodes"), [("\n", 2), ("\n.....\n\n", 1), ("\n[...]\n", 1)])
def test_an_elision_line_joins_the_untimed_lines_around_it(tmp_path, between, episodes):
    """Two untimed pastes split by a blank line are two episodes; a "....." / "[...]" line says lines of the same
    log were cut out there, so the records around it are one episode (#16, w2_009 of the wild train half)."""
    log = tmp_path / "console.log"
    log.write_text(
        "W1110 17:56:13.321000 77473 torch/_dynamo/convert_frame.py:1550] [0/8] torch._dynamo hit config.recompile_limit (8)\n"
        + between
        + "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True.\n"
    )  # fmt: skip
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [log])
        assert len(diagnosis.episodes(store)) == episodes
