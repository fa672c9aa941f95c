"""``diag ingest PATH…``: store profiler outputs (folders, files, archives) in the database."""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from diag import i18n
from diag.commands._common import (
    DEFAULT,
    DbOption,
    JsonOption,
    console,
    fmt_bytes,
    print_json,
    refuse_db_with_lake,
)
from diag.commands._format import MISSING, escape, fmt_count
from diag.discover import DEFAULT_MAX_FILE_BYTES, Candidate
from diag.grouping import regroup
from diag.lake import LakeWriter
from diag.lake_grouping import lake_wide_spans
from diag.store import Store

if TYPE_CHECKING:  # the parsers (polars, pyarrow) are imported only by a command that ingests
    from diag.ingest import FileOutcome, IngestSummary

SKIPPED_SHOWN = 10  # skipped files named per reason in the normal output; the rest are counted
_STYLE = {"ok": "green", "partial": "yellow", "failed": "red", "unchanged": "dim", "skipped": "dim"}


class _WithinFile:
    """Moves the bar inside one large file by polling DuckDB's progress of the statement running now."""

    def __init__(self, store: Store, progress: Progress, task: TaskID, size: int, enabled: bool) -> None:
        self.store, self.progress, self.task, self.size = store, progress, task, size
        self.enabled = enabled and size > (64 << 20)
        self.stop = threading.Event()
        self.base = 0.0
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _WithinFile:
        if self.enabled:
            self.base = self.progress.tasks[self.task].completed
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stop.set()
            self.thread.join()
            self.progress.update(self.task, completed=self.base)  # the file's bytes are added when it is done

    def _poll(self) -> None:
        seen = 0.0
        while not self.stop.wait(0.25):
            pct = self.store.con.query_progress()
            if pct > 0:
                seen = max(seen, min(pct, 99.0) / 100)
                self.progress.update(self.task, completed=self.base + seen * self.size)


def skipped_by_reason(summary: IngestSummary) -> list[dict[str, Any]]:
    """Skipped files grouped by why, the largest group first: [{"reason", "count", "paths"}]."""
    groups: dict[str, list[str]] = {}
    for f in summary.files:
        if f.status == "skipped":
            groups.setdefault(f.message or "no reason given", []).append(f.source)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [{"reason": reason, "count": len(paths), "paths": paths} for reason, paths in ranked]


def print_skipped(out: Any, groups: list[dict[str, Any]], shown: int = SKIPPED_SHOWN) -> None:
    """Which files were skipped and why: per reason the first ``shown`` paths, then how many more."""
    for group in groups:
        out.print(f"[dim]skipped[/] {group['count']} file(s): {escape(group['reason'])}")
        for path in group["paths"][:shown]:
            out.print(f"  {escape(path)}", soft_wrap=True)
        if group["count"] > shown:
            out.print(f"  … and {group['count'] - shown} more")


def summary_json(db: str, summary: IngestSummary, store: Store) -> dict[str, Any]:
    rows: dict[str, int] = {}
    for f in summary.files:
        for table, n in f.rows.items():
            rows[table] = rows.get(table, 0) + n
        for table, n in f.removed.items():
            rows[table] = rows.get(table, 0) - n
    rows = {t: n for t, n in rows.items() if n}
    span = None
    if summary.run_ids:
        lo, hi = store.con.execute(
            "SELECT min(start_ns), max(end_ns) FROM runs WHERE list_contains(?, run_id)", [summary.run_ids]
        ).fetchall()[0]
        span = {
            "start_ns": lo,
            "end_ns": hi,
            "duration_ns": (hi - lo) if lo is not None and hi is not None else None,
        }
    return {
        "db": db,
        "files": [f.to_json() for f in summary.files],
        "summary": {
            "files": len(summary.files),
            **{s: summary.count(s) for s in ("ok", "partial", "failed", "unchanged", "skipped")},
            "runs": summary.run_ids,
            "rows": rows,
            "span": span,
            "skipped_files": skipped_by_reason(summary),
        },
    }


