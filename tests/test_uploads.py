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
