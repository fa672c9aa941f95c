"""The browser upload path: files land under the upload folder only; unsafe names and archives are refused."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from diag.store import Store
from diag.uploads import Upload, ingest_uploads
from tests.conftest import FIXTURES

OK = FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv"


def _up(name: str, data: bytes) -> Upload:
    return Upload(name, io.BytesIO(data), len(data))


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_upload_names_cannot_escape_the_upload_folder(tmp_path):
    root = tmp_path / "uploads"
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(
            store,
            [
                _up("../../evil.csv", b"x"),
                _up("/etc/evil2.csv", b"x"),
                _up("run/kernel_details.csv", OK.read_bytes()),
            ],
            root,
        )
        kernels = store.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
    by_name = {o.source: o for o in outcomes}
    assert by_name["../../evil.csv"].status == "failed" and "escapes" in by_name["../../evil.csv"].message
    assert (
        by_name["/etc/evil2.csv"].status == "failed" and "absolute path" in by_name["/etc/evil2.csv"].message
    )
    assert kernels == 3
    written = _all_files(tmp_path)
    assert all(root in p.parents or p.name.startswith("db.duckdb") for p in written), written
    assert not (tmp_path / "evil.csv").exists() and not Path("/etc/evil2.csv").exists()


def test_uploaded_archive_with_traversal_or_symlink_is_refused(tmp_path):
    root = tmp_path / "uploads"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("run/kernel_details.csv", OK.read_bytes())
        zf.writestr("../../../outside.csv", b"x")
    link = io.BytesIO()
    with zipfile.ZipFile(link, "w") as zf:
        info = zipfile.ZipInfo("run/link.json")
        info.external_attr = 0o120777 << 16  # a symbolic link
        zf.writestr(info, "/etc/passwd")
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(
            store, [_up("evil.zip", buf.getvalue()), _up("link.zip", link.getvalue())], root
        )
        kernels = store.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
    msgs = {o.source: o.message for o in outcomes}
    assert outcomes and all(o.status == "failed" for o in outcomes)
    assert "escapes the archive folder" in msgs["evil.zip"]
    assert "symbolic link" in msgs["link.zip"]
    assert kernels == 0
    assert not list(tmp_path.rglob("outside.csv"))


def test_upload_over_the_cap_is_refused(tmp_path):
    root = tmp_path / "uploads"
    data = OK.read_bytes()
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(store, [_up("kernel_details.csv", data)], root, max_bytes=len(data) - 1)
        kernels = store.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
    assert outcomes[0].status == "failed" and "over the upload cap" in outcomes[0].message
    assert kernels == 0 and not _all_files(root)


LOG = FIXTURES / "cann_log" / "ok_console_vllm.log"
SERVING = FIXTURES / "serving" / "ok_sglang_h100.txt"
BAD = FIXTURES / "ascend_kernel_details" / "bad_gbk.csv"


def _upload_files(root: Path, paths: list[Path], store: Store):  # noqa: ANN202
    return ingest_uploads(store, [_up(p.name, p.read_bytes()) for p in paths], root)


def test_uploads_keep_their_name_and_a_refused_file_is_removed_at_once(tmp_path):
    import re

    root = tmp_path / "uploads"
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = _upload_files(root, [OK, LOG, BAD], store)
        sources = sorted(
            r[0] for r in store.con.execute("SELECT source FROM files WHERE status = 'ok'").fetchall()
        )
    assert {o.source: o.status for o in outcomes} == {
        "ok_crlf_tab_na.csv": "ok",
        "ok_console_vllm.log": "ok",
        "bad_gbk.csv": "failed",
    }
    (batch,) = list(root.iterdir())
    assert re.fullmatch(r"[0-9a-f]{32}", batch.name)  # $DIAG_UPLOAD_DIR/<upload-id>/<original name>
    assert sorted(p.name for p in _all_files(root)) == ["ok_console_vllm.log", "ok_crlf_tab_na.csv"]
    assert [Path(s).name for s in sources] == ["ok_console_vllm.log", "ok_crlf_tab_na.csv"]
    assert all(Path(s).parent.resolve() == batch.resolve() for s in sources)


def test_an_upload_of_refused_files_only_leaves_nothing_on_disk(tmp_path):
    root = tmp_path / "uploads"
    with Store(tmp_path / "db.duckdb") as store:
        _upload_files(root, [BAD], store)
        _upload_files(root, [OK], store)
        again = _upload_files(root, [OK], store)  # the same bytes again: already stored, the copy goes
    assert [o.status for o in again] == ["unchanged"]
    assert len(list(root.iterdir())) == 1 and [p.name for p in _all_files(root)] == ["ok_crlf_tab_na.csv"]


def test_deleting_the_run_of_an_upload_removes_its_folder_and_nothing_else(tmp_path):
    from diag.uploads import prune_uploads, upload_folders

    root = tmp_path / "uploads"
    other = root / ("0" * 32)  # an upload folder of another database sharing the root: never a candidate
    other.mkdir(parents=True)
    (other / "theirs.csv").write_text("theirs")
    with Store(tmp_path / "db.duckdb") as store:
        first = _upload_files(root, [OK], store)
        second = _upload_files(root, [LOG], store)
        folders = upload_folders(store, root, first[0].run_id)
        assert len(folders) == 1 and prune_uploads(store, root, folders) == []  # still stored
        store.delete_run(first[0].run_id)
        removed = prune_uploads(store, root, folders)
    assert removed == sorted(folders) and not removed[0].exists()
    assert sorted(p.name for p in _all_files(root)) == ["ok_console_vllm.log", "theirs.csv"]
    assert second[0].status == "ok"


def _outcome(path: str, parser: str | None, run_id: int | None, rows: dict, status: str = "ok") -> dict:
    return {"path": path, "status": status, "parser": parser, "run_id": run_id, "rows": rows, "message": None}


def test_the_upload_summary_names_runs_logs_and_serving_results():
    from diag.uploads import describe_stored

    outcomes = [
        _outcome("kernel_details.csv", "ascend_kernel_details", 4, {"kernels": 3, "device_tasks": 3}),
        _outcome("trace_view.json", "ascend_trace_view", 4, {"device_tasks": 9}),
        _outcome("plog-1.log", "cann_log", 4, {"log_records": 7}),
        _outcome("plog-2.log", "cann_log", None, {"log_records": 1}),
        _outcome("bench.txt", "serving_bench", None, {"serving_runs": 3}),
        _outcome("bad.csv", "ascend_kernel_details", None, {}, "failed"),
        _outcome("same.csv", "ascend_kernel_details", 4, {}, "unchanged"),
    ]
    assert describe_stored(outcomes) == [
        "run 4: 2 profiler files, 1 log file (7 lines)",
        "no run: 1 log file (1 line), 1 serving result file (3 results)",
        "1 file already stored (unchanged)",
    ]


def test_the_run_an_upload_selects_is_its_newest_run_with_device_data():
    from diag.uploads import run_to_select

    outcomes = [
        _outcome("a.csv", "x", 3, {}),
        _outcome("b.log", "cann_log", 5, {}),
        _outcome("c", None, None, {}),
    ]
    assert run_to_select(outcomes, device_runs={3}) == 3
    assert run_to_select(outcomes, device_runs=set()) == 5
    assert run_to_select([_outcome("c", "cann_log", None, {})], device_runs={3}) is None


def test_removing_refused_files_never_touches_a_file_outside_the_upload(tmp_path):
    root = tmp_path / "uploads"
    root.mkdir()
    victim, beside = tmp_path / "victim.csv", root / "beside.csv"
    victim.write_text("keep")
    beside.write_text("keep")
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(
            store,
            [_up("../../victim.csv", b"x"), _up(str(victim), b"x"), _up("../beside.csv", b"x")],
            root,
        )
    assert [o.status for o in outcomes] == ["failed", "failed", "failed"]
    assert victim.read_text() == "keep" and beside.read_text() == "keep"
