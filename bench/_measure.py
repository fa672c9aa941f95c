"""Run a command in its own process and report its wall time and peak RSS (shared by the bench scripts).

A wrapper process runs the command and reads ``RUSAGE_CHILDREN``, so each figure belongs to one command only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_WRAPPER = """
import json, resource, subprocess, sys, time
cmd = json.loads(sys.argv[1])
t = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"wall_s": wall, "peak_rss": rss, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-2000:]}))
"""


def measure(cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> dict:
    """{"wall_s", "peak_rss" (bytes), "rc", "stdout", "stderr"} of ``cmd``; warns on an unexpected exit code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, json.dumps(cmd)], capture_output=True, text=True, cwd=ROOT, env=env
    )
    if proc.returncode != 0:
        raise SystemExit(f"measurement wrapper failed: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if result["rc"] not in ok_codes:
        print(f"warning: {' '.join(cmd[:4])}… exited {result['rc']}: {result['stderr']}", file=sys.stderr)
    return result
