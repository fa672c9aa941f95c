"""Parallel ingest benchmark: a generated 16-rank job with ``diag ingest --jobs 1`` and ``--jobs N``.

Generates (sample_traces/generate.py) a TP job of ``--ranks`` rank exports (trace_view.json, kernel_details.csv,
step_trace_time.csv, op_statistic.csv each), then ingests the whole job folder into a fresh database once per
``--jobs`` value, each in its own process (wall time and peak RSS of that process only, see bench/_measure.py).
Checks that every setting stored the same rows, and prints a table plus one JSON line.  No assertions beyond
that check: figures only.

    python bench/bench_parallel_ingest.py [--ranks 16] [--steps S] [--jobs 1 2] [--quick] [--workdir DIR] [--keep]
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
from sample_traces.generate import generate  # noqa: E402


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def ingest(job: Path, db: Path, jobs: int) -> dict:
    for leftover in (db, db.with_suffix(".duckdb.wal")):
        leftover.unlink(missing_ok=True)
    m = measure(
        [sys.executable, "-m", "diag.cli", "ingest", str(job), "--db", str(db), "--json", "-j", str(jobs)]
    )
    payload = json.loads(m["stdout"]) if m["stdout"].strip() else {"summary": {}}
    db.unlink(missing_ok=True)
    shutil.rmtree(db.parent / ".diag_tmp", ignore_errors=True)
    return {
        "jobs": jobs,
        "wall_s": round(m["wall_s"], 2),
        "peak_rss_mb": round(m["peak_rss"] / 1e6, 1),
        "rc": m["rc"],
        "rows": payload["summary"].get("rows"),
        "ok": payload["summary"].get("ok"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=24, help="decode steps per rank (default 24: ~30 MB a rank)")
    p.add_argument("--layers", type=int, default=28)
    p.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--quick", action="store_true", help="4 ranks, 4 steps")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the generated job")
    a = p.parse_args(argv)
    ranks, steps = (4, 4) if a.quick else (a.ranks, a.steps)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-par-"))
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / f"tp{ranks}_job"
    try:
        t = time.perf_counter()
        generate(job, ranks=ranks, steps=steps, layers=a.layers)
        size = folder_bytes(job)
        print(f"generated {ranks} ranks, {size / 1e6:.1f} MB in {time.perf_counter() - t:.1f} s under {job}")
        results = [ingest(job, workdir / f"jobs{n}.duckdb", n) for n in a.jobs]
        base = results[0]["wall_s"]
        print(
            f"\n{'--jobs':>6} {'wall s':>8} {'MB/s':>8} {'speed-up':>9} {'peak RSS MB':>12} {'files ok':>9}"
        )
        for r in results:
            r["mb_per_s"] = round(size / 1e6 / r["wall_s"], 1)
            r["speedup"] = round(base / r["wall_s"], 2)
            print(
                f"{r['jobs']:>6} {r['wall_s']:>8.2f} {r['mb_per_s']:>8.1f} {r['speedup']:>8.2f}x "
                f"{r['peak_rss_mb']:>12.1f} {r['ok']!s:>9}"
            )
        same = all(r["rows"] == results[0]["rows"] for r in results)
        print(f"\nsame rows stored by every setting: {same}")
        print(
            json.dumps(
                {
                    "cpus": os.cpu_count(),
                    "ranks": ranks,
                    "bytes": size,
                    "same_rows": same,
                    "results": results,
                },
                separators=(",", ":"),
            )
        )
    finally:
        if not a.keep:
            shutil.rmtree(job, ignore_errors=True)
            if a.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
