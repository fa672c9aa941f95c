"""Detect each found file by content and parse it into the store, one transaction per file.

Which files there are is ``diag.discover``'s job, which run each belongs to ``diag.identity``'s (decided for
the whole input first).  The same file (same run, same relative path, same bytes, same parser version) is
stored once; a changed file or a newer parser replaces the old rows in the same transaction; a failure stores
nothing and alters nothing stored before.  Files that make runs are stored before files that only join one
(logs), and after every ingest a stored log whose folder's run exists now joins it (``attach_orphans``).
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from diag import archives, scratch
from diag.discover import (
    DEFAULT_MAX_FILE_BYTES,  # noqa: F401 (re-exported: the CLI reads it without importing the parsers)
    Candidate,
    Discoverer,
    run_key_of,
    sha256_of,
)
from diag.errors import BadInputError, FileTooLargeError, UnsupportedFormatError
from diag.grouping import regroup
from diag.identity import Identity, Plan, find_run, plan, run_of
from diag.store import Store, default_memory_limit, fitted_memory_limit, ingest_memory_limit, q, write_failure
from parsers import ParseContext, Probe, detect
from parsers._io import RetryLenient, one_line

_CONFLICT_RETRIES = 5
_RETRYABLE = re.compile(r"(?i)conflict|constraint violation|duplicate key")
_OUT_OF_MEMORY = re.compile(r"Out of Memory Error")  # DuckDB's, also inside a parser's one-line message
# Names the exporters give their outputs: such a file that no parser recognises is an error, not a skip.
_EXPORT_NAMES = re.compile(
    r"^(trace_view|communication|communication_matrix|profiler_metadata|profiler_info(_\d+)?)\.json$|"
    r"^(kernel_details|operator_details|op_statistic|api_statistic|step_trace_time|memory_record|"
    r"operator_memory|npu_module_mem|l2_cache)\.csv$"
)


_HASH_ALONGSIDE_BYTES = 16 << 20  # below this a thread costs more than the hash it would hide


class _Digest:
    """A file's sha256, computed on a thread of its own while the parser reads the file.

    hashlib releases the GIL, and a new file's digest is only needed when its ledger line is written, so for a
    large file the hash (≈0.7 s per GB) overlaps the parse instead of preceding it.
    """

    def __init__(self, path: Path, size: int, known: str | None = None) -> None:
        self._value: str | None = known  # hashed already, for the run's content identity
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if known is not None:
            return
        if size < _HASH_ALONGSIDE_BYTES:
            self._value = sha256_of(path)
            return
        self._thread = threading.Thread(target=self._run, args=(path,), name="diag-sha256", daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        try:
            self._value = sha256_of(path)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread by value()
            self._error = exc

    def value(self) -> str:
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


@dataclass
class FileOutcome:
    source: str
    status: str  # ok | partial | failed | unchanged | skipped
    parser: str | None = None
    run_id: int | None = None
    rows: dict[str, int] = field(default_factory=dict)
    message: str | None = None
    size_bytes: int = 0
    removed: dict[str, int] = field(default_factory=dict)  # rows of earlier files this one superseded

    def to_json(self) -> dict:
        return {
            "path": self.source,
            "status": self.status,
            "parser": self.parser,
            "run_id": self.run_id,
            "rows": self.rows,
            "removed": self.removed,
            "message": self.message,
            "size_bytes": self.size_bytes,
        }


@dataclass
class IngestSummary:
    files: list[FileOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def run_ids(self) -> list[int]:
        return sorted({f.run_id for f in self.files if f.run_id is not None and f.status != "skipped"})

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0


class Ingestor:
    def __init__(
        self,
        store: Store,
        *,
        replace: bool = False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        archive_limits: archives.ArchiveLimits | None = None,
        on_file_done: Callable[[FileOutcome], None] | None = None,
        around_file: Callable[[Candidate], AbstractContextManager[object]] | None = None,
        scratch_under: Path | None = None,
    ) -> None:
        self.store = store
        self.replace = replace
        self.max_file_bytes = max_file_bytes
        self.archive_limits = archive_limits or archives.ArchiveLimits(max_member_bytes=max_file_bytes)
        self.on_file_done = on_file_done
        self.around_file = around_file  # wraps each file's ingest (the CLI's progress inside a file)
        self._reserved_runs: dict[
            str, int
        ] = {}  # run key → id, while a parallel ingest runs (see diag.ingest_parallel._prepare)
        self._plan = Plan()  # identities of the files being ingested (see diag.identity)
        # archives unpack beside the database (or where the caller says: an upload's own folder), never in the
        # system temp folder; a folder a killed ingest left there is removed now (see diag.scratch)
        self._tmp = scratch.make_scratch(scratch_under or scratch.scratch_root(store.path))
        q(store.con, f"SET memory_limit='{ingest_memory_limit()}'")
        self._discover = Discoverer(self._tmp, self.archive_limits)
        self.fit_memory = True  # each file's memory limit fitted to its size (not in a parallel ingest)

    def close(self) -> None:
        scratch.release(self._tmp)
        # a database a failed write invalidated takes no setting: the write's one-line error is what to report
        with contextlib.suppress(duckdb.Error):
            q(self.store.con, f"SET memory_limit='{default_memory_limit()}'")

    def collect(self, paths: Iterable[str | Path]) -> tuple[list[Candidate], list[FileOutcome]]:
        """Every file under ``paths`` (archives unpacked), plus outcomes for inputs refused outright."""
        found, refused = self._discover.collect(paths)
        return found, [
            FileOutcome(r.source, "failed", message=r.message, size_bytes=r.size_bytes) for r in refused
        ]

    # -- ingest ----------------------------------------------------------------------------------------------
    def ingest(self, paths: Iterable[str | Path]) -> IngestSummary:
        return self.run(*self.collect(paths))

    def run(self, candidates: list[Candidate], refused: list[FileOutcome], jobs: int = 1) -> IngestSummary:
        """Ingest collected files, reporting each outcome (refused inputs first).

        ``jobs`` > 1 ingests that many runs at once (see ``diag.ingest_parallel``); outcomes keep the input order.
        """
        summary = IngestSummary(files=list(refused))
        for outcome in refused:
            self._done(outcome)
        self._plan = plan(candidates, self.max_file_bytes)
        if jobs > 1 and len(candidates) > 1:
            from diag.ingest_parallel import run_parallel  # it builds on this module

            summary.files.extend(run_parallel(self, candidates, jobs))
        else:
            outcomes: dict[int, FileOutcome] = {}
            for i in self._plan.order(candidates):
                with self.around_file(candidates[i]) if self.around_file else contextlib.nullcontext():
                    outcomes[i] = self.ingest_one(candidates[i])
                self._done(outcomes[i])
            summary.files.extend(outcomes[i] for i in range(len(candidates)))
        self.attach_orphans()
        regroup(self.store)  # jobs from the evidence of every stored run, logs attached (diag.grouping)
        return summary

    def attach_orphans(self) -> None:
        """Stored files without a run (a log ingested before its run, in this ingest or an earlier one) join
        the run of their folder where there is exactly one now."""
        with self.store.transaction():
            for run_id in self.store.attach_orphans():
                finalize_run(self.store, run_id)

    def _identity(self, cand: Candidate) -> Identity | None:
        """The planned identity of a file; a file ingested on its own is planned on its own."""
        if cand not in self._plan.parsers:
            alone = plan([cand], self.max_file_bytes)
            self._plan.parsers |= alone.parsers
            self._plan.identities |= alone.identities
            self._plan.digests |= alone.digests
        return self._plan.identities.get(cand)

    def _fit_memory(self, size: int | None, parser: object = None) -> bool:
        """Set DuckDB's limit fitted to a file's ``size`` (None: the whole ingest limit); True when below it."""
        if not self.fit_memory:
            return False
        fits = size is not None and getattr(parser, "fits_memory", False)
        limit = fitted_memory_limit(size) if fits else ingest_memory_limit()  # type: ignore[arg-type]
        q(self.store.con, f"SET memory_limit='{limit}'")
        return limit != ingest_memory_limit()

    def _done(self, outcome: FileOutcome) -> None:
        if self.on_file_done:
            self.on_file_done(outcome)

    def ingest_one(self, cand: Candidate) -> FileOutcome:
        size = _size(cand.path)
        outcome = FileOutcome(cand.source, "failed", size_bytes=size)
        try:
            size = cand.path.stat().st_size  # gone since it was found: a one-line failure, not a traceback
            if size > self.max_file_bytes:
                raise FileTooLargeError(
                    cand.source,
                    f"{size} bytes is over the size cap of {self.max_file_bytes} bytes "
                    "(raise it with --max-file-size or DIAG_MAX_FILE_BYTES)",
                )
            parser = self._plan.parsers.get(cand)  # sniffed when the input was planned
            if parser is None:
                probe = Probe.of(cand.path)
                parser = detect(probe)
            if parser is None:
                if cand.explicit or _EXPORT_NAMES.match(cand.path.name):
                    raise UnsupportedFormatError(cand.source, _why_unsupported(probe))
                outcome.status = "skipped"
                outcome.message = "not a format diag reads"
                return outcome
            outcome.parser = parser.name
            ident = self._identity(cand)
            digest = _Digest(cand.path, size, self._plan.digests.get(cand.path))
            lenient, conflicts, fitted = False, 0, self._fit_memory(size, parser)
            while True:
                try:
                    return self._store_file(cand, parser, digest, size, outcome, lenient, ident)
                except (duckdb.TransactionException, duckdb.ConstraintException) as exc:
                    # Another worker's transaction touched the same row (a job's parallel groups) or created
                    # the same key first: redo this file's transaction; its rollback left nothing behind.
                    if conflicts == _CONFLICT_RETRIES or not _RETRYABLE.search(str(exc)):
                        raise
                    conflicts += 1
                    time.sleep(random.uniform(0.01, 0.05) * conflicts)
                except (RetryLenient, BadInputError, duckdb.Error) as exc:
                    # the try's transaction was rolled back: nothing of it remains
                    if isinstance(exc, RetryLenient) and not lenient:
                        lenient = True
                    elif fitted and _OUT_OF_MEMORY.search(str(exc)):  # it needs more than its share
                        fitted = self._fit_memory(None)
                    else:
                        raise
                    if outcome.run_id is not None:  # but its run id was drawn: the retry reuses it, no gap
                        key = ident.run_key if ident else run_key_of(cand)
                        self._reserved_runs.setdefault(key, outcome.run_id)
                outcome.status, outcome.rows, outcome.removed = "failed", {}, {}
        except (BadInputError, duckdb.Error) as exc:
            # no room to write (the database, or the spill files a parser's query needed): stop the batch
            if full := write_failure(self.store.path, exc):
                raise full from None
            outcome.message = (
                str(exc) if isinstance(exc, BadInputError) else f"{cand.source}: {one_line(exc)}"
            )
        except Exception as exc:  # a parser bug must not stop the batch nor leave half a file
            outcome.message = f"{cand.source}: internal error ({type(exc).__name__}: {one_line(exc)})"
        finally:  # a database a failed write invalidated takes no setting: its one-line error is what to report
            with contextlib.suppress(duckdb.Error):
                self._fit_memory(None)
        # an error at commit comes after the parse filled in the outcome: nothing of it was stored
        outcome.status, outcome.rows, outcome.removed = "failed", {}, {}
        self._record_failure(cand, outcome, self._plan.identities.get(cand))
        return outcome

    def _store_file(
        self,
        cand: Candidate,
        parser,  # type: ignore[no-untyped-def]
        digest: _Digest,
        size: int,
        outcome: FileOutcome,
        lenient: bool = False,
        ident: Identity | None = None,
    ) -> FileOutcome:
        store = self.store
        with store.transaction() as con:
            scope, run_id = run_of(store, cand, parser, ident, digest.value, self._reserved_runs)
            outcome.run_id = run_id
            content_key = ident.run_key if ident and ident.by_content else None
            entry = store.ledger_entry(scope, cand.relpath, run_id=run_id, content_key=content_key)
            if (
                entry
                and not self.replace
                and entry.sha256 == digest.value()
                and entry.parser == parser.name
                and entry.parser_version == parser.version
            ):
                outcome.status, outcome.message = "unchanged", "already stored"
                return outcome
            if entry:
                store.delete_file_rows(entry.file_id)
            store.forget_failures(cand.source)
            file_id = store.new_file_id()
            ctx = ParseContext(store, con, cand.path, cand.source, run_id, file_id, self._tmp, lenient)
            result = parser.parse(ctx)
            outcome.rows = dict(result.rows)
            outcome.removed = dict(result.removed)
            outcome.status = "partial" if result.partial else "ok"
            outcome.message = "; ".join(m for m in (result.partial, *result.notes) if m) or None
            store.record_file(
                file_id=file_id,
                run_id=run_id,
                scope=scope,
                content_key=content_key,
                relpath=cand.relpath,
                source=cand.source,
                sha256=digest.value(),
                size_bytes=size,
                parser=parser.name,
                parser_version=parser.version,
                status=outcome.status,
                message=outcome.message,
                rows=sum(outcome.rows.values()),
            )
            if run_id is not None:
                finalize_run(store, run_id)
        return outcome

    def _record_failure(self, cand: Candidate, outcome: FileOutcome, ident: Identity | None) -> None:
        try:
            with self.store.transaction():
                outcome.run_id = find_run(self.store, ident or Identity(run_key_of(cand), run_key_of(cand)))
                self.store.forget_failures(cand.source)
                self.store.record_file(
                    file_id=self.store.new_file_id(),
                    run_id=outcome.run_id,
                    relpath=cand.relpath,
                    source=cand.source,
                    sha256="",
                    size_bytes=outcome.size_bytes,
                    parser=outcome.parser,
                    parser_version=None,
                    status="failed",
                    message=outcome.message,
                    rows=0,
                )
        except (duckdb.Error, OSError):
            pass  # the ledger line is a courtesy; the failure is reported either way


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def finalize_run(store: Store, run_id: int) -> None:
    """Derived run fields: span, device / rank where no metadata file named them, and whether its kernel_details
    rows stand in for its device tasks."""
    store.refresh_run_span(run_id)
    store.refresh_stand_ins(run_id)
    q(
        store.con,
        """UPDATE runs SET
             device = coalesce(device,
               (SELECT TRY_CAST(regexp_extract(device, '(\\d+)$', 1) AS INTEGER) FROM memory
                WHERE run_id = $run AND device IS NOT NULL LIMIT 1),
               (SELECT min(device_id) FROM kernels WHERE run_id = $run)),
             rank = coalesce(rank, TRY_CAST(regexp_extract(name, '(?i)rank[_-]?(\\d+)', 1) AS INTEGER))
           WHERE run_id = $run""",
        {"run": run_id},
    )


def _why_unsupported(probe: Probe) -> str:
    head = probe.head
    if not head.strip():
        return "empty file"
    if head.startswith(b"SQLite format 3\x00"):
        return "SQLite database with none of the tables of an nsys export or an Ascend profiler db"
    if b"\x00" in head[:4096]:
        return "binary content, not a profiler export diag reads"
    try:
        first = head.decode("utf-8").lstrip("\ufeff").splitlines()[0][:120]
    except (UnicodeDecodeError, IndexError):
        return "not UTF-8 text; profiler exports are UTF-8"
    return f"content not recognised as any export diag reads (starts with: {first!r})"
