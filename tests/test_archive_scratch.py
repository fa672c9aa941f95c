"""Where archives unpack (beside the database, or beside the uploads; never the system temp folder) and the
clean-up of the extractions a kill -9 left behind."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from diag import archives
from diag.ingest import Ingestor
from diag.store import Store
from diag.uploads import Upload, ingest_uploads
from tests.conftest import FIXTURES, ROOT

KD = (FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv").read_bytes()
MEMBER = "run/ASCEND_PROFILER_OUTPUT/kernel_details.csv"


def _zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MEMBER, KD)
    return buf.getvalue()


@pytest.fixture
def extractions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    """The folders archives are extracted into; the system temp folder is an empty folder of the test's."""
    system_tmp = tmp_path / "system_tmp"
    system_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_tmp))
    seen: list[Path] = []
    real_extract = archives.extract

    def recording_extract(archive: Path, dest: Path, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        seen.append(dest.resolve())
        real_extract(archive, dest, *args, **kwargs)

    monkeypatch.setattr(archives, "extract", recording_extract)
    yield seen
    assert list(system_tmp.iterdir()) == []  # nothing of an ingest ever lands in the system temp folder


def test_archive_extracts_beside_the_database_and_is_removed_after(tmp_path: Path, extractions) -> None:  # noqa: ANN001
    archive = tmp_path / "in" / "run.zip"
    archive.parent.mkdir()
    archive.write_bytes(_zip_bytes())
    (tmp_path / "db").mkdir()
    with Store(tmp_path / "db" / "diag.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            [out] = ingestor.ingest([archive]).files
        finally:
            ingestor.close()
    assert out.status == "ok"
    [dest] = extractions
    assert dest.parent.parent == (tmp_path / "db" / ".diag_extract").resolve()
    assert dest.parent.name.startswith(f"ingest-{os.getpid()}-")
    assert not (tmp_path / "db" / ".diag_extract").exists()  # removed whole, not left empty


def test_uploaded_archive_extracts_beside_the_uploads(tmp_path: Path, extractions) -> None:  # noqa: ANN001
    data = _zip_bytes()
    root = tmp_path / "uploads"
    with Store(tmp_path / "db.duckdb") as store:
        [out] = ingest_uploads(store, [Upload("run.zip", io.BytesIO(data), len(data))], root)
    assert out.status == "ok", out.message
    [dest] = extractions
    assert dest.parent.parent == (root / ".diag_extract").resolve()
    assert not (tmp_path / ".diag_extract").exists()


def _killed_extraction(root: Path) -> Path:
    """An extraction whose ingest was killed with SIGKILL while it held it."""
    code = (
        "import os, signal, sys; from pathlib import Path; from diag import scratch; "
        "d = scratch.make_scratch(Path(sys.argv[1])); (d / 'member.csv').write_bytes(b'x' * 1000); "
        "print(d, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == -9, proc.stderr
    folder = Path(proc.stdout.strip())
    assert (folder / "member.csv").is_file()
    return folder


def _own_start_time() -> str:
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[19]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_next_ingest_removes_extractions_of_killed_ingests_and_keeps_live_ones(tmp_path: Path) -> None:
    root = tmp_path / ".diag_extract"
    _killed_extraction(root)
    live = root / f"ingest-{os.getpid()}-live"  # this process: alive, same start time
    reused = root / f"ingest-{os.getpid()}-reused"  # this pid, but a process that started at another time
    no_owner_file = root / "ingest-999999999-x"  # killed before it wrote its owner: its name says whose
    for folder, owner in (
        (live, f"{os.getpid()} {_own_start_time()}"),
        (reused, f"{os.getpid()} 1"),
        (no_owner_file, None),
    ):
        folder.mkdir()
        (folder / "member.csv").write_bytes(b"x")
        if owner:
            (folder / ".owner").write_text(owner + "\n")
    (root / "notes.txt").write_text("not ours")
    with Store(tmp_path / "diag.duckdb") as store:
        ingestor = Ingestor(store)
        ingestor.close()
    assert sorted(p.name for p in root.iterdir()) == ["ingest-" + f"{os.getpid()}-live", "notes.txt"]
    assert (live / "member.csv").read_bytes() == b"x"


def test_upload_ingest_removes_extractions_of_killed_upload_ingests(tmp_path: Path) -> None:
    root = tmp_path / "uploads"
    killed = _killed_extraction(root / ".diag_extract")
    with Store(tmp_path / "db.duckdb") as store:
        [out] = ingest_uploads(store, [Upload("kernel_details.csv", io.BytesIO(KD), len(KD))], root)
    assert out.status == "ok" and not killed.exists()
