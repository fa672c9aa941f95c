"""Find the files to ingest: walk folders, unpack archives safely, and tell which run each file belongs to.

A run is one profiling session of one device: the ``*_ascend_pt`` / ``*_ascend_ms`` folder (or the folder
holding ``ASCEND_PROFILER_OUTPUT`` / ``profiler_info*.json``) a file lives in.  Its identity is the hash of
its ``profiler_info*.json`` when there is one, so the same run ingested from a folder or from an archive
of it is stored once; without one, ``run_key_of`` gives the folder's path key and ``diag.identity`` makes
the run's identity its content.  An msprof (CANN command-line) ``PROF_*`` folder is one run too, with everything under
it (``mindstudio_profiler_output/``, ``msprof_*.db``, ``device_*/``, ``host/``); inside a ``*_ascend_pt``
folder it belongs to that folder's run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from diag import archives
from diag.errors import DiagError

# The largest file an ingest reads (bytes; $DIAG_MAX_FILE_BYTES); here, not in diag.ingest, so that the CLI can
# show it as an option default without importing the parsers.
DEFAULT_MAX_FILE_BYTES = int(os.environ.get("DIAG_MAX_FILE_BYTES", str(8 << 30)))

_RUN_DIR = re.compile(r".*_ascend_(pt|ms)$")
_PROF_DIR = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")  # msprof's collection folder
_PROFILER_INFO = re.compile(r"^profiler_info(_\d+)?\.json$")
_SKIP_DIRS = {"FRAMEWORK", "__MACOSX", ".git"}


@dataclass(frozen=True)
class Candidate:
    path: Path  # readable local file
    source: str  # how to name it to the user
    run_root: Path
    run_source: str
    relpath: str
    explicit: bool  # named on the command line (an unknown format is then an error, not a skip)
    origin: str  # stable prefix for path-based identities: absolute folder or "archive:<sha256>"


@dataclass(frozen=True)
class Refused:
    """An input refused before any file was read (missing path, unsafe archive)."""

    source: str
    message: str
    size_bytes: int = 0


class Discoverer:
    def __init__(self, tmp: Path, archive_limits: archives.ArchiveLimits) -> None:
        self._tmp = tmp
        self.archive_limits = archive_limits
        self._unread: list[Refused] = []  # folders a walk could not read or went too deep into

    # -- collection ------------------------------------------------------------------------------------------
    def collect(self, paths: Iterable[str | Path]) -> tuple[list[Candidate], list[Refused]]:
        """Every file under ``paths`` (archives unpacked), plus outcomes for inputs refused outright."""
        found: list[Candidate] = []
        refused: list[Refused] = []
        for raw in paths:
            path = Path(raw)
            if not path.exists():
                refused.append(Refused(text_of(path), f"{text_of(path)}: no such file or folder"))
            elif not (path.is_dir() or path.is_file()):  # opening a FIFO would block for ever
                refused.append(Refused(text_of(path), f"{text_of(path)}: {_not_a_file(path)}"))
            elif path.is_dir():
                real = text_of(path.resolve())
                view = self._utf8_view(path)
                if view is None:
                    found.extend(self._walk(path, str(path), origin=real, stop=None, explicit=False))
                else:
                    found.extend(
                        self._walk(view, text_of(path), real, stop=None, explicit=False, real_top=real)
                    )
            elif archives.is_archive(path):
                try:
                    found.extend(self._unpack(path, text_of(path)))
                except DiagError as exc:
                    refused.append(Refused(text_of(path), str(exc), path.stat().st_size))
            else:
                root = run_root_of(path, stop=None)
                view = self._utf8_view(root)
                if view is None:
                    cand = self._candidate(
                        path, str(path), root, str(root), str(root.resolve()), explicit=True
                    )
                else:  # the file as seen in a UTF-8 view of its run folder
                    real = text_of(root.resolve())
                    inside = view.joinpath(*(text_of(Path(p)) for p in path.relative_to(root).parts))
                    cand = self._candidate(
                        inside, text_of(path), view, text_of(root), real, explicit=True, real_top=real
                    )
                found.append(cand)
        refused.extend(self._unread)
        self._unread = []
        return found, refused

    def _unpack(self, archive: Path, shown: str) -> list[Candidate]:
        digest = sha256_of(archive)
        dest = Path(tempfile.mkdtemp(prefix="archive-", dir=self._tmp))
        archives.extract(archive, dest, self.archive_limits, display=shown)
        view = self._utf8_view(dest)  # a tar made on a GBK system keeps its names' raw bytes
        top = view or dest
        return list(
            self._walk(
                top, f"{shown}!", origin=f"archive:{digest}", stop=top, explicit=False, links=view is not None
            )
        )

    def _utf8_view(self, top: Path) -> Path | None:
        """A copy of the tree under ``top`` whose names are all UTF-8 — folders recreated, files linked — when
        some name is not (a GBK / GB18030 name from a Chinese-locale system); None when all are.

        DuckDB takes paths as UTF-8 text and stores text as UTF-8, so such a name can be neither read through
        nor stored; in the view it is its GB18030 reading (see text_of), which is also how it is shown."""
        if all(_is_utf8(str(p)) for p in _tree(top)):
            return None
        view = Path(tempfile.mkdtemp(prefix="names-", dir=self._tmp)) / text_of(Path(top.name or "input"))
        for dirpath, _dirnames, filenames in walk(top):
            here = Path(dirpath)
            mirror = view.joinpath(*(text_of(Path(p)) for p in here.relative_to(top).parts))
            mirror.mkdir(parents=True, exist_ok=True)
            for name in filenames:
                src = here / name
                if src.is_file() and not src.is_symlink():
                    with contextlib.suppress(FileExistsError):  # two names that read the same: keep the first
                        os.symlink(os.fsencode(src.resolve()), mirror / text_of(Path(name)))
        return view

    def _walk(
        self,
        top: Path,
        shown_top: str,
        origin: str,
        stop: Path | None,
        explicit: bool,
        real_top: str | None = None,
        links: bool = False,
    ) -> Iterator[Candidate]:
        """``links``: ``top`` is a UTF-8 view, whose files are links (of the folder named ``real_top``, if set)."""
        links = links or real_top is not None
        for dirpath, dirnames, filenames in walk(top, self._unread, shown_top):
            here = Path(dirpath)
            has_output = "ASCEND_PROFILER_OUTPUT" in dirnames
            # Raw CANN data under an exported run is already in ASCEND_PROFILER_OUTPUT: do not read it twice.
            dirnames[:] = sorted(
                d for d in dirnames if d not in _SKIP_DIRS and not (has_output and d.startswith("PROF_"))
            )
            for name in sorted(filenames):
                path = here / name
                if (path.is_symlink() and not links) or not path.is_file():
                    continue
                root = run_root_of(path, stop=stop)
                yield self._candidate(
                    path,
                    _shown(shown_top, top, path),
                    root,
                    _shown(shown_top, top, root),
                    origin,
                    explicit,
                    top=top,
                    real_top=real_top,
                )

    def _candidate(
        self,
        path: Path,
        shown: str,
        root: Path,
        root_shown: str,
        origin: str,
        explicit: bool,
        top: Path | None = None,
        real_top: str | None = None,
    ) -> Candidate:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            rel = path.name
        if top is not None and origin.startswith("archive:"):
            with contextlib.suppress(ValueError):
                origin = f"{origin}/{root.relative_to(top).as_posix()}"
        elif real_top is not None:  # a view: the identity is the real folder's, not the temporary copy's
            within = root.relative_to(top).as_posix() if top is not None and root != top else ""
            origin = f"{real_top}/{within}" if within and within != "." else real_top
        else:
            origin = str(root.resolve())
        return Candidate(path, shown, root, root_shown, rel, explicit, origin)


def run_root_of(path: Path, stop: Path | None) -> Path:
    """The run folder a file belongs to (see module doc); its own folder when none is recognisable."""
    for parent in list(path.parents)[:4]:
        if stop is not None and parent != stop and stop not in parent.parents:
            break
        if _RUN_DIR.match(parent.name):
            return parent
        if _PROF_DIR.match(parent.name):
            return parent.parent if _RUN_DIR.match(parent.parent.name) else parent
        if parent.name == "ASCEND_PROFILER_OUTPUT":
            return parent.parent
        if parent.is_dir() and (parent / "ASCEND_PROFILER_OUTPUT").is_dir():
            return parent
        if stop is not None and parent == stop:
            break
    return path.parent


def run_key_of(cand: Candidate) -> str:
    info = _profiler_info(cand.run_root)
    if info is not None:
        return f"ascend:profiler_info:{sha256_of(info)}"
    return f"path:{cand.origin}"


def _profiler_info(root: Path) -> Path | None:
    try:
        names = sorted(p for p in os.listdir(root) if _PROFILER_INFO.match(p))
    except OSError:
        return None
    return root / names[0] if names else None


def job_origin(cand: Candidate) -> str:
    if cand.origin.startswith("archive:"):
        return cand.origin.rsplit("/", 1)[0] if "/" in cand.origin else cand.origin
    return str(Path(cand.origin).parent)  # origin is the run folder's real absolute path


def parent_shown(cand: Candidate) -> str:
    return cand.run_source.rsplit("/", 1)[0] if "/" in cand.run_source else cand.run_source


def _shown(shown_top: str, top: Path, path: Path) -> str:
    try:
        rel = path.relative_to(top).as_posix()
    except ValueError:
        return str(path)
    if shown_top.endswith("!"):
        return f"{shown_top}/{rel}" if rel != "." else shown_top.rstrip("!")
    return str(Path(shown_top) / rel) if rel != "." else shown_top


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a name whose bytes are not UTF-8 arrives with surrogate escapes
        return False
    return True


def _not_a_file(path: Path) -> str:
    mode = path.stat().st_mode
    kind = (
        "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
    )  # fmt: skip
    return f"{kind}, not a file or folder diag reads; refused"


def walk(
    top: Path, unread: list[Refused] | None = None, shown_top: str | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` that stops ``archives.MAX_DEPTH`` folders down (deeper trees overflow its recursion) and
    reports, into ``unread``, each folder it could not read or did not enter, instead of skipping it silently."""
    base = len(top.parts)

    def note(path: str, why: str) -> None:
        if unread is not None:
            shown = _shown(shown_top, top, Path(path)) if shown_top is not None else path
            unread.append(Refused(shown, f"{shown}: {why}; its files were not read"))

    def failed(err: OSError) -> None:
        note(err.filename or str(top), f"folder not readable ({err.strerror or err})")

    for dirpath, dirnames, filenames in os.walk(top, onerror=failed):
        if len(Path(dirpath).parts) - base >= archives.MAX_DEPTH and dirnames:
            note(dirpath, f"folders nested more than {archives.MAX_DEPTH} deep")
            dirnames[:] = []
        yield dirpath, dirnames, filenames


def _tree(top: Path) -> Iterator[Path]:
    yield top
    for dirpath, dirnames, filenames in walk(top):
        for name in (*dirnames, *filenames):
            yield Path(dirpath) / name


def text_of(path: Path) -> str:
    """A path as text to show and store: each name that is not UTF-8 read as GB18030 (GBK is a subset; the
    usual non-UTF-8 names come from Chinese-locale systems), else with U+FFFD for the undecodable bytes."""
    parts = []
    for part in path.parts:
        if _is_utf8(part):
            parts.append(part)
            continue
        raw = os.fsencode(part)
        try:
            parts.append(raw.decode("gb18030"))
        except UnicodeDecodeError:
            parts.append(raw.decode("utf-8", errors="replace"))
    return str(Path(*parts)) if parts else str(path)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()
