"""Files handed over by a browser: stored under one upload folder, never outside it, then ingested.

An uploaded name may carry folders (a directory upload) but never ``..``, an absolute path or a drive; each
upload batch gets its own sub-folder so that two sessions never mix files.
"""

from __future__ import annotations

import os
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
    ingestor = Ingestor(store, max_file_bytes=max_bytes, on_file_done=on_file_done)
    try:
        entries = sorted(batch.iterdir())
        summary = ingestor.ingest(entries) if entries else None
    finally:
        ingestor.close()
    outcomes = refused + (summary.files if summary else [])
    for o in outcomes:  # show users the names they uploaded, not the server's folder
        o.source = o.source.replace(str(batch) + os.sep, "").replace(str(batch), "")
        if o.message:
            o.message = o.message.replace(str(batch) + os.sep, "")
    return outcomes
