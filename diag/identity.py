"""Which run each found file belongs to, decided for the whole input before any file of it is stored.

* A run folder with a ``profiler_info*.json``: the hash of that file (``discover.run_key_of``), as always.
* Any other run folder (a bare ``kernel_details.csv``, an msprof ``PROF_*`` without info, logs only): its
  content.  Run key ``content:<sha256>`` over the sorted ``relpath`` + sha256 of the folder's recognised files
  (files no parser reads do not count), so the same bytes from another folder path, a copy or an archive are
  the same run.  Its files' ledger scope stays the folder's path key (``path:<origin>``): when the folder is
  ingested again from the same path after a file changed (or one was added), that path finds the run, the
  changed file's rows are replaced in it, the unchanged files stay ``unchanged``, and the run is re-keyed to
  the content it holds now.  A path that now holds files of two runs finds neither (a new run is made).
* One capture written as several files of a run-per-file format — the CSVs ``nsys stats --output PREFIX``
  names ``PREFIX_<report>.csv``, the ncu CSV pages of one profiled process — names itself through its
  parser's ``capture_of``; the files of one capture in one folder are one run keyed
  ``<platform>:capture:<sha256>`` over their relpaths and digests, with the same path fallback.
* Any other file of a run-per-file format (a Kineto trace, an nsys ``.sqlite``): its own bytes, decided when
  it is stored.

The content digests are the ledger's sha256 of each file, computed here (on threads: hashlib releases the
GIL) and handed to the ingest so that no file is hashed twice.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from diag.discover import Candidate, job_origin, parent_shown, run_key_of, sha256_of
from diag.store import Store, q
from parsers import Probe, detect
from parsers._base import Parser

_HASH_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class Identity:
    run_key: str  # the key the run is stored under (runs.run_key)
    scope: str  # the ledger scope of the file: the folder's path key, or the run key itself
    members: tuple[tuple[str, str], ...] = ()  # (relpath, sha256) of the file set a content key hashes
    name: str | None = None  # the run's name when it is not its folder's (a capture's prefix)

    @property
    def by_content(self) -> bool:
        return bool(self.members)


@dataclass
class Plan:
    identities: dict[Candidate, Identity] = field(default_factory=dict)
    parsers: dict[Candidate, Parser | None] = field(default_factory=dict)
    digests: dict[Path, str] = field(default_factory=dict)

    def order(self, candidates: list[Candidate]) -> list[int]:
        """Indices of ``candidates``, files that make runs before files that only join one (logs, serving
        results), each kind in walk order: what joins what then never depends on the walk."""
        return sorted(range(len(candidates)), key=lambda i: joins_only(self.parsers.get(candidates[i])))

    def group_of(self, cand: Candidate) -> str:
        """The run a file's ingest is serialised with (``--jobs``)."""
        ident = self.identities.get(cand)
        return ident.run_key if ident else run_key_of(cand)


def joins_only(parser: Parser | None) -> bool:
    return (
        parser is not None
        and not getattr(parser, "creates_run", True)
        and not getattr(parser, "run_per_file", False)
    )


def plan(candidates: Iterable[Candidate], max_file_bytes: int) -> Plan:
    """Each candidate's parser and identity (see the module doc)."""
    out = Plan()
    groups: dict[tuple[str, ...], list[Candidate]] = {}
    for cand in candidates:
        parser, probe = _sniff(cand)
        out.parsers[cand] = parser
        if parser is None or _size(cand.path) > max_file_bytes:
            continue  # its own ingest says why
        if getattr(parser, "run_per_file", False):
            capture = getattr(parser, "capture_of", lambda _p: None)(probe)
            if capture is not None:
                where = str(Path(cand.relpath).parent)
                groups.setdefault(("capture", parser.platform, cand.origin, where, capture), []).append(cand)
            continue
        key = run_key_of(cand)
        if key.startswith("path:"):
            groups.setdefault(("folder", key), []).append(cand)
        else:
            out.identities[cand] = Identity(key, key)
    todo = [c.path for group in groups.values() for c in group]
    with ThreadPoolExecutor(max_workers=_HASH_THREADS, thread_name_prefix="diag-sha256") as pool:
        out.digests = {p: d for p, d in zip(todo, pool.map(_digest, todo), strict=True) if d}
    for key, all_of_group in groups.items():
        group = [c for c in all_of_group if c.path in out.digests]  # one gone since found: it fails alone
        if not group:
            continue
        members = tuple(sorted((c.relpath, out.digests[c.path]) for c in group))
        if key[0] == "folder":
            ident = Identity(content_key("content", members), key[1], members)
        else:
            _, platform, origin, where, capture = key
            name = _capture_name(group, capture)
            scope = f"path:{origin}/{where}#{capture}" if where != "." else f"path:{origin}#{capture}"
            ident = Identity(content_key(f"{platform}:capture", members), scope, members, name)
        for cand in group:
            out.identities[cand] = ident
    return out


