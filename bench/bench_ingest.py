"""Ingest benchmark: ``diag ingest`` against DuckDB's own bare scan of the same file.

Generates (sample_traces/generate.py, one rank, Qwen2-7B-like decode with 28 layers) a ≥ 1 GB
trace_view.json and a ≥ 1M-row kernel_details.csv, then measures each in separate processes, so that every
peak RSS belongs to one measurement only:

* ``diag ingest FILE --db FRESH.duckdb --json`` (wall time, peak RSS);
* DuckDB storing the file by itself: ``CREATE TABLE AS`` over the same reader into a fresh database file;
* the bare scan, with diag's memory limit: for the trace ``SELECT count(*), max(ts), sum(dur)`` over
  ``read_json`` with the very projection diag uses (imported: ``parsers.ascend_trace_view.read_json_sql``,
  whatever its column types are today; ``dur`` is cast with TRY_CAST so either type works), for the CSV
  ``SELECT count(*) FROM read_csv(FILE, header=true, all_varchar=true)``.

Each pair is measured ``--repeat`` times (default 3), alternating, and the medians are compared; the peak RSS
is the highest of the runs.  Prints a table (size, rows, MB/s, rows/s, peak RSS in MB and × file size, ingest
speed ÷ bare-scan speed) and one JSON line at the end.  No assertions: figures only.

    python bench/bench_ingest.py [--quick] [--trace-bytes B] [--kernel-rows N] [--repeat N] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402

sys.path.insert(0, str(ROOT))

from diag.store import ingest_memory_limit  # noqa: E402
from sample_traces.generate import generate  # noqa: E402

FULL = {"trace_bytes": 1.1e9, "kernel_rows": 1e6}
QUICK = {"trace_bytes": 5e7, "kernel_rows": 1e5}
LAYERS = 28  # Qwen2-7B

# Runs COMMAND as its child and reports that child's wall time and peak RSS (ru_maxrss of RUSAGE_CHILDREN
# covers only the children this process waited for, i.e. exactly the one measured command).
_SCAN = """
import json, sys, duckdb
from diag.store import ingest_memory_limit
from parsers.ascend_trace_view import read_json_sql
kind, path = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(f"SET memory_limit='{ingest_memory_limit()}'").fetchall()
con.execute("SET preserve_insertion_order=false").fetchall()
con.execute("SET enable_progress_bar=false").fetchall()
if kind == "json":
    sql = f"SELECT count(*), max(ts), sum(TRY_CAST(dur AS DOUBLE)) FROM {read_json_sql(path)}"
    row = con.execute(sql).fetchall()[0]
else:
    p = path.replace("'", "''")
    row = con.execute(f"SELECT count(*) FROM read_csv('{p}', header=true, all_varchar=true)").fetchall()[0]
