"""Reliability report: the parser fuzz corpus at full size, the kill -9 loop and the concurrency test.

Runs the same code as the CI tests (tests/test_fuzz_parsers.py, tests/test_crash_safety.py,
tests/test_concurrency.py), larger:

* fuzz: every parser in ``parsers.PARSERS``, ``--examples`` random hypothesis cases each (seeded at random)
  plus the targeted damage list with ``--huge-mb`` single lines, each through the real Ingestor into a temp
  DuckDB; and the slow full-size memory test (a 512 MB line, a 512 MB JSON value: peak RSS);
* kill -9: ``--kills`` SIGKILLs of ``diag ingest`` at random moments over ``--ranks`` generated runs of about
  ``--trace-mb`` each, the database checked after every kill, then a resumed ingest to completion;
* concurrency: ``--rounds`` rounds of a CLI ingest plus ``--writers`` app-like uploaders, an impatient one and a
  reader process on the same file;
* crafted: the input classes an adversarial probe found (issue #18; bench/_crafted.py), each built here and run
  through the CLI: glob characters in paths, a FIFO, a 1,500-deep archive member, markup and escape sequences in
  names, a NUL-bearing small plog, a CR-only log, a 60 MB one-line plog and a zero-tailed 600 MB trace under an
  RSS bound, ``ts: "abc"``, ``dur: 1e30``, nsys garbage, a corrupt ``--db``, a full disk, ``diag sql`` escapes;
  each counted ok / traceback / hang / wrong data.

Prints cases tried, refused cleanly, partial, crashes (must be 0) and runs lost (must be 0); exits 1 otherwise.

    python bench/reliability.py [--quick] [--examples N] [--kills K] [--rounds R] [--writers W]
                                [--only fuzz kill concurrency crafted]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._crafted import run_crafted  # noqa: E402
from tests.test_concurrency import concurrency_round  # noqa: E402
from tests.test_crash_safety import kill_loop, make_input  # noqa: E402


def fuzz(examples: int, huge_mb: int, work: Path) -> dict:
    tally_file = work / "fuzz_tally.json"
    env = {
        **os.environ,
        "DIAG_FUZZ_EXAMPLES": str(examples),
        "DIAG_FUZZ_RANDOM": "1",
        "DIAG_FUZZ_HUGE_BYTES": str(huge_mb << 20),
        "DIAG_FUZZ_TALLY": str(tally_file),
        "DIAG_RELIABILITY_FULL": "1",
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz_parsers.py"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    result = json.loads(tally_file.read_text()) if tally_file.exists() else {"tally": {}, "crashes": []}
    if (
        proc.returncode != 0 and not result["crashes"]
    ):  # the process itself died or a check outside a case failed
        result["crashes"].append(proc.stdout[-3000:] or f"pytest exited {proc.returncode}")
    result["pytest_tail"] = proc.stdout.strip().splitlines()[-1:] if proc.stdout else []
    return result


SECTIONS = ("fuzz", "kill", "concurrency", "crafted")


def fuzz_section(a: argparse.Namespace, work: Path) -> dict:
    t0 = time.perf_counter()
    fz = fuzz(a.examples, a.huge_mb, work)
    tally = fz["tally"]
    print(f"\nfuzz ({time.perf_counter() - t0:.0f} s): {tally.get('tried', 0)} cases over every parser · "
          f"ok {tally.get('ok', 0)} · partial {tally.get('partial', 0)} · refused cleanly {tally.get('failed', 0)} · "
          f"unchanged/skipped {tally.get('unchanged', 0) + tally.get('skipped', 0)} · crashes {len(fz['crashes'])}"
          f"  [{' '.join(fz['pytest_tail'])}]", flush=True)  # fmt: skip
    for c in fz["crashes"][:10]:
        print("  crash:", c[:400])
    return {"tried": tally.get("tried", 0), "refused": tally.get("failed", 0), "partial": tally.get("partial", 0),
            "crashes": len(fz["crashes"]), "fuzz": tally, "fuzz_crashes": fz["crashes"][:20]}  # fmt: skip


def kill_section(a: argparse.Namespace, work: Path) -> dict:
    t0 = time.perf_counter()
    src = make_input(work / "runs", ranks=a.ranks, trace_bytes=a.trace_mb << 20)
    (work / "kill").mkdir()
    kr = kill_loop(src, work / "kill", kills=a.kills, seed=a.seed)
    lost_runs = len({k[0] for k in kr.lost_keys})
    print(f"\nkill -9 ({time.perf_counter() - t0:.0f} s): {kr.kills} kills mid-ingest (+{kr.finished} ingests that "
          f"finished first) of {a.ranks} runs × ~{a.trace_mb} MB trace (uninterrupted ingest {kr.reference_s:.1f} s) · "
          f"{kr.files_checked} stored files checked after kills · files lost {kr.lost} · runs lost {lost_runs} · "
          f"problems {len(kr.problems)}", flush=True)  # fmt: skip
    for prob in kr.problems[:10]:
        print("  problem:", prob[:400])
    return {"tried": kr.kills + kr.finished + 1, "crashes": len(kr.problems) - kr.lost, "runs_lost": lost_runs,
            "kills": kr.kills, "kill_finished": kr.finished, "files_lost": kr.lost,
            "kill_problems": kr.problems[:20]}  # fmt: skip


def concurrency_section(a: argparse.Namespace, work: Path) -> dict:
    t0 = time.perf_counter()
    src = work / "runs"
    if not src.exists():
        src = make_input(src, ranks=a.ranks, trace_bytes=a.trace_mb << 20)
    conc = []
    for r in range(a.rounds):
        (work / f"conc{r}").mkdir()
        conc.append(concurrency_round(work / f"conc{r}", src, writers=a.writers))
    c_problems = [p for c in conc for p in c.problems]
    busy = sum(c.busy for c in conc)
    print(f"\nconcurrency ({time.perf_counter() - t0:.0f} s): {a.rounds} rounds × (CLI ingest + {a.writers} uploaders "
          f"+ 1 impatient uploader + 1 reader process) · uploads stored {sum(c.stored for c in conc)} · "
          f"told 'busy, retry' {busy} · reader snapshots {sum(c.reads for c in conc)} · "
          f"problems {len(c_problems)}", flush=True)  # fmt: skip
    for prob in c_problems[:10]:
        print("  problem:", prob[:400])
    return {"tried": a.rounds * (a.writers + 2), "refused": busy, "crashes": len(c_problems),
            "concurrency_problems": c_problems[:20]}  # fmt: skip


def crafted_section(a: argparse.Namespace, work: Path) -> dict:
    t0 = time.perf_counter()
    verdicts = run_crafted(work / "crafted")
    counts = {
        k: sum(v.outcome == k for v in verdicts.values()) for k in ("ok", "traceback", "hang", "wrong data")
    }
    print(f"\ncrafted inputs ({time.perf_counter() - t0:.0f} s): {len(verdicts)} classes · ok {counts['ok']} · "
          f"tracebacks {counts['traceback']} · hangs {counts['hang']} · wrong data {counts['wrong data']}")  # fmt: skip
    width = max(len(k) for k in verdicts)
    print(f"  {'class':<{width}}  outcome     detail")
    for name, v in verdicts.items():
        print(f"  {name:<{width}}  {v.outcome:<10}  {v.detail or '—'}")
    bad = {k: f"{v.outcome}: {v.detail}" for k, v in verdicts.items() if v.outcome != "ok"}
    return {"tried": len(verdicts), "crashes": len(bad), "crafted": counts, "crafted_problems": bad}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run of the script)")
    p.add_argument("--examples", type=int, default=150, help="random fuzz cases per parser")
    p.add_argument("--huge-mb", type=int, default=64, help="size of the huge single line / JSON value")
    p.add_argument(
        "--kills", type=int, default=60, help="SIGKILLs of diag ingest (at least 50 for the report)"
    )
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--trace-mb", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3, help="concurrency rounds")
    p.add_argument("--writers", type=int, default=4, help="app-like uploaders per round")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="sections to run")
    a = p.parse_args(argv)
    if a.quick:
        a.examples, a.huge_mb, a.kills, a.ranks, a.trace_mb, a.rounds, a.writers = 5, 6, 3, 2, 3, 1, 2
    work = Path(tempfile.mkdtemp(prefix="diag-reliability-"))
    print(f"workdir {work} · seed {a.seed}", flush=True)
    run = {"fuzz": fuzz_section, "kill": kill_section, "concurrency": concurrency_section,
           "crafted": crafted_section}  # fmt: skip
    results = {name: run[name](a, work) for name in SECTIONS if name in a.only}
    total = {
        k: sum(r.get(k, 0) for r in results.values()) for k in ("tried", "refused", "partial", "crashes")
    }
    lost_runs = sum(r.get("runs_lost", 0) for r in results.values())
    print(
        f"\nTOTAL: cases tried {total['tried']} · refused cleanly {total['refused']} · partial {total['partial']} · "
        f"crashes {total['crashes']} (must be 0; tracebacks, hangs and wrong data of crafted inputs count) · "
        f"runs lost {lost_runs} (must be 0)"
    )
    summary = {"seed": a.seed, "crashes": total["crashes"], "runs_lost": lost_runs}
    for r in results.values():
        summary |= {k: v for k, v in r.items() if k not in ("tried", "refused", "partial", "crashes")}
    print(json.dumps(summary))
    return 0 if total["crashes"] == 0 and lost_runs == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
