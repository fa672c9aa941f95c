"""What a person is told when the database file itself fails: damaged on opening, or full when writing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from diag.errors import StoreError


def one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


# DuckDB's words for a file that is damaged (cut short, overwritten) or is not a database at all
_DAMAGED = re.compile(
    r"Corrupt database|checksum|Could not read enough bytes|not a valid DuckDB database", re.I
)


def damage_hint(exc: Exception) -> str:
    """What to do when the database file itself is damaged: the inputs are untouched, so ingest them again."""
    if not _DAMAGED.search(str(exc)):
        return ""
    return (
        " — the database file is damaged or not a diag database; diag changed nothing in it. Restore it from a "
        "copy, or ingest the inputs again into a new file (`diag ingest … --db new.duckdb`): the inputs are not "
        "modified by ingest"
    )


# DuckDB's words when a query's spill files (the temp_directory beside the database) fill the disk
_SPILL_FAILED = re.compile(r"failed to offload data block|max_temp_directory_size", re.I)
_WRITE_FAILED = re.compile(
    r"No space left on device|File too large|Disk quota exceeded|database has been invalidated|"
    + _SPILL_FAILED.pattern,
    re.I,
)


def write_failure(path: Path, exc: BaseException) -> StoreError | None:
    """The one-line error for a database write that failed for want of room (a full disk, a file size limit):
    DuckDB then invalidates the database and every later statement fails, so the batch must stop here.
    None for any other error. What was committed before is on disk (DuckDB's WAL and checkpoint are atomic)."""
    text = str(exc)
    if not _WRITE_FAILED.search(text):
        return None
    try:
        free = f"{shutil.disk_usage(path.resolve().parent).free / 1e6:,.0f} MB free"
    except OSError:
        free = "free space unknown"
    reason = "file size limit reached (ulimit -f)" if "file too large" in text.lower() else "disk full"
    what = (
        "the database's spill files (in .diag_tmp beside it)"
        if _SPILL_FAILED.search(text)
        else "the database"
    )
    return StoreError(
        f"{path}: {reason} ({free}): could not write {what}; the files stored before are intact — "
        "make room, then run the same `diag ingest` again (it carries on where it stopped)"
    )
