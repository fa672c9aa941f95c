"""Where an ingest's time goes: every SQL statement a parser runs that takes ≥ 50 ms, the JSON split, the
sha256 and the whole ingest, in one process.

Wraps ``diag.store.q`` (the one call every parser's SQL goes through), ``parsers._json_split.split_array``
and ``diag.discover.sha256_of``, then runs ``diag ingest FILE --db FRESH --json`` in-process.  Figures only:
for the speed of record use bench_ingest.py, which runs diag in a process of its own.

For a trace_view.json or a CSV it then times, in the same process, DuckDB's own floor for the same file: the
reader alone (``count(*)``) and the reader storing every field unconverted (``CREATE TABLE AS`` into a fresh
database file, checkpointed), so the profile shows how far each diag step is from what DuckDB itself needs.

    python bench/profile_ingest.py FILE [--min-ms 50] [--no-floor]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import diag.ingest as ingest_mod  # noqa: E402
import diag.store as store_mod  # noqa: E402
import parsers._io as io_mod  # noqa: E402
import parsers._json_split as split_mod  # noqa: E402
from diag.cli import main as diag_main  # noqa: E402
from parsers import PARSERS  # noqa: E402


def _timed(label_of, fn, min_s: float, out: list[tuple[float, str]]):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t
            if dt >= min_s:
                out.append((dt, label_of(*args)))

    return wrapper


def profile(path: Path, min_ms: float) -> list[tuple[float, str]]:
    spent: list[tuple[float, str]] = []
    min_s = min_ms / 1000

    def sql_label(con, sql, *rest):  # noqa: ANN001, ARG001
        return " ".join(str(sql).split())[:100]

    patches = {
        (store_mod, "q"): sql_label,
        (split_mod, "split_array"): lambda *a: "split the JSON array into parts",
        (io_mod, "run_csv"): lambda *a: "CSV read and insert into its table (parsers._io.run_csv)",
        (ingest_mod, "sha256_of"): lambda *a: "sha256 (on its own thread for files over 16 MB)",
    }
    originals = {key: getattr(*key) for key in patches}
    for (mod, name), label in patches.items():
        setattr(mod, name, _timed(label, originals[(mod, name)], min_s, spent))
    # Parsers import q and split_array by name: patch their bindings too.
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("parsers.") and mod not in (split_mod, io_mod):
            for (src, name), _ in patches.items():
                if getattr(mod, name, None) is originals[(src, name)]:
                    setattr(mod, name, getattr(src, name))
    for parser in PARSERS:  # a CSV parser's follow-up step (kernel_details: the stand-in device tasks)
        after = getattr(parser, "_after", None)
        if after is not None:
            parser._after = _timed(lambda *a, f=after: f"after the CSV: {f.__name__}", after, min_s, spent)
    with tempfile.TemporaryDirectory(prefix="diag-profile-") as tmp:
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            diag_main(["ingest", str(path), "--db", str(Path(tmp) / "p.duckdb"), "--json"])
        spent.append((time.perf_counter() - t, "TOTAL diag ingest (in-process)"))
    return spent


def duckdb_floor(path: Path) -> list[tuple[float, str]]:
    """DuckDB reading ``path`` with diag's reader and nothing else: scan, then store unconverted (CSV, JSON)."""
    import duckdb

    from diag.store import ingest_memory_limit
    from parsers._io import csv_header, csv_source
    from parsers.ascend_trace_view import read_json_sql

    if path.suffix == ".json":
        source = read_json_sql(path)
    elif path.suffix == ".csv":
        source = csv_source(path, csv_header(path, path.name))
    else:
        return []
    out: list[tuple[float, str]] = []
    with tempfile.TemporaryDirectory(prefix="diag-floor-") as tmp:
        con = duckdb.connect(str(Path(tmp) / "floor.duckdb"))
        for setting in (f"memory_limit='{ingest_memory_limit()}'", "preserve_insertion_order=false"):
            con.execute(f"SET {setting}").fetchall()
        for label, sql in (
            ("FLOOR DuckDB reader alone: count(*)", f"SELECT count(*) FROM {source}"),
            (
                "FLOOR DuckDB storing it unconverted: CREATE TABLE AS + CHECKPOINT",
                f"CREATE TABLE s AS FROM {source}",
            ),
        ):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            if sql.startswith("CREATE"):
                con.execute("CHECKPOINT").fetchall()
            out.append((time.perf_counter() - t, label))
        con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path)
    p.add_argument("--min-ms", type=float, default=50.0)
    p.add_argument(
        "--no-floor", action="store_true", help="skip timing DuckDB's own read / store of the file"
    )
    a = p.parse_args(argv)
    print(f"{a.file} ({a.file.stat().st_size / 1e6:,.1f} MB)")
    spent = profile(a.file, a.min_ms) + ([] if a.no_floor else duckdb_floor(a.file))
    for seconds, label in spent:
        print(f"{seconds:8.3f} s  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
