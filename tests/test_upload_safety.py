"""Untrusted uploads and archives: size caps, bombs, unsafe members, odd names; Streamlit's upload settings;
no user text spliced into SQL.

(tests/test_uploads.py and tests/test_ingest_behaviour.py cover traversal in upload names, a zip symlink,
the upload cap and a 300 MB zip bomb through the CLI; this file covers the rest of the list.)
"""

from __future__ import annotations

import ast
import gzip
import io
import re
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from diag.archives import ArchiveLimits
from diag.ingest import Ingestor
from diag.store import Store
from diag.uploads import DEFAULT_UPLOAD_BYTES, Upload, ingest_uploads
from tests.conftest import FIXTURES, ROOT

KD = (FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv").read_bytes()
MEMBER = "run/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


def _up(name: str, data: bytes, size: int | None = None) -> Upload:
    return Upload(name, io.BytesIO(data), len(data) if size is None else size)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _tar(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tf.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def _special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _ingest_archive(tmp_path: Path, name: str, data: bytes, limits: ArchiveLimits | None = None):  # type: ignore[no-untyped-def]
    archive = tmp_path / "in" / name
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(data)
    with Store(tmp_path / "db.duckdb") as store:
        ingestor = Ingestor(store, archive_limits=limits)
        try:
            [out] = ingestor.ingest([archive]).files
            kernels = store.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
        finally:
            ingestor.close()
    return out, kernels


# -- archives ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (ArchiveLimits(max_member_bytes=len(KD) - 1), "exceeds the size cap"),
        (ArchiveLimits(max_total_bytes=len(KD) * 2), "unpacks to more than the cap"),
        (ArchiveLimits(max_members=2), "than the cap of 2"),
    ],
)
def test_archive_caps(tmp_path: Path, fmt: str, limits: ArchiveLimits, reason: str) -> None:
    members = {f"run{i}/ASCEND_PROFILER_OUTPUT/kernel_details.csv": KD for i in range(3)}
    data = _zip(members) if fmt == "zip" else _tar(list(members.items()))
    out, kernels = _ingest_archive(tmp_path, f"a.{fmt}", data, limits)
    assert out.status == "failed" and reason in out.message and "a." + fmt in out.message, out.message
    assert kernels == 0 and "\n" not in out.message


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_archive_decompression_bomb(tmp_path: Path, fmt: str) -> None:
    bomb = b"0" * (8 << 20)  # 8 MB of zeros: a few KB compressed
    data = _zip({MEMBER: bomb}) if fmt == "zip" else _tar([(MEMBER, bomb)])
    out, kernels = _ingest_archive(tmp_path, f"bomb.{fmt}", data, ArchiveLimits(max_ratio=2.0))
    assert out.status == "failed" and "decompression bomb" in out.message and kernels == 0


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_special("run/link.csv", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
        (_special("run/hard.csv", tarfile.LNKTYPE, "../../etc/passwd"), "is a link"),
        (_special("run/dev", tarfile.CHRTYPE), "not a regular file"),
        (_special("run/blk", tarfile.BLKTYPE), "not a regular file"),
        (_special("run/fifo", tarfile.FIFOTYPE), "not a regular file"),
        (("/abs/kernel_details.csv", KD), "absolute path"),
        (("../../up/kernel_details.csv", KD), "escapes the archive folder"),
        (("run/../../kernel_details.csv", KD), "escapes the archive folder"),
        (("C:/Windows/kernel_details.csv", KD), "absolute path"),
        (("..\\..\\kernel_details.csv", KD), "escapes the archive folder"),
    ],
)
def test_unsafe_tar_member_refuses_the_archive(tmp_path: Path, member, reason: str) -> None:  # type: ignore[no-untyped-def]
    out, kernels = _ingest_archive(tmp_path, "evil.tar.gz", _tar([(MEMBER, KD), member]))
    assert out.status == "failed" and reason in out.message, out.message
    assert kernels == 0 and not (tmp_path / "kernel_details.csv").exists()
    escaped = [Path("/abs/kernel_details.csv"), Path(tempfile.gettempdir()) / "up" / "kernel_details.csv"]
    assert not [p for p in escaped if p.exists()]


def test_zip_device_member_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(MEMBER, KD)
        info = zipfile.ZipInfo("run/dev")
        info.external_attr = 0o020666 << 16  # a character device
        zf.writestr(info, b"")
    out, kernels = _ingest_archive(tmp_path, "dev.zip", buf.getvalue())
    assert out.status == "failed" and "not a regular file" in out.message and kernels == 0


# -- uploads -------------------------------------------------------------------------------------------------
def test_upload_that_lies_about_its_size_is_cut_and_nothing_of_it_stored(tmp_path: Path) -> None:
    root = tmp_path / "uploads"
    big = KD * 200  # over 1 MB: refused in the middle of writing it
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(
            store, [_up("run/kernel_details.csv", big, size=10)], root, max_bytes=len(KD) * 3
        )
        kernels = store.con.execute("SELECT count(*) FROM kernels").fetchall()[0][0]
    assert [o.status for o in outcomes] == ["failed"] and "over the upload cap" in outcomes[0].message
    assert kernels == 0 and not _files(root)


