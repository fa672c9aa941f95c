"""Ray ingest benchmark and scale model: a generated 64-rank job with ``--engine local -j 2`` and on Ray.

Generates (sample_traces/generate_cluster.py) a ``--ranks`` job (step_trace_time.csv, communication.json,
communication_matrix.json, profiler_info/metadata per rank), then

* ingests it into a lake with ``diag ingest --lake L --engine local -j 2`` (its own process: wall, peak RSS);
* starts a local Ray instance (``num_cpus`` = ``--cpus``, timed apart) and ingests it into a second lake with
  ``diag.engine_ray.run_on_ray`` in this process, which records each task's wall and parse time and each
  catalog commit of the driver;
* checks that both lakes hold the same rows (every table, without ``file_id`` and the storing times);
* measures Ray's own cost per task: ``--noop`` empty tasks, and per diag task its wall minus its parse time;
* projects the wall time of 1,024 ranks × 1 GB on N workers from those figures, printing its assumptions.

Figures only, no pass/fail beyond the rows check.  On a shared machine they are noisy: say the load with them.

    python bench/bench_ray.py [--ranks 64] [--steps 8] [--cpus 2] [--noop 200] [--rate-mbps R] [--fs-gbps 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402
from sample_traces.generate_cluster import main as generate_cluster  # noqa: E402

# README "Performance": one core parses a 360 MB kernel_details.csv at 56.5 MB/s and a 1.1 GB trace_view.json at
# 113 MB/s; a rank's 1 GB is mostly those two, so the slower one is the projection's default per-worker rate.
LARGE_FILE_MBPS = 56.5


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def lake_rows(lake: Path) -> dict[str, list[tuple]]:
    from diag.lake import open_lake
    from diag.schema import TABLES

    with open_lake(lake) as store:
        out = {}
        for t in TABLES:
            cols = [
                f'"{c.name}"' for c in t.columns if not c.type.startswith("TIMESTAMP") and c.name != "file_id"
            ]
            out[t.name] = store.con.execute(
                f'SELECT {", ".join(cols)} FROM "{t.name}" ORDER BY ALL'
            ).fetchall()
        return out


def ingest_on_ray(job: Path, lake: Path) -> tuple[float, object]:
    from diag.engine_ray import RayStats, run_on_ray
    from diag.ingest import Ingestor
    from diag.lake import LakeWriter

    started, stats = time.perf_counter(), RayStats()
    with LakeWriter(lake) as writer:
        ing = Ingestor(writer.store)
        try:
            run_on_ray(ing, writer, *ing.collect([job]), stats=stats)
        finally:
            ing.close()
        writer.commit()
    return time.perf_counter() - started, stats


def noop_cost(ray, n: int) -> float:  # noqa: ANN001 - the ray module
    @ray.remote
    def noop() -> None:
        return None

    ray.get([noop.remote() for _ in range(8)])  # workers started
    started = time.perf_counter()
    ray.get([noop.remote() for _ in range(n)])
    return (time.perf_counter() - started) / n


def project(
    a: argparse.Namespace, per_task_s: float, commit_per_run_s: float, rate_mbps: float
) -> list[dict]:
    """Wall time of ``a.project_ranks`` ranks × ``a.project_gb`` GB on N workers: the tasks in waves of N (parse
    + per-task cost), bounded below by the shared filesystem reading every byte and by the driver committing
    every run (serial, overlapping the tasks)."""
    parse_s = a.project_gb * 1000 / rate_mbps
    rows = []
    for n in (8, 32, 128):
        waves = math.ceil(a.project_ranks / n)
        tasks_s = waves * (parse_s + per_task_s)
        fs_s = a.project_ranks * a.project_gb / a.fs_gbps
        commit_s = a.project_ranks * commit_per_run_s
        wall = max(tasks_s, fs_s, commit_s)
        bound = {tasks_s: "tasks", fs_s: "shared FS", commit_s: "driver commits"}[wall]
        rows.append({"workers": n, "waves": waves, "tasks_s": round(tasks_s, 1), "fs_s": round(fs_s, 1),
                     "commits_s": round(commit_s, 1), "wall_s": round(wall, 1), "bound_by": bound})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--cpus", type=int, default=2, help="the local Ray instance's num_cpus")
    p.add_argument("--noop", type=int, default=200, help="empty tasks timed for Ray's own cost per task")
    p.add_argument(
        "--rate-mbps", type=float, default=LARGE_FILE_MBPS, help="per-worker parse rate on 1 GB inputs"
    )
    p.add_argument("--fs-gbps", type=float, default=2.0, help="assumed shared filesystem bandwidth, GB/s")
    p.add_argument("--project-ranks", type=int, default=1024)
    p.add_argument("--project-gb", type=float, default=1.0)
    p.add_argument("--workdir", type=Path)
    a = p.parse_args(argv)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        return run(a, work)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


def run(a: argparse.Namespace, work: Path) -> int:
    """Generate, ingest both ways, compare, time the tasks; then ``report``."""
    job = work / "job"
    shutil.rmtree(job, ignore_errors=True)
    tp = 8 if a.ranks % 8 == 0 and a.ranks >= 16 else a.ranks // 2  # two nodes at least
    assert generate_cluster([str(job), "--ranks", str(a.ranks), "--steps", str(a.steps), "--tp", str(tp),
                             "--slow-link", "1", str(1 + tp)]) == 0  # fmt: skip
    for lake in ("lake_local", "lake_ray"):
        shutil.rmtree(work / lake, ignore_errors=True)
    local = measure([sys.executable, "-m", "diag.cli", "ingest", str(job), "--lake", str(work / "lake_local"),
                     "--engine", "local", "-j", "2", "--json"])  # fmt: skip

    import ray

    started = time.perf_counter()
    ray.init(num_cpus=a.cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    init_s = time.perf_counter() - started
    try:
        ray_s, stats = ingest_on_ray(job, work / "lake_ray")
        noop_s = noop_cost(ray, a.noop)
    finally:
        ray.shutdown()
    same = lake_rows(work / "lake_local") == lake_rows(work / "lake_ray")
    report(a, folder_bytes(job), local, (ray_s, init_s, noop_s), stats, same)
    return 0 if same else 1


def report(
    a: argparse.Namespace, size: int, local: dict, ray_times: tuple[float, float, float], stats, same: bool
) -> None:  # noqa: ANN001
    """The figures, the projection with its assumptions, and one JSON line."""
    ray_s, init_s, noop_s = ray_times
    parse_total = sum(stats.task_parse_s)
    over = [w - p_ for w, p_ in zip(stats.task_wall_s, stats.task_parse_s, strict=True)]
    commit_per_run = sum(stats.commit_s) / max(len(stats.task_wall_s), 1)
    measured_mbps = size / 1e6 / parse_total if parse_total else float("nan")
    per_task = statistics.median(over) + noop_s
    mb = size / 1e6
    print(f"job: {a.ranks} ranks × {a.steps} steps, {mb:.2f} MB, {len(stats.task_wall_s)} runs; load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")  # fmt: skip
    print(
        f"local -j 2     : {local['wall_s']:.2f} s, {mb / local['wall_s']:.2f} MB/s, peak RSS {local['peak_rss'] / 1e6:.0f} MB"
    )
    print(
        f"ray ({a.cpus} CPUs)   : {ray_s:.2f} s, {mb / ray_s:.2f} MB/s (+ {init_s:.1f} s to start Ray); same rows stored: {same}"
    )
    print(f"per task       : Ray's own {noop_s * 1e3:.1f} ms (empty task, {a.noop} timed); diag's wall − parse "
          f"median {statistics.median(over) * 1e3:.0f} ms (max {max(over) * 1e3:.0f}); parse {parse_total:.2f} s in all, "
          f"{measured_mbps:.2f} MB/s on these small files")  # fmt: skip
    print(
        f"driver commits : {len(stats.commit_s)} catalog transactions for {len(stats.task_wall_s)} runs, "
        f"{commit_per_run * 1e3:.0f} ms per run"
    )
    print(f"\nprojection: {a.project_ranks} ranks × {a.project_gb:g} GB, per worker {a.rate_mbps:g} MB/s (README large-file "
          f"rate; these small files parse at {measured_mbps:.2f}), per-task cost {per_task * 1e3:.0f} ms, shared FS "
          f"{a.fs_gbps:g} GB/s, driver commit {commit_per_run * 1e3:.0f} ms per run (measured here, one catalog; it grows "
          f"with the ledger)")  # fmt: skip
    rows = project(a, per_task, commit_per_run, a.rate_mbps)
    print(f"{'workers':>8} {'waves':>6} {'tasks s':>9} {'FS s':>7} {'commits s':>10} {'wall s':>8}  bound by")
    for r in rows:
        print(
            f"{r['workers']:>8} {r['waves']:>6} {r['tasks_s']:>9} {r['fs_s']:>7} {r['commits_s']:>10} {r['wall_s']:>8}  {r['bound_by']}"
        )
    print(json.dumps({"bytes": size, "local_wall_s": local["wall_s"], "ray_wall_s": ray_s, "ray_init_s": init_s,
                      "same_rows": same, "noop_task_s": noop_s, "task_overhead_median_s": statistics.median(over),
                      "commit_per_run_s": commit_per_run, "measured_parse_mbps": measured_mbps,
                      "projection": rows}))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
