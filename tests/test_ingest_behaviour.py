"""Ingest as a user runs it: idempotence, --replace, truncated and bad files, archives, earlier runs intact."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import (
    FIXTURES,
    REAL_AICPU_TRACE,
    REAL_LEVEL2,
    ROOT,
    cli_json,
    ingest_into,
    query,
    run_cli,
)
from tests.oracle import complete_prefix_events, kernel_figures, trace_counts

KD = FIXTURES / "ascend_kernel_details"
TABLES = (
    "device_tasks",
    "host_ops",
    "kernels",
    "overlap_slices",
    "memory",
    "op_details",
    "comm_ops",
    "runs",
    "files",
)


def counts(db: Path) -> dict[str, int]:
    return {t: query(db, f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}


def test_ok_fixture_exact_values(db):
    code, payload = cli_json("ingest", str(KD / "ok_crlf_tab_na.csv"), "--db", str(db))
    assert code == 0 and payload["files"][0]["status"] == "ok"
    rows = query(
        db,
        "SELECT name, task_kind, start_ns, dur_ns, wait_ns, block_dim, step FROM kernels ORDER BY start_ns",
    )
    assert rows == [
        ("aclnnMatmul_MatMulV3Common_MatMulV3", "AI_CORE", 1736405443881410320, 50621, 0, 20, 3),
        ("aclnnCast_CastAiCpu_Cast", "AI_CPU", 1736405443881500001, 12500, 39060, 1, 3),
        ("hcom_allReduce__868_0_1", "COMMUNICATION", 1736405443881600000, 100000, 87499, None, 3),
    ]
    # no trace in this run: the kernel rows stand in as its device tasks
    assert query(db, "SELECT count(*), min(source) FROM device_tasks") == [(3, "kernel_details")]


def test_ingest_twice_stores_once_and_replace_reparses(db):
    code, first = cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    assert code == 0 and first["summary"]["failed"] == 0 and first["summary"]["ok"] == 14
    before = counts(db)
    code, second = cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    assert code == 0 and second["summary"]["unchanged"] == 14 and second["summary"]["rows"] == {}
    assert counts(db) == before
    code, third = cli_json("ingest", str(REAL_LEVEL2), "--db", str(db), "--replace")
    assert code == 0 and third["summary"]["ok"] == 14
    assert counts(db) == before
    assert before["runs"] == 1 and before["device_tasks"] == 835


def _cut_trace(src: Path, dest_dir: Path, fraction: float) -> tuple[Path, int]:
    data = src.read_bytes()
    cut = int(len(data) * fraction)
    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / "trace_view.json"
    out.write_bytes(data[:cut])
    return out, cut


@pytest.mark.parametrize("fraction", [0.05, 0.37, 0.5, 0.83, 0.999])
def test_truncated_trace_keeps_complete_prefix(tmp_path, db, fraction):
    data = REAL_AICPU_TRACE.read_bytes()
    path, cut = _cut_trace(REAL_AICPU_TRACE, tmp_path / f"cut{fraction}", fraction)
    code, payload = cli_json("ingest", str(path), "--db", str(db))
    f = payload["files"][0]
    assert code == 0 and f["status"] == "partial"
    assert f"truncated at byte {cut}" in f["message"]
    expected = trace_counts(complete_prefix_events(data, cut))
    for table in ("device_tasks", "host_ops", "overlap_slices", "links"):
        assert f["rows"].get(table, 0) == expected[table], (table, f["rows"], expected)
    assert query(db, "SELECT status FROM files") == [("partial",)]


def test_truncated_csv_row_is_dropped_and_named(db):
    code, payload = cli_json("ingest", str(KD / "bad_truncated_row.csv"), "--db", str(db))
    f = payload["files"][0]
    assert code == 0 and f["status"] == "partial" and f["rows"]["kernels"] == 3
    assert "line 5" in f["message"] and "truncated" in f["message"]


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("ascend_kernel_details/bad_missing_duration.csv", "missing required column(s) Duration(us)"),
        ("ascend_kernel_details/bad_gbk.csv", "not UTF-8: looks like GB18030/GBK"),
        ("ascend_kernel_details/bad_empty.csv", "empty file"),
        ("ascend_trace_view/bad_binary.json", "binary content"),
    ],
)
def test_bad_input_one_line_error_and_earlier_runs_untouched(db, fixture, reason):
    cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    before = counts(db)
    proc = run_cli("ingest", str(FIXTURES / fixture), "--db", str(db))
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and fixture.split("/")[-1] in errors[0] and reason in errors[0], proc.stderr
    after = counts(db)
    assert {k: v for k, v in after.items() if k != "files"} == {
        k: v for k, v in before.items() if k != "files"
    }
    assert after["files"] == before["files"] + 1  # the failure is in the ledger, nothing else changed
    assert query(db, "SELECT status FROM files WHERE status = 'failed'") == [("failed",)]


def test_file_over_size_cap_is_refused(db):
    proc = run_cli("ingest", str(REAL_AICPU_TRACE), "--db", str(db), "--max-file-size", "1000")
    assert proc.returncode == 1
    assert "over the size cap of 1000 bytes" in proc.stderr
    assert query(db, "SELECT count(*) FROM device_tasks") == [(0,)]


def test_batch_carries_on_after_a_failure(tmp_path, db):
    folder = tmp_path / "mixed"
    shutil.copytree(FIXTURES / "real" / "msinsight_test_rank_0", folder / "test_rank_0")
    (folder / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").write_bytes(b"")
    code, payload = cli_json("ingest", str(folder), "--db", str(db))
    assert code == 1
    s = payload["summary"]
    assert (s["failed"], s["partial"], s["ok"]) == (1, 1, 7)
    assert query(db, "SELECT count(*) FROM kernels")[0][0] == 20


def _zip_dir(src: Path, dest: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                zf.write(p, f"{src.name}/{p.relative_to(src).as_posix()}")
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return dest


def test_archive_of_a_run_is_the_same_run_as_its_folder(tmp_path, db):
    archive = _zip_dir(REAL_LEVEL2, tmp_path / "level2.zip")
    code, payload = cli_json("ingest", str(archive), "--db", str(db))
    assert code == 0 and payload["summary"]["ok"] == 14
    assert payload["files"][0]["path"].startswith(str(archive) + "!/")
    code, payload = cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    assert code == 0 and payload["summary"]["unchanged"] == 14
    tgz = tmp_path / "level2.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(REAL_LEVEL2, arcname=REAL_LEVEL2.name)
    code, payload = cli_json("ingest", str(tgz), "--db", str(db))
    assert code == 0 and payload["summary"]["unchanged"] == 14
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


@pytest.mark.parametrize(
    ("member", "reason"),
    [("../../escape.csv", "escapes the archive folder"), ("/etc/evil.csv", "absolute path")],
)
def test_archive_member_escaping_its_folder_is_refused(tmp_path, db, member, reason):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("run/ASCEND_PROFILER_OUTPUT/kernel_details.csv", (KD / "ok_crlf_tab_na.csv").read_bytes())
        zf.writestr(member, b"x")
    proc = run_cli("ingest", str(archive), "--db", str(db))
    assert proc.returncode == 1 and reason in proc.stderr and "evil.zip" in proc.stderr
    assert not (tmp_path.parent / "escape.csv").exists()
    assert query(db, "SELECT count(*) FROM kernels") == [(0,)]


def test_archive_symlink_member_is_refused(tmp_path, db):
    archive = tmp_path / "link.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("run/trace_view.json")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
        data = b"[]"
        info2 = tarfile.TarInfo("run/other.json")
        info2.size = len(data)
        tf.addfile(info2, io.BytesIO(data))
    proc = run_cli("ingest", str(archive), "--db", str(db))
    assert proc.returncode == 1 and "is a link; refused" in proc.stderr


def test_zip_bomb_is_refused(tmp_path, db):
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("run/kernel_details.csv", b"0" * (300 << 20))
    proc = run_cli("ingest", str(archive), "--db", str(db))
    assert proc.returncode == 1 and "decompression bomb" in proc.stderr


def test_runs_json_keys_and_values(db):
    cli_json("ingest", str(REAL_LEVEL2), str(REAL_AICPU_TRACE), "--db", str(db))
    code, payload = cli_json("runs", "--db", str(db))
    assert code == 0
    runs = {r["name"]: r for r in payload["runs"]}
    level2 = runs["msinsight_level2_rank0_ascend_pt"]
    assert set(level2) >= {
        "run_id",
        "platform",
        "rank",
        "device",
        "source",
        "start_ns",
        "end_ns",
        "duration_ns",
        "profiler_level",
        "host_ops",
        "device_tasks",
        "kernels",
        "ai_cpu_tasks",
        "steps",
        "files",
    }
    assert (level2["platform"], level2["rank"], level2["device"], level2["profiler_level"]) == (
        "ascend",
        0,
        0,
        "Level2",
    )
    kernels = kernel_figures(REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")["rows"]
    assert kernels == 191
    assert (level2["device_tasks"], level2["host_ops"], level2["kernels"], level2["steps"]) == (
        835,
        3594,
        kernels,
        1,
    )
    assert runs["mstt_timeline_advice"]["ai_cpu_tasks"] == 2


def test_sql_is_read_only(db):
    cli_json("ingest", str(KD / "ok_crlf_tab_na.csv"), "--db", str(db))
    code, payload = cli_json("sql", "SELECT count(*) AS n FROM kernels", "--db", str(db))
    assert code == 0 and payload["rows"] == [{"n": 3}]
    proc = run_cli("sql", "DELETE FROM kernels", "--db", str(db))
    assert proc.returncode != 0 and "read-only" in proc.stderr.lower()
    assert query(db, "SELECT count(*) FROM kernels") == [(3,)]


def test_digest_computed_alongside_the_parse_is_the_files_sha256(tmp_path, monkeypatch):
    """Large new files are hashed on a thread beside their parse (diag.ingest._Digest): same ledger, same
    idempotence.  The threshold is lowered so that these small real files take that path."""
    import hashlib

    import diag.ingest as ingest_mod
    from diag.store import Store

    monkeypatch.setattr(ingest_mod, "_HASH_ALONGSIDE_BYTES", 0)
    run = FIXTURES / "real" / "msinsight_test_rank_0"
    db = tmp_path / "d.duckdb"
    outcomes = []
    for _ in range(2):
        with Store(db) as store:
            outcomes.append(ingest_into(store, [run]))
    first, second = outcomes
    assert first.count("failed") == 0 and first.count("ok") >= 5
    assert second.count("unchanged") == first.count("ok") + first.count("partial")
    stored = dict(query(db, "SELECT source, sha256 FROM files WHERE status <> 'failed'"))
    assert len(stored) == first.count("ok") + first.count("partial")
    for source, digest in stored.items():
        assert digest == hashlib.sha256(Path(source).read_bytes()).hexdigest(), source


def test_trace_with_numeric_ts_keeps_every_nanosecond(tmp_path, db):
    """A trace rewritten with ts as JSON numbers (not the exporters' strings) stores the same instants: a
    float64 would be ~0.25 µs off at epoch magnitude."""
    import re

    text = (REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text(encoding="utf-8")
    numeric, n = re.subn(r'"ts": "(-?[0-9.]+)"', r'"ts": \1', text)
    assert n > 1000
    run = tmp_path / "numeric_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    (run / "trace_view.json").write_text(numeric, encoding="utf-8")
    other = tmp_path / "other.duckdb"
    for target, path in (
        (db, REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"),
        (other, run / "trace_view.json"),
    ):
        code, payload = cli_json("ingest", str(path), "--db", str(target))
        assert code == 0 and payload["files"][0]["status"] == "ok", payload
    sql = "SELECT start_ns, dur_ns, name FROM {} ORDER BY ALL"
    for table in ("device_tasks", "host_ops"):
        want, got = query(db, sql.format(table)), query(other, sql.format(table))
        assert len(want) > 100 and got == want, table
    assert any(start % 1000 for start, _, _ in query(db, sql.format("device_tasks")))  # ns digits present


def test_chinese_and_quoted_paths(tmp_path):
    """Users' folders hold Chinese names and apostrophes: the database, its temp folder and the inputs."""
    home = tmp_path / "性能 分析's runs"
    run = home / "推理_rank0_ascend_pt"
    shutil.copytree(FIXTURES / "real" / "msinsight_test_rank_0", run)
    shutil.copytree(FIXTURES / "cann_log", home / "日志")
    db = home / "诊断's.duckdb"
    code, payload = cli_json("ingest", str(home), "--db", str(db))
    assert payload["summary"]["failed"] == 0, [f for f in payload["files"] if f["status"] == "failed"]
    assert payload["summary"]["ok"] >= 10 and payload["summary"]["runs"] == [1]
    assert query(db, "SELECT source FROM runs") == [(str(run),)]
    assert query(db, "SELECT count(*) FROM log_records WHERE file_id IN (SELECT file_id FROM files "
                     "WHERE source LIKE '%日志%')")[0][0] > 0  # fmt: skip
    out = home / "导出"
    assert run_cli("export", "--db", str(db), str(out)).returncode == 0
    assert (out / "runs.parquet").is_file() and (out / "kernels").is_dir()


def test_lenient_retry_keeps_run_numbering(db):
    """A CSV with a malformed row is read again leniently in a new transaction: its run is still run 1."""
    csv = FIXTURES / "real" / "msinsight_test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    code, payload = cli_json("ingest", str(csv), "--db", str(db))
    assert payload["files"][0]["status"] == "partial" and payload["summary"]["runs"] == [1]
    assert query(db, "SELECT run_id FROM runs") == [(1,)]


def _gbk(name: str) -> bytes:
    return name.encode("gb18030")


def test_gbk_named_folders_files_and_archives(tmp_path):
    """Names written by a Chinese-locale system are GBK bytes, not UTF-8: read, stored and shown decoded."""
    src = FIXTURES / "real" / "msinsight_test_rank_0"
    top = os.fsencode(tmp_path) + b"/" + _gbk("性能数据")
    run = top + b"/" + _gbk("推理") + b"_rank0_ascend_pt"
    for dirpath, _, files in os.walk(src):
        rel = os.fsencode(Path(dirpath).relative_to(src))
        os.makedirs(os.path.join(run, rel), exist_ok=True)
        for f in files:
            shutil.copy(Path(dirpath) / f, os.path.join(run, rel, os.fsencode(f)))
    os.rename(os.path.join(run, b"ASCEND_PROFILER_OUTPUT", b"kernel_details.csv"),
              os.path.join(run, b"ASCEND_PROFILER_OUTPUT", _gbk("核函数") + b".csv"))  # fmt: skip
    other = tmp_path / "other_run"  # another capture (its own profiler_info), archived with GBK member names
    shutil.copytree(src, other)
    info = other / "profiler_info_0.json"
    info.write_text(info.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with tarfile.open(tmp_path / "gbk.tar.gz", "w:gz", format=tarfile.GNU_FORMAT, encoding="gb18030") as tf:
        tf.add(other, arcname="归档_rank0_ascend_pt")

    def ingest(*args: bytes | str) -> tuple[int, dict]:
        cmd = [sys.executable, "-m", "diag.cli", "ingest", *args, "--json"]
        proc = subprocess.run([os.fsencode(a) for a in cmd], capture_output=True, cwd=ROOT, timeout=300)
        return proc.returncode, json.loads(proc.stdout.decode("utf-8"))  # the output is UTF-8 throughout

    db = str(tmp_path / "d.duckdb")
    for _ in range(2):  # the second time everything is already stored
        code, payload = ingest(top, os.fsencode(tmp_path / "gbk.tar.gz"), "--db", db)
        assert payload["summary"]["failed"] == 0, [f for f in payload["files"] if f["status"] == "failed"]
    assert payload["summary"]["unchanged"] == len(payload["files"]) - payload["summary"]["skipped"]
    runs = dict(query(Path(db), "SELECT source, run_id FROM runs"))
    assert set(runs) == {
        f"{tmp_path}/性能数据/推理_rank0_ascend_pt",
        f"{tmp_path}/gbk.tar.gz!/归档_rank0_ascend_pt",
    }
    kernels = query(
        Path(db), "SELECT f.source, count(*) FROM kernels k JOIN files f USING (file_id) GROUP BY ALL"
    )
    assert sorted(n for _, n in kernels) == [20, 20]
    assert any(
        s.endswith("/性能数据/推理_rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/核函数.csv") for s, _ in kernels
    )
    assert query(Path(db), "SELECT count(*) FROM jobs")[0][0] == 2
    code, one = ingest(os.path.join(run, b"ASCEND_PROFILER_OUTPUT", _gbk("核函数") + b".csv"), "--db",
                       str(tmp_path / "one.duckdb"))  # fmt: skip
    assert one["files"][0]["status"] == "partial" and one["files"][0]["path"].endswith("核函数.csv")


def test_zip_from_a_chinese_windows_keeps_its_names(tmp_path, db, monkeypatch):
    """Such a zip stores GBK names without the UTF-8 flag (Python reads them as CP437 mojibake)."""
    src = FIXTURES / "real" / "msinsight_test_rank_0"

    def gbk_names(info: zipfile.ZipInfo) -> tuple[bytes, int]:
        return info.filename.encode("gb18030"), info.flag_bits  # what the Windows writer puts in the file

    archive = tmp_path / "导出.zip"
    with monkeypatch.context() as m:
        m.setattr(zipfile.ZipInfo, "_encodeFilenameFlags", gbk_names)
        with zipfile.ZipFile(archive, "w") as zf:
            for path in sorted(src.rglob("*")):
                if path.is_file():
                    zf.write(path, f"推理数据_rank0_ascend_pt/{path.relative_to(src).as_posix()}")
    assert not zipfile.ZipFile(archive).infolist()[0].flag_bits & 0x800
    code, payload = cli_json("ingest", str(archive), "--db", str(db))
    assert payload["summary"]["failed"] == 0 and payload["summary"]["runs"] == [1]
    assert query(db, "SELECT source FROM runs") == [(f"{archive}!/推理数据_rank0_ascend_pt",)]
