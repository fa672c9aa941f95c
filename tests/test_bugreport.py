"""``diag bugreport``: a real device-exception log plus its profile → the sections a vendor issue needs, the code's
catalog meaning, the failing op, and none of the private strings of the inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, ingest_into

RANK0 = next((SAMPLES / "generated" / "llm_decode_tp2").glob("rank0_*_ascend_pt"), None)
# corpus 051 (tests/fixtures/bugreport/README.md)
DEVICE_EXCEPTION_LOG = FIXTURES / "bugreport" / "plog_aicpu_exception_507018.log"
INCIDENT_LOG = SAMPLES / "incident" / "rank0_1716292_20250115093320983_ascend_pt" / "log"
HOST, IP, USER = "worker-17.corp.example", "10.20.30.40", "alice"
PRIVATE_ENV = {
    "HOSTNAME": HOST,
    "USER": USER,
    "HCCL_IF_IP": IP,
    "ASCEND_HOME_PATH": f"/home/{USER}/Ascend/ascend-toolkit/latest",
    "ASCEND_PROCESS_LOG_PATH": f"/home/{USER}/logs/{HOST}",
}


def _run_folder(tmp_path: Path) -> Path:
    """The generated rank 0 under /…/home/alice/jobs/, its metadata naming a host, an IP and a home folder."""
    if RANK0 is None:
        pytest.skip("sample_traces/generated is not bundled")
    run = tmp_path / "home" / USER / "jobs" / RANK0.name
    shutil.copytree(RANK0, run)
    meta_path = run / "profiler_metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["ENV_VARIABLES"] |= PRIVATE_ENV
    meta_path.write_text(json.dumps(meta))
    return run


def _bugreport(db: Path, capsys, *args: str) -> tuple[int, str, str]:
    from diag.cli import main

    capsys.readouterr()
    code = main(["bugreport", "--db", str(db), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def exception_db(tmp_path) -> Path:
    run = _run_folder(tmp_path)
    (run / "log" / "debug" / "plog").mkdir(parents=True)
    shutil.copy(DEVICE_EXCEPTION_LOG, run / "log" / "debug" / "plog" / "plog-16243_20220922112701000.log")
    db = tmp_path / "br.duckdb"
    with Store(db) as store:
        ingest_into(store, [tmp_path / "home"])
    return db


def test_bugreport_of_a_device_exception_names_code_op_and_evidence(exception_db, capsys):
    code, md, _ = _bugreport(exception_db, capsys, "--run", "1")
    assert code == 0
    assert [x for x in md.splitlines() if x.startswith("#")] == [
        "# Bug report: run 1", "## Versions", "## Device", "## Root cause", "## Error codes", "## Failing op",
        "## Evidence", "## Environment", "## Reproduction",
    ]  # fmt: skip
    assert "- cann\\_version: 8\\.0\\.RC3" in md and "- torch\\_npu\\_version: 2\\.5\\.1" in md
    assert "- 507018 ACL\\_ERROR\\_RT\\_AICPU\\_EXCEPTION (runtime): AI CPU exception" in md
    assert "- E39999 (AI CPU): AI CPU kernel failed \\(inner error\\)" in md
    assert "- op: Unique (op type Unique, named by op)" in md
    assert "- no kernel of Unique in this run's profile: its shapes are not recorded" in md
    assert (
        "plog-16243_20220922112701000.log:1: [ERROR] RUNTIME(16243,msame):2022-09-22-11:27:01.791.865 "
        "[engine.cc:1103]16282 ReportExceptProc:Task exception! device_id=0, stream_id=7, task_id=2, type=1, "
        "retCode=0x2a, [aicpu exception]."
    ) in md
    assert "Owner: code — An AI Core / AI Vector / AI CPU exception" in md
    _, text, _ = _bugreport(exception_db, capsys, "--run", "1", "--format", "json")
    j = json.loads(text)
    assert list(j) == ["run_id", "versions", "device", "root_cause", "error_codes", "failing_op", "evidence",
                       "environment", "profiler", "reproduction", "redacted"]  # fmt: skip
    assert j["root_cause"]["category"] == "device_exception" and j["root_cause"]["owner"] == "code"
    assert [s["owner"] for s in j["root_cause"]["owner_steps"]] == ["code", "vendor"]
    assert [c["code"] for c in j["error_codes"]] == ["0x2a", "507018", "E39999", "EZ9999"]
    assert len(j["evidence"]) == 8 and j["environment"]["HCCL_IF_IP"] == "<ip>"


def test_bugreport_drops_host_ip_and_user_unless_asked(exception_db, capsys, tmp_path):
    out_file = tmp_path / "bug.md"
    code, stdout, err = _bugreport(exception_db, capsys, "--run", "1", "-o", str(out_file))
    assert code == 0 and stdout == "" and err.startswith(f"wrote {out_file} (")
    _, as_json, _ = _bugreport(exception_db, capsys, "--run", "1", "--format", "json")
    for text in (out_file.read_text(), as_json):
        for private in (HOST, "worker-17", IP, f"/home/{USER}", USER, str(tmp_path)):
            assert private not in text, private
    md = out_file.read_text()
    assert "- ASCEND\\_HOME\\_PATH: /home/\\<user\\>/Ascend/ascend\\-toolkit/latest" in md
    assert "- ASCEND\\_PROCESS\\_LOG\\_PATH: /home/\\<user\\>/logs/\\<host\\>" in md
    _, kept, _ = _bugreport(exception_db, capsys, "--run", "1", "--include-hosts", "--format", "json")
    env = json.loads(kept)["environment"]
    assert env["HCCL_IF_IP"] == IP and env["ASCEND_PROCESS_LOG_PATH"] == f"/home/{USER}/logs/{HOST}"
    assert str(tmp_path) not in kept  # paths stay shortened to their tails either way


def test_bugreport_takes_the_ops_shapes_from_its_kernel_rows(tmp_path, capsys):
    run = _run_folder(tmp_path)
    shutil.copytree(INCIDENT_LOG, run / "log")  # the bundled plog of this rank 0 (W11001 on ArgMaxV2)
    db = tmp_path / "shapes.duckdb"
    with Store(db) as store:
        ingest_into(store, [run])
    _, text, _ = _bugreport(db, capsys, "--run", "1", "--format", "json")
    op = json.loads(text)["failing_op"]
    assert (op["name"], op["op_type"], op["named_by"]) == ("ArgMaxV2", "ArgMaxV2", "op")
    assert [(k["input_shapes"], k["input_dtypes"], k["count"]) for k in op["kernel_rows"]] == [
        ("16,152064;", "FLOAT;INT64", 4)
    ]
    _, md, _ = _bugreport(db, capsys, "--run", "1")
    assert "- Call ArgMaxV2 alone with inputs of shapes 16,152064; and dtypes FLOAT;INT64" in md


@pytest.mark.parametrize(
    ("args", "message"),
    [((), "diag: error: --run is required (see diag runs)\n"),
     (("--run", "1", "--format", "html"), "diag: error: --format must be md or json, not 'html'\n")],
)  # fmt: skip
def test_bugreport_usage_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    code, out, err = _bugreport(tmp_path / "none.duckdb", capsys, *args)
    assert (code, out, err) == (2, "", message)
