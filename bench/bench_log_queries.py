"""``diag logs --json`` on a large log database: wall time and peak RSS (issue #25: GB-size logs, seconds).

Generates the CANN log set of ``bench_logs.py`` (8 ranks, one AI Vector exception on rank 0 and its EI0002 echoes),
ingests it into a fresh database, then runs ``diag logs --json`` ``--repeat`` times, each in its own process, and
prints every run's wall time and peak RSS, the median, the record counts and the root cause found.  ``--db`` skips
generating and ingesting: the command runs on that database as it is.

    python bench/bench_log_queries.py [--bytes B] [--ranks N] [--repeat N] [--workdir DIR] [--db FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402
from bench.bench_logs import generate  # noqa: E402


def _records(db: Path) -> tuple[int, int]:
    """(records, flagged records) of the database: what the command works through."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE category IS NOT NULL AND severity <> 'none') FROM log_records"
        ).fetchone()
    return int(row[0]), int(row[1])


def _logs(db: Path, repeat: int) -> list[dict]:
    cmd = [sys.executable, "-m", "diag.cli", "logs", "--db", str(db), "--json"]
    runs = []
    for i in range(max(1, repeat)):
        m = measure(cmd)
        if m["rc"] != 0:  # a figure from a failed run would be a lie
            raise SystemExit(f"diag logs failed: {m['stderr'][-500:]}")
        runs.append(m)
        print(f"run {i + 1}: diag logs --json {m['wall_s']:.2f} s, peak RSS {m['peak_rss'] / 1e6:,.0f} MB")
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bytes", type=float, default=1.1e9, help="size of the generated log set (default 1.1e9)")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3, help="runs of diag logs (median reported)")
    p.add_argument("--workdir", type=Path, default=None, help="where to generate (default: a temp dir)")
    p.add_argument(
        "--db", type=Path, default=None, help="an ingested database: skip generating and ingesting"
    )
    a = p.parse_args(argv)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-logq-"))
    db = a.db or work / "bench_log_queries.duckdb"
    try:
        if a.db is None:
            gen = generate(work / "ascend_log", a.bytes, a.ranks)
            print(
                f"generated {len(gen['files'])} files, {gen['bytes'] / 1e6:,.1f} MB, {gen['lines']:,} lines"
            )
            ing = measure(
                [sys.executable, "-m", "diag.cli", "ingest", str(work / "ascend_log"), "--db", str(db)]
            )
            if ing["rc"] != 0:
                raise SystemExit(f"diag ingest failed: {ing['stderr'][-500:]}")
            print(f"ingested in {ing['wall_s']:.1f} s")
        records, flagged = _records(db)
        runs = _logs(db, a.repeat)
        median = sorted(runs, key=lambda m: m["wall_s"])[len(runs) // 2]
        causes = json.loads(median["stdout"])["root_causes"]
        top = causes[0] if causes else {}
        result = {
            "records": records,
            "flagged_records": flagged,
            "logs_wall_s": round(median["wall_s"], 2),
            "logs_peak_rss_mb": round(median["peak_rss"] / 1e6, 1),
            "runs": [
                {"wall_s": round(m["wall_s"], 2), "peak_rss_mb": round(m["peak_rss"] / 1e6, 1)} for m in runs
            ],
            "root_cause": top.get("category"),
            "root_cause_ranks": top.get("ranks"),
        }
        print(f"{records:,} records ({flagged:,} flagged): diag logs --json median {result['logs_wall_s']} s, "
              f"peak RSS {result['logs_peak_rss_mb']:,} MB; root cause {result['root_cause']} on ranks "
              f"{result['root_cause_ranks']}")  # fmt: skip
        print(json.dumps(result))
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
