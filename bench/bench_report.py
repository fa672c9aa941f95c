"""Postmortem report on a large run: build time and the size of each format (target: HTML < 5 MB at 1M tasks).

The run is generated straight into a fresh store (bench/bench_app_queries.populate: decode steps on compute
streams + HCCL, AI_CPU and MEMCPY tasks, host ops, Overlap Analysis slices), so no input files are needed.

    python bench/bench_report.py [--tasks 1000000] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_app_queries import populate  # noqa: E402
from diag.analyses.postmortem import build_postmortem  # noqa: E402
from diag.report import render  # noqa: E402
from diag.store import Store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=1_000_000)
    p.add_argument("--steps", type=int, default=200)
    a = p.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="diag-bench-report-") as tmp,
        Store(Path(tmp) / "r.duckdb") as store,
    ):
        run = populate(store, a.tasks, a.steps)
        tasks = store.con.execute("SELECT count(*) FROM device_tasks").fetchall()[0][0]
        t = time.perf_counter()
        pm = build_postmortem(store, run)
        build_s = time.perf_counter() - t
        sizes = {}
        for fmt in ("html", "md", "json"):
            t = time.perf_counter()
            sizes[fmt] = {
                "bytes": len(render(pm, fmt).encode()),
                "render_s": round(time.perf_counter() - t, 3),
            }
    print(f"run with {tasks:,} device tasks: postmortem built in {build_s:.2f} s")
    for fmt, s in sizes.items():
        print(f"  {fmt:>4}: {s['bytes'] / 1e3:8.1f} kB, rendered in {s['render_s']:.3f} s")
    print(json.dumps({"tasks": tasks, "build_s": round(build_s, 2), "formats": sizes}, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
