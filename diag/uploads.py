"""Files handed over by a browser: stored under one upload folder, never outside it, then ingested.

Where: ``$DIAG_UPLOAD_DIR/<upload-id>/<original name>`` (``DIAG_UPLOAD_DIR`` defaults to ``.diag_uploads`` beside
the database; the upload id is a fresh 32-hex-digit folder per batch, so two sessions never mix files). The name
is the one the user uploaded, folders included for a directory upload, but never ``..``, an absolute path or a
drive; the stored ``files.source`` ends in it, so every page and report shows that name. An uploaded archive
unpacks into ``$DIAG_UPLOAD_DIR/.diag_extract/`` (see diag.scratch), removed when its batch is ingested.

Retention: an uploaded file is kept only while the database refers to it. A file refused before or during ingest
(over the cap, unsafe, unreadable, not recognised, or already stored from elsewhere) is removed as soon as its
batch is ingested; an upload folder is removed when the last run stored from it is deleted (``upload_folders``
before the delete, ``prune_uploads`` after it).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from diag.archives import safe_relpath
from diag.errors import ArchiveError, FileTooLargeError
from diag.ingest import FileOutcome, Ingestor
from diag.store import Store

DEFAULT_UPLOAD_BYTES = int(os.environ.get("DIAG_MAX_UPLOAD_BYTES", str(2 << 30)))
UPLOAD_ID = re.compile(r"[0-9a-f]{32}")  # an upload folder's name (uuid4 hex)
KEPT_STATUSES = ("ok", "partial")  # outcomes whose file the database now refers to
# where uploaded archives unpack: beside the upload folders, on the same disk, never an upload id's name
SCRATCH_FOLDER = ".diag_extract"


@dataclass(frozen=True)
class Upload:
    name: str
    data: BinaryIO
    size: int


def upload_root(db_path: Path) -> Path:
    return Path(os.environ.get("DIAG_UPLOAD_DIR", str(db_path.resolve().parent / ".diag_uploads")))


def save_uploads(
    uploads: Iterable[Upload], root: Path, max_bytes: int = DEFAULT_UPLOAD_BYTES
) -> tuple[Path, list[FileOutcome]]:
    """Write the uploads into a fresh folder under ``root``; refused ones come back as failed outcomes."""
    batch = root / uuid.uuid4().hex
    batch.mkdir(parents=True, exist_ok=False)
    refused: list[FileOutcome] = []
    base = batch.resolve()
    for up in uploads:
        partial: Path | None = None  # the file being written, removed when the upload is refused
        try:
            if up.size > max_bytes:
                raise FileTooLargeError(
                    up.name, f"{up.size} bytes is over the upload cap of {max_bytes} bytes"
                )
            rel = safe_relpath("upload", up.name)
            target = batch.joinpath(*rel.parts)
            if base not in target.resolve().parents:
                raise ArchiveError(up.name, "name escapes the upload folder; refused")
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with open(target, "xb") as out:
                partial = target
                while block := up.data.read(1 << 20):
                    written += len(block)
                    if written > max_bytes:
                        raise FileTooLargeError(up.name, f"over the upload cap of {max_bytes} bytes")
                    out.write(block)
        except (ArchiveError, FileTooLargeError, OSError, ValueError) as exc:
            msg = str(exc) if not isinstance(exc, FileExistsError) else f"{up.name}: uploaded twice"
            if isinstance(exc, ArchiveError) and exc.path == "upload":
                msg = f"{up.name}: {exc.reason}"
            elif not isinstance(exc, ArchiveError | FileTooLargeError | FileExistsError):
                msg = f"{up.name!r}: cannot be saved under that name ({type(exc).__name__}: {exc})"
            if partial is not None:
                partial.unlink(missing_ok=True)  # never ingest the part written before the refusal
            refused.append(FileOutcome(up.name, "failed", message=" ".join(msg.split()), size_bytes=up.size))
    return batch, refused


def ingest_uploads(
    store: Store,
    uploads: Iterable[Upload],
    root: Path,
    *,
    max_bytes: int = DEFAULT_UPLOAD_BYTES,
    on_file_done: Callable[[FileOutcome], None] | None = None,
) -> list[FileOutcome]:
    batch, refused = save_uploads(uploads, root, max_bytes)
    ingestor = Ingestor(
        store, max_file_bytes=max_bytes, on_file_done=on_file_done, scratch_under=root / SCRATCH_FOLDER
    )
    try:
        entries = sorted(batch.iterdir())
        summary = ingestor.ingest(entries) if entries else None
    finally:
        ingestor.close()
    outcomes = refused + (summary.files if summary else [])
    _remove_unstored(batch, outcomes)
    for o in outcomes:  # show users the names they uploaded, not the server's folder
        o.source = _relative(batch, o.source)
        if o.message:
            o.message = o.message.replace(str(batch) + os.sep, "")
    return outcomes


def _relative(batch: Path, source: str) -> str:
    for prefix in (str(batch.resolve()), str(batch)):
        if source.startswith(prefix):
            return source[len(prefix) :].lstrip(os.sep)
    return source


def _remove_unstored(batch: Path, outcomes: list[FileOutcome]) -> None:
    """Delete the uploaded files no stored row refers to (refused, failed, skipped, already stored), then empty
    folders; an archive stays when any member of it was stored."""
    kept, dropped = set(), set()
    for o in outcomes:
        top = _relative(batch, o.source).split("!", 1)[0]  # archive!member: the file on disk is the archive
        (kept if o.status in KEPT_STATUSES else dropped).add(top)
    base = batch.resolve()
    for rel in dropped - kept:
        try:
            target = batch.joinpath(rel).resolve()
            # a refused name ("../x", "/etc/x") is the user's text, not a file of this batch: never follow it out
            if rel and base in target.parents:
                target.unlink(missing_ok=True)
        except (OSError, ValueError):  # a name the filesystem refused: it was never written
            continue
    for folder in sorted((p for p in batch.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    if batch.is_dir() and not any(batch.iterdir()):
        batch.rmdir()


def upload_folders(store: Store, root: Path, run_id: int) -> set[Path]:
    """The upload folders under ``root`` that files of run ``run_id`` were stored from."""
    folders = set()
    for (source,) in store.con.execute("SELECT source FROM files WHERE run_id = ?", [run_id]).fetchall():
        rel = _relative_to_root(root, source)
        if rel and UPLOAD_ID.fullmatch(rel.split(os.sep, 1)[0]):
            folders.add(root / rel.split(os.sep, 1)[0])
    return folders


def _relative_to_root(root: Path, source: str) -> str | None:
    for prefix in (str(root.resolve()) + os.sep, str(root) + os.sep):
        if source.startswith(prefix):
            return source[len(prefix) :]
    return None


def prune_uploads(store: Store, root: Path, folders: set[Path]) -> list[Path]:
    """Remove those of ``folders`` (``upload_folders`` of a run, taken before deleting it) that no stored file
    comes from any more; returns them. Folders of other runs, or of another database sharing the upload root,
    are never candidates. Call it under the write lock."""
    sources = [
        row[0] for row in store.con.execute("SELECT source FROM files WHERE status <> 'failed'").fetchall()
    ]
    removed = []
    for folder in sorted(folders):
        prefixes = (str(folder) + os.sep, str(folder.resolve()) + os.sep)
        if folder.is_dir() and not any(src.startswith(prefixes) for src in sources):
            shutil.rmtree(folder)
            removed.append(folder)
    return removed


# What an uploaded file turned out to be, by its parser: (singular, plural, table counted, what the rows are)
_KINDS = {
    "cann_log": ("log file", "log files", "log_records", "line"),
    "serving_bench": ("serving result file", "serving result files", "serving_runs", "result"),
}
_PROFILER = ("profiler file", "profiler files", None, None)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def describe_stored(outcomes: list[dict]) -> list[str]:
    """One line per run (or "no run") saying what an upload stored there: how many profiler files, log files
    (and their lines), serving results; then a line for files already stored and files not recognised."""
    groups: dict[int | None, dict[tuple, list[int]]] = {}
    for o in outcomes:
        if o["status"] not in KEPT_STATUSES:
            continue
        kind = _KINDS.get(o["parser"] or "", _PROFILER)
        tally = groups.setdefault(o["run_id"], {}).setdefault(kind, [0, 0])
        tally[0] += 1
        tally[1] += (o.get("rows") or {}).get(kind[2], 0) if kind[2] else 0
    lines = []
    for run_id in sorted(groups, key=lambda r: (r is None, r or 0)):
        parts = []
        for (one, many, table, row_word), (files, rows) in sorted(groups[run_id].items(), key=_kind_order):
            parts.append(_plural(files, one, many) + (f" ({_plural(rows, row_word)})" if table else ""))
        lines.append(("no run" if run_id is None else f"run {run_id}") + ": " + ", ".join(parts))
    for status, text in (
        ("unchanged", "already stored (unchanged)"),
        ("skipped", "not recognised (skipped)"),
    ):
        n = sum(o["status"] == status for o in outcomes)
        if n:
            lines.append(f"{_plural(n, 'file')} {text}")
    return lines


def _kind_order(item: tuple) -> int:
    order = [_PROFILER, _KINDS["cann_log"], _KINDS["serving_bench"]]
    return order.index(item[0]) if item[0] in order else len(order)


def run_to_select(outcomes: list[dict], device_runs: set[int]) -> int | None:
    """The run an upload stored that the other pages should open: the newest one with device data, else the
    newest one stored at all; None when nothing landed in a run."""
    stored = {o["run_id"] for o in outcomes if o["status"] in KEPT_STATUSES and o["run_id"] is not None}
    with_device = stored & device_runs
    return max(with_device or stored, default=None)