def ingest(
    paths: Annotated[list[str], typer.Argument(help="Folders, files or .zip/.tar.gz archives.")],
    db: DbOption = DEFAULT,
    as_json: JsonOption = False,
    replace: Annotated[bool, typer.Option("--replace", help="Re-parse files already stored.")] = False,
    max_file_size: Annotated[
        int, typer.Option("--max-file-size", help="Refuse files larger than this many bytes.")
    ] = DEFAULT_MAX_FILE_BYTES,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also list skipped and unchanged files.")
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=0,
            help="Runs ingested at once (0: one per CPU core). Each run's files stay in order.",
        ),
    ] = 1,
    lake: Annotated[
        str | None,
        typer.Option(
            "--lake", help="Write into this Parquet lake folder (created if new) instead of a DuckDB file."
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="local: this machine (-j). ray: one Ray task per run, into --lake (needs the optional ray extra).",
        ),
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="With --engine ray: the cluster (auto, ray://HOST:PORT); default a local one."
        ),
    ] = None,
) -> None:
    """Ingest profiler outputs; prints a line per file and a summary. Exit 1 if any file failed."""
    err = console(stderr=True)
    out = console()
    refuse_db_with_lake(db, lake)  # --lake: write into the lake folder (created) instead of a DuckDB file
    from diag import engine_ray
    from diag.ingest import Ingestor

    on_ray = engine_ray.check_engine(engine, lake, address)  # #23: a usage error before anything is written
    writer = LakeWriter(lake) if lake else None
    store = writer.store if writer else Store(db)
    db = lake or db
    quiet = as_json or not sys.stderr.isatty()
    progress = Progress(
        TextColumn("[bold]ingest[/]"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        console=err,
        disable=quiet,
        transient=True,
    )

    workers = jobs or os.cpu_count() or 1

    def report(outcome: FileOutcome) -> None:
        progress.advance(task, outcome.size_bytes)
        if as_json or (outcome.status in ("skipped", "unchanged") and not verbose):
            return
        rows = sum(outcome.rows.values())
        style = _STYLE.get(outcome.status, "")
        line = f"[{style}]{outcome.status:9}[/] {escape(outcome.source)}"
        if outcome.parser and outcome.status in ("ok", "partial"):
            line += f"  [dim]{outcome.parser}, {rows} rows[/]"
        if outcome.message and outcome.status != "ok":
            line += f"\n          [{style}]{escape(outcome.message)}[/]" if outcome.status != "failed" else ""
        (err if outcome.status == "failed" else out).print(line)
        if outcome.status == "failed":
            err.print(f"[red]error:[/] {escape(outcome.message or '')}", soft_wrap=True)

    def around(cand: Candidate) -> _WithinFile:
        progress.update(task, description=cand.path.name)
        return _WithinFile(store, progress, task, cand.path.stat().st_size, enabled=not quiet)

    ingestor = Ingestor(
        store,
        replace=replace,
        max_file_bytes=max_file_size,
        on_file_done=report,
        # progress inside a file follows the one statement running; with several at once, files only
        around_file=around if workers == 1 else None,
    )
    try:
        candidates, refused = ingestor.collect(paths)
        total = sum(c.path.stat().st_size for c in candidates)
        with progress:
            task = progress.add_task("", total=total or 1)
            if on_ray and writer:
                summary = engine_ray.ingest_with_progress(
                    ingestor, writer, candidates, refused, progress, task, address
                )
            else:
                summary = ingestor.run(candidates, refused, jobs=workers)
                if writer:  # regrouped again with the capture windows of the runs only in the lake (#23)
                    with lake_wide_spans(writer):
                        regroup(store)
        payload = summary_json(db, summary, store)
    finally:
        ingestor.close()
    if writer:  # the rows are in the staging database: now the lake's partitions, then its catalog
        try:
            writer.commit()
        finally:
            writer.close()
    if as_json:
        print_json(payload)
    else:
        s = payload["summary"]
        runs = ", ".join(map(str, s["runs"])) or MISSING
        rows, read = fmt_count(sum(s["rows"].values())), fmt_bytes(total)
        counts = {k: s[k] for k in ("files", "ok", "partial", "failed", "unchanged", "skipped")}
        out.print("\n" + i18n.t("cli.ingest_summary", **counts, runs=runs, rows=rows, read=read))  # diag/i18n
        if s["rows"]:
            out.print("  " + ", ".join(f"{t} {n}" for t, n in sorted(s["rows"].items()) if n))
        if not verbose:  # --verbose listed each skipped file already
            print_skipped(out, s["skipped_files"])
    store.close()
    raise typer.Exit(0 if summary.ok else 1)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