@pytest.mark.parametrize(
    "name", ["a\x00b.csv", "x" * 300 + ".csv", "run/" + "y" * 300 + "/kernel_details.csv"]
)
def test_upload_names_the_filesystem_refuses_get_a_one_line_refusal(tmp_path: Path, name: str) -> None:
    with Store(tmp_path / "db.duckdb") as store:
        outcomes = ingest_uploads(store, [_up(name, KD), _up("ok/kernel_details.csv", KD)], tmp_path / "up")
    by_status = {o.status: o for o in outcomes}
    assert by_status["failed"].message and "\n" not in by_status["failed"].message
    assert by_status["ok"].source == "ok/kernel_details.csv"


def test_uploaded_json_gz_bomb_is_refused(tmp_path: Path) -> None:
    """A Kineto trace inflating 1,000x: refused once it passes 200x its size (1 MB floor), not inflated."""
    bomb = gzip.compress(b'{"traceEvents": [{"ph": "X"}' + b" " * (300 << 20) + b"]}", compresslevel=9)
    assert len(bomb) < 1 << 20
    with Store(tmp_path / "db.duckdb") as store:
        [out] = ingest_uploads(store, [_up("trace.pt.trace.json.gz", bomb)], tmp_path / "up")
    assert out.status == "failed" and "decompression bomb" in out.message
    assert out.message.startswith("trace.pt.trace.json.gz")  # the user's name, not the server's folder


# -- Streamlit settings --------------------------------------------------------------------------------------
def test_streamlit_config_has_xsrf_on_and_the_upload_cap_of_diag() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    server = config["server"]
    assert server["enableXsrfProtection"] is True and server["enableCORS"] is True
    assert server["maxUploadSize"] == DEFAULT_UPLOAD_BYTES // (1 << 20)  # MB, as diag.uploads caps bytes
    assert config["browser"]["gatherUsageStats"] is False


def test_diag_app_starts_streamlit_with_the_same_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from diag.commands import app as app_command

    seen: dict[str, list[str]] = {}
    monkeypatch.setattr(app_command.os, "execve", lambda exe, argv, env: seen.setdefault("argv", argv))
    monkeypatch.setattr(app_command.os, "chdir", lambda path: seen.setdefault("cwd", [str(path)]))
    app_command.app(db=str(tmp_path / "db.duckdb"), port=8501, address="127.0.0.1", no_samples=True)
    argv = seen["argv"]
    flags = dict(zip(argv[::1], argv[1:], strict=False))
    assert flags["--server.enableXsrfProtection"] == "true"
    assert int(flags["--server.maxUploadSize"]) == DEFAULT_UPLOAD_BYTES // (1 << 20)
    assert seen["cwd"] == [str(ROOT)]  # where .streamlit/config.toml is read from


# -- SQL -----------------------------------------------------------------------------------------------------
_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|SET|FROM|WHERE|PRAGMA|ATTACH|COPY)\b")


def _spliced_text_params(path: Path) -> list[str]:
    """Parameters typed as text that a function splices into an SQL f-string.

    A function's text parameters are where user text enters (CLI options, page widgets, upload names): they
    must reach DuckDB as bound parameters.  A private helper only ever called with string literals in its own
    module (a table name) is exempt.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    literal_only = _called_with_literals_only(tree)
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or fn.name in literal_only:
            continue
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
        text = {p.arg for p in params if p.annotation is not None and "str" in ast.unparse(p.annotation)}
        for node in ast.walk(fn):
            if not isinstance(node, ast.JoinedStr):
                continue
            literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if not _SQL.search(literal):
                continue
            for v in node.values:
                names = {n.id for n in ast.walk(v) if isinstance(n, ast.Name)}
                if isinstance(v, ast.FormattedValue) and names & text:
                    found.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {fn.name}({', '.join(names & text)})"
                    )
    return found


def _called_with_literals_only(tree: ast.Module) -> set[str]:
    private = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("_")}
    bad: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in private):
            continue
        if not all(isinstance(x, ast.Constant) for x in [*node.args, *(k.value for k in node.keywords)]):
            bad.add(node.func.id)
    return private - bad


def test_no_text_parameter_is_spliced_into_sql() -> None:
    files = [p for d in ("diag", "app") for p in sorted((ROOT / d).rglob("*.py"))]
    assert not [hit for f in files for hit in _spliced_text_params(f)]


def test_quotes_in_names_headers_and_paths_stay_data(tmp_path: Path) -> None:
    """SQL-looking names in a folder, a file path, a CSV header and an upload name are stored as text."""
    evil = "x'); DROP TABLE runs; --"
    folder = tmp_path / f"{evil}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    header, rest = KD.split(b"\n", 1)
    (folder / "kernel_details.csv").write_bytes(
        header.rstrip(b"\r") + b',"a""b\'); DROP TABLE files; --"\r\n' + rest
    )
    with Store(tmp_path / "db.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            [out] = ingestor.ingest([folder.parent]).files
        finally:
            ingestor.close()
        outcomes = ingest_uploads(store, [_up(f"{evil}/kernel_details.csv", KD)], tmp_path / "up")
        names = store.con.execute("SELECT name FROM runs ORDER BY run_id").fetchall()
        tables = {r[0] for r in store.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert out.status in ("ok", "partial") and outcomes[0].status == "ok"
    assert names[0][0] == f"{evil}_ascend_pt" and {"runs", "files"} <= tables