def content_key(prefix: str, members: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for relpath, digest in sorted(members):
        h.update(f"{relpath}\0{digest}\n".encode())
    return f"{prefix}:{h.hexdigest()}"


def find_run(store: Store, ident: Identity, rekey: bool = False) -> int | None:
    """The stored run of ``ident``: by its key, else (content identities) the one run its path holds files
    of; with ``rekey`` that run then takes the key of the content it holds after this ingest."""
    con = store.con
    row = q(con, "SELECT run_id FROM runs WHERE run_key = ?", [ident.run_key])
    if row:
        return int(row[0][0])
    if not ident.by_content:
        return None
    owners = q(con, "SELECT DISTINCT run_id FROM files WHERE scope = ? AND run_id IS NOT NULL", [ident.scope])
    if len(owners) != 1:
        return None  # never stored from this path, or the path now holds files of several runs
    run_id = int(owners[0][0])
    if rekey:
        stored = q(con, "SELECT relpath, sha256 FROM files WHERE run_id = ? AND status <> 'failed'", [run_id])
        now = dict(stored) | dict(ident.members)
        new_key = content_key(ident.run_key.rsplit(":", 1)[0], now.items())
        if not q(con, "SELECT 1 FROM runs WHERE run_key = ?", [new_key]):
            q(con, "UPDATE runs SET run_key = ? WHERE run_id = ?", [new_key, run_id])
    return run_id


def run_of(
    store: Store,
    cand: Candidate,
    parser: Parser,
    ident: Identity | None,
    digest: Callable[[], str],
    reserved: dict[str, int],
) -> tuple[str, int | None]:
    """(a file's ledger scope, its run), inside the file's transaction: the run found or made for a file that
    makes runs, found for one that only joins one (a log joins the run of its folder when there is one, and
    creates none). ``reserved``: run ids drawn ahead for new run keys (``--jobs``, a lenient retry)."""
    makes_run = not joins_only(parser)
    job_id = None
    if makes_run:
        name = cand.run_root.parent.name or cand.run_root.name
        job_id = store.ensure_job(f"path:{job_origin(cand)}", name, parent_shown(cand))
    if ident is None and getattr(parser, "run_per_file", False):
        # One file is one capture (an nsys export, a Kineto trace): its bytes are its identity.
        scope = f"{parser.platform}:file:{digest()}"
        run_id = store.ensure_run(
            scope, name=cand.path.name, platform=parser.platform, source=cand.source, job_id=job_id
        )
        return scope, run_id
    ident = ident or Identity(run_key_of(cand), run_key_of(cand))
    run_id = find_run(store, ident, rekey=True)
    if run_id is None and makes_run:
        source = cand.run_source
        if getattr(parser, "run_per_file", False):  # a capture: its file, or a pattern of its files
            folder = cand.source.rsplit("/", 1)[0] if "/" in cand.source else "."
            source = cand.source if len(ident.members) <= 1 else f"{folder}/{ident.name}*"
        run_id = store.ensure_run(
            ident.run_key,
            name=ident.name or cand.run_root.name,
            platform=parser.platform,
            source=source,
            job_id=job_id,
            run_id=reserved.get(ident.run_key),
        )
    return ident.scope, run_id


def _sniff(cand: Candidate) -> tuple[Parser | None, Probe | None]:
    try:
        probe = Probe.of(cand.path)
        return detect(probe), probe
    except Exception:  # noqa: BLE001 — sniffing only: the file's own ingest reports it, one line
        return None, None


def _capture_name(group: list[Candidate], capture: str) -> str:
    """A capture run's name: the one file's name when it is alone; else the capture's own label when its
    files' names start with it (nsys stats' ``PREFIX``), else their common name prefix (ncu pages)."""
    if len(group) == 1:
        return group[0].path.name
    stems = [c.path.stem for c in group]
    label = capture.split(":", 1)[-1]
    if label and all(s.startswith(label) for s in stems):
        return label
    return os.path.commonprefix(stems).rstrip("_-. ") or label or group[0].run_root.name


def _digest(path: Path) -> str | None:
    try:
        return sha256_of(path)
    except OSError:
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
