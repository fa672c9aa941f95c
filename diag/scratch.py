"""Scratch folders an ingest unpacks archives into, and the clean-up of those a killed ingest left behind.

Where: ``.diag_extract/`` beside the database (``scratch_root``), or a folder the caller names — an app upload
unpacks inside its own upload folder — never the system temp folder, which may be a small tmpfs and is shared
with every other program. Not inside DuckDB's ``.diag_tmp``: DuckDB owns that folder and may remove it.

Each scratch folder is ``ingest-<pid>-<random>/`` with an ``.owner`` file holding the pid and the process's
start time. ``kill -9`` skips the ingest's clean-up, so every new scratch folder first removes the ones whose
owner is gone: no such process, or a process with that pid that started at another time (a reused pid, as in a
restarted container where the server is pid 1 again). A folder whose owner lives is another ingest's: kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "ingest-"
OWNER_FILE = ".owner"


def scratch_root(db_path: Path) -> Path:
    return db_path.resolve().parent / ".diag_extract"


def make_scratch(root: Path) -> Path:
    """A fresh scratch folder under ``root``, after removing the stale ones there."""
    root.mkdir(parents=True, exist_ok=True)
    remove_stale(root)
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
    except FileNotFoundError:  # another ingest's release() removed the then-empty root just now
        root.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_started(os.getpid()) or ''}\n", encoding="ascii")
    return folder


def release(folder: Path) -> None:
    """Remove a scratch folder, and its root when no other ingest has one there (no empty folder is left)."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: another ingest's
        folder.parent.rmdir()


def remove_stale(root: Path) -> list[Path]:
    """Remove the scratch folders under ``root`` whose owning process is gone; returns them."""
    removed = []
    with contextlib.suppress(OSError):
        for child in sorted(root.iterdir()):
            if (
                child.name.startswith(PREFIX)
                and child.is_dir()
                and not child.is_symlink()
                and _orphaned(child)
            ):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child)
    return removed


def _orphaned(folder: Path) -> bool:
    try:
        pid_text, _, started = (folder / OWNER_FILE).read_text(encoding="ascii").strip().partition(" ")
        pid = int(pid_text)
    except (
        OSError,
        ValueError,
    ):  # killed between creating the folder and writing its owner: the name says who
        try:
            pid, started = int(folder.name[len(PREFIX) :].split("-", 1)[0]), ""
        except ValueError:
            return False  # not one of ours
    if not _alive(pid):
        return True
    now = _started(pid)
    return bool(started and now and started != now)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), to tell a reused pid; None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name in (…) may hold spaces
    return fields[19] if len(fields) > 19 else None