print(json.dumps({"rows": row[0]}))
"""

# The same file stored by DuckDB alone: one CREATE TABLE AS over the same reader (diag's projection for the
# trace, every column as text for the CSV) into a fresh database file, checkpointed.  No conversion, no split
# into tables: what "read it and keep it" costs before diag does anything of its own.
_STORE = """
import json, sys, duckdb
from diag.store import ingest_memory_limit
from parsers._io import csv_header, csv_source
from parsers.ascend_trace_view import read_json_sql
from pathlib import Path
kind, path, db = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
con = duckdb.connect(db)
con.execute(f"SET memory_limit='{ingest_memory_limit()}'").fetchall()
con.execute("SET preserve_insertion_order=false").fetchall()
con.execute("SET enable_progress_bar=false").fetchall()
source = read_json_sql(path) if kind == "json" else csv_source(path, csv_header(path, path.name))
n = con.execute(f"CREATE TABLE stored AS SELECT * FROM {source}").fetchall()[0][0]
con.execute("CHECKPOINT").fetchall()
print(json.dumps({"rows": n}))
"""


def _median_run(runs: list[dict]) -> dict:
    """The run with the median wall time, with the highest peak RSS of all runs; every wall time kept."""
    ordered = sorted(runs, key=lambda m: m["wall_s"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["peak_rss"] = max(m["peak_rss"] for m in runs)
    chosen["all_wall_s"] = [round(m["wall_s"], 3) for m in runs]
    return chosen


def bench_file(path: Path, kind: str, workdir: Path, repeat: int = 1) -> dict:
    """Bare scan and ingest, alternated ``repeat`` times (this machine's speed drifts by ±15 % between
    minutes, so alternating and taking medians keeps the ratio from comparing a fast minute with a slow one)."""
    size = path.stat().st_size
    db = workdir / f"ingest_{kind}.duckdb"
    scans, stores, ingests, payload = [], [], [], None
    for _ in range(repeat):
        scans.append(measure([sys.executable, "-c", _SCAN, kind, str(path)]))
        for leftover in (db, db.with_suffix(".duckdb.wal")):
            leftover.unlink(missing_ok=True)
        stores.append(measure([sys.executable, "-c", _STORE, kind, str(path), str(db)]))
        db.unlink(missing_ok=True)
        ingests.append(
            measure([sys.executable, "-m", "diag.cli", "ingest", str(path), "--db", str(db), "--json"])
        )
        if ingests[-1]["stdout"].strip():
            payload = json.loads(ingests[-1]["stdout"])
        db.unlink(missing_ok=True)
        shutil.rmtree(workdir / ".diag_tmp", ignore_errors=True)
    scan, store, ingest = _median_run(scans), _median_run(stores), _median_run(ingests)
    rows = json.loads(scan["stdout"].strip().splitlines()[-1])["rows"] if scan["rc"] == 0 else None
    stored = payload["summary"]["rows"] if payload else None
    status = [f["status"] for f in payload["files"]] if payload else None

    def figures(m: dict) -> dict:
        wall = m["wall_s"]
        return {
            "wall_s": round(wall, 3),
            "mb_per_s": round(size / 1e6 / wall, 1),
            "rows_per_s": round(rows / wall) if rows else None,
            "peak_rss_mb": round(m["peak_rss"] / 1e6, 1),
            "peak_rss_x_file": round(m["peak_rss"] / size, 3),
            "rc": m["rc"],
            "all_wall_s": m["all_wall_s"],
        }

    out = {
        "file": path.name,
        "bytes": size,
        "rows": rows,
        "ingest": figures(ingest),
        "bare_scan": figures(scan),
        "duckdb_store": figures(store),
    }
    out["ingest"].update({"stored_rows": stored, "status": status})
    out["ingest_vs_bare_speed"] = round(scan["wall_s"] / ingest["wall_s"], 3)
    out["ingest_vs_duckdb_store_speed"] = round(store["wall_s"] / ingest["wall_s"], 3)
    return out


def print_table(results: list[dict]) -> None:
    head = (
        f"{'file':<20} {'size MB':>9} {'rows':>11} | {'what':<12} {'wall s':>8} {'MB/s':>8} {'rows/s':>11} "
        f"{'peak RSS MB':>12} {'× file':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        for i, what in enumerate(("ingest", "bare_scan", "duckdb_store")):
            m = r[what]
            lead = f"{r['file']:<20} {r['bytes'] / 1e6:>9.1f} {r['rows'] or 0:>11,}" if i == 0 else " " * 42
            print(
                f"{lead} | {what:<12} {m['wall_s']:>8.2f} {m['mb_per_s']:>8.1f} {m['rows_per_s'] or 0:>11,} "
                f"{m['peak_rss_mb']:>12.1f} {m['peak_rss_x_file']:>7.3f}"
            )
        print(
            f"{'':<42} | ingest speed / bare-scan speed = {r['ingest_vs_bare_speed']:.3f}, / DuckDB-store speed = "
            f"{r['ingest_vs_duckdb_store_speed']:.3f}   stored {r['ingest']['stored_rows']}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~50 MB trace and 100k kernel rows")
    p.add_argument("--trace-bytes", type=float, default=None, help="trace_view.json size (default 1.1e9)")
    p.add_argument("--kernel-rows", type=float, default=None, help="kernel_details.csv rows (default 1e6)")
    p.add_argument("--workdir", type=Path, default=None, help="where to generate (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs of each measurement, medians (default 3, 1 with --quick)",
    )
    a = p.parse_args(argv)
    sizes = QUICK if a.quick else FULL
    trace_bytes = int(a.trace_bytes or sizes["trace_bytes"])
    kernel_rows = int(a.kernel_rows or sizes["kernel_rows"])
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        trace_truth = generate(
            workdir / "trace", ranks=1, layers=LAYERS, target_trace_bytes=trace_bytes, files=("trace_view",)
        )
        t_trace = time.perf_counter() - t
        t = time.perf_counter()
        kd_truth = generate(
            workdir / "kernels", ranks=1, layers=LAYERS, kernel_rows=kernel_rows, files=("kernel_details",)
        )
        t_kd = time.perf_counter() - t
        trace = (
            workdir
            / "trace"
            / trace_truth["ranks"]["0"]["run_dir"]
            / "ASCEND_PROFILER_OUTPUT"
            / "trace_view.json"
        )
        kd = (
            workdir
            / "kernels"
            / kd_truth["ranks"]["0"]["run_dir"]
            / "ASCEND_PROFILER_OUTPUT"
            / "kernel_details.csv"
        )
        print(
            f"generated {trace.stat().st_size / 1e6:.1f} MB trace in {t_trace:.1f} s "
            f"({trace.stat().st_size / 1e6 / t_trace:.1f} MB/s), {kd_truth['ranks']['0']['kernel_details']['rows']:,} "
            f"kernel rows ({kd.stat().st_size / 1e6:.1f} MB) in {t_kd:.1f} s, under {workdir}",
            flush=True,
        )
        repeat = a.repeat or (1 if a.quick else 3)
        results = [bench_file(trace, "json", workdir, repeat), bench_file(kd, "csv", workdir, repeat)]
        print()
        print_table(results)
        summary = {
            "machine": {"cpus": os.cpu_count(), "memory_limit": ingest_memory_limit()},
            "repeat": repeat,
            "trace": results[0],
            "kernel_details": results[1],
        }
        print()
        print(json.dumps(summary, separators=(",", ":")))
    finally:
        if not a.keep and a.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not a.keep:
            for sub in ("trace", "kernels"):
                shutil.rmtree(workdir / sub, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
