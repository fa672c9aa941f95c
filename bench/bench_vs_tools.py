"""diag against the tools a person would run instead, on the same inputs, side by side.

Rows (the targets of issue #25):

* torch_npu ``trace_view.json`` (1.1 GB) and ``kernel_details.csv`` (1M rows): ``diag ingest`` against DuckDB
  storing the same file by itself (``CREATE TABLE AS`` over the same reader, ``bench/bench_ingest.py``);
* a generated Ascend profiler folder (1 GB and 250 MB trace_view.json, with kernel_details.csv,
  step_trace_time.csv, op_statistic.csv, profiler_info_0.json): ``diag ingest`` + ``diag findings`` +
  ``diag breakdown`` against ``msprof-analyze advisor all -d RANK_DIR`` (MindStudio's advisor, PyPI
  ``msprof-analyze``);
* a Kineto trace (250 MB, ``bench/bench_cuda_ingest.generate_kineto``): ``diag ingest`` + ``diag breakdown``
  against HTA's ``TraceAnalysis(trace_dir).get_temporal_breakdown()`` (PyPI ``HolisticTraceAnalysis``).

The tools are never installed into the project's venv: a venv of their own is created once under
``$XDG_CACHE_HOME/diag-bench`` (else ``~/.cache/diag-bench``) with the pinned versions below and reused by
later runs.  When it cannot be built (no index reachable) or a tool does not import, its rows say so and the
DuckDB rows still run.  Each pair is run ``--repeat`` times alternating (diag, tool, diag, tool …); the
median wall times are compared and the peak RSS is the highest of the runs, each command in a process of its
own (``bench/_measure.py``).  A row's time is the sum of its commands (ingest, then the questions asked).

    python bench/bench_vs_tools.py [--quick] [--scale F] [--repeat N] [--only ROW …] [--workdir DIR] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402

# The tools' versions, pinned.  HTA 0.5.0 fails on pandas 3 (an int16 column set with larger values in
# hta/common/trace.py transform_correlation_to_index), so pandas is held at the 2.2 line it was released with.
TOOL_PINS = ("msprof-analyze==26.2.0", "HolisticTraceAnalysis==0.5.0", "pandas==2.2.3")
LAYERS = 28  # Qwen2-7B, as bench_ingest.py

FULL = {"trace_1g": 1.1e9, "kernel_rows": 1e6, "advisor_big": 1.0e9, "advisor_small": 2.5e8, "kineto": 2.5e8}
QUICK = {"trace_1g": 2e7, "kernel_rows": 2e4, "advisor_big": 2e7, "advisor_small": 1e7, "kineto": 1e7}

# The advisor's console entry point, run by the venv's python (a moved venv keeps working; its scripts would not)
_ADVISOR = (
    "import sys; from msprof_analyze.cli.entrance import msprof_analyze_cli; "
    "sys.argv[0] = 'msprof-analyze'; sys.exit(msprof_analyze_cli())"
)
_HTA = """
import sys
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
"""

Measure = Callable[[list[str]], dict]


@dataclass
class Row:
    """One line of the table: diag's commands against the tool's, and the targets the issue sets."""

    key: str
    label: str
    diag: list[list[str]]
    tool: list[list[str]] | None  # None: the tool is not available (``missing`` says why)
    tool_name: str
    min_ratio: float  # tool time ÷ diag time at least this
    rss_limit: float  # diag's peak RSS at most this × (the file, or the tool's RSS)
    rss_of: str  # "file" | "tool"
    size: int = 0  # bytes of the input
    missing: str = ""
    cleanup: list[Path] = field(default_factory=list)  # removed before every run (a fresh database)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diag-bench"


def tools_python(pins: tuple[str, ...] = TOOL_PINS, where: Path | None = None) -> tuple[Path | None, str]:
    """The Python of a venv holding ``pins`` (created on first use), or None and why not."""
    tag = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]
    venv = (where or cache_dir()) / f"tools-{tag}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        print(f"creating the tools' venv {venv} ({', '.join(pins)}) …", flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            return None, f"cannot create a venv: {made.stderr.strip()[-200:]}"
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins], capture_output=True, text=True
        )
        if pip.returncode != 0:
            return None, f"pip install failed: {pip.stderr.strip().splitlines()[-1:]}"
        (venv / ".complete").write_text("\n".join(pins) + "\n")
    return python, ""


def tool_imports(python: Path | None, module: str) -> str:
    """'' when ``module`` imports in the tools' venv, else why not (one line)."""
    if python is None:
        return "no tools venv"
    p = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)
    return "" if p.returncode == 0 else f"{module} does not import: {p.stderr.strip().splitlines()[-1:]}"


def run_pair(row: Row, repeat: int, measure_fn: Measure = measure) -> dict:
    """diag and the tool alternated ``repeat`` times: median wall (sum of a side's commands), max RSS."""
    sides: dict[str, list[tuple[float, int, int]]] = {"diag": [], "tool": []}
    for _ in range(repeat):
        for side, cmds in (("diag", row.diag), ("tool", row.tool)):
            if cmds is None:
                continue
            for stale in row.cleanup:
                if stale.is_dir():
                    shutil.rmtree(stale, ignore_errors=True)
                else:
                    stale.unlink(missing_ok=True)
            runs = [measure_fn(cmd) for cmd in cmds]
            rc = next((r["rc"] for r in runs if r["rc"] != 0), 0)
            sides[side].append((sum(r["wall_s"] for r in runs), max(r["peak_rss"] for r in runs), rc))
    out: dict = {"key": row.key, "label": row.label, "tool_name": row.tool_name, "bytes": row.size}
    for side, runs in sides.items():
        if runs:
            out[side] = {
                "wall_s": round(statistics.median(w for w, _, _ in runs), 3),
                "all_wall_s": [round(w, 3) for w, _, _ in runs],
                "peak_rss": max(r for _, r, _ in runs),
                "rc": max((rc for _, _, rc in runs), key=abs),
            }
    return judge(row, out)


def judge(row: Row, out: dict) -> dict:
    """Ratio (tool time ÷ diag time), RSS ratio and whether each target is met."""
    d, t = out.get("diag"), out.get("tool")
    out["min_ratio"], out["rss_limit"], out["rss_of"] = row.min_ratio, row.rss_limit, row.rss_of
    out["missing"] = row.missing
    base = row.size if row.rss_of == "file" else (t or {}).get("peak_rss")
    out["rss_ratio"] = round(d["peak_rss"] / base, 3) if d and base else None  # vs the file: with no tool too
    if not d or not t or d["rc"] or t["rc"]:
        out["ratio"] = out["met"] = None
        return out
    out["ratio"] = round(t["wall_s"] / d["wall_s"], 2)
    out["met"] = (
        out["ratio"] >= row.min_ratio and out["rss_ratio"] is not None and out["rss_ratio"] <= row.rss_limit
    )
    return out


def _cell(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.2f} s"


def _mb(rss: int | None) -> str:
    return "—" if rss is None else f"{rss / 1e6:,.0f} MB"


def table_lines(results: list[dict]) -> list[str]:
    """The Markdown table the README shows: one line per row, every figure with its unit, — where none."""
    lines = [
        "| path | diag | tool | tool ÷ diag | target | diag peak RSS | tool peak RSS | RSS target | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        d, t = r.get("diag") or {}, r.get("tool") or {}
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        rss_ratio = "—" if r["rss_ratio"] is None else f"{r['rss_ratio']:.2f}×"
        of = "the file" if r["rss_of"] == "file" else "the tool's"
        met = "—" if r["met"] is None else ("yes" if r["met"] else "no")
        name = r["tool_name"]
        tool = f"{name}: {_cell(t.get('wall_s'))}" if t else f"{name}: — ({r['missing'] or 'failed'})"
        lines.append(
            f"| {r['label']} | {_cell(d.get('wall_s'))} | {tool} | {ratio} | ≥ {r['min_ratio']:g}× | "
            f"{_mb(d.get('peak_rss'))} ({rss_ratio} {of}) | {_mb(t.get('peak_rss'))} | "
            f"≤ {r['rss_limit']:g}× {of} | {met} |"
        )
    return lines


def compile_diag() -> None:
    """diag's bytecode, compiled once beside its source (``__pycache__``, git-ignored), as ``pip install``
    compiles a package's: the tools run from a venv whose bytecode pip compiled, while diag runs from its source
    tree, where PYTHONDONTWRITEBYTECODE (set on this project's machines) would make every diag process compile
    ~100 modules again (about 0.2 s each).  compileall writes whatever that variable says; Python reads the
    files it finds, and recompiles in memory any whose source changed since."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "diag"), str(ROOT / "parsers")],
        check=False, capture_output=True,
    )  # fmt: skip


def _diag(*args: str) -> list[str]:
    return [sys.executable, "-m", "diag.cli", *args]


def _ascend_folder(where: Path, trace_bytes: int, files: tuple[str, ...] | None = None, **kw: int) -> Path:
    """A generated one-rank torch_npu profiler folder (``rank0_…_ascend_pt``) as msprof-analyze reads it."""
    from sample_traces.generate import FILES, generate

    truth = generate(
        where, ranks=1, layers=LAYERS, target_trace_bytes=trace_bytes, files=files or FILES, **kw
    )
    return where / truth["ranks"]["0"]["run_dir"]


def _fresh(work: Path) -> list[Path]:
    """What every run starts without: diag's database, DuckDB's, the advisor's output."""
    db = work / "diag.duckdb"
    return [
        db,
        db.with_suffix(".duckdb.wal"),
        work / "ctas.duckdb",
        work / "ctas.duckdb.wal",
        work / "advisor",
    ]


def build_rows(sizes: dict, work: Path, tools_py: Path | None, missing: str, only: set[str]) -> list[Row]:
    """Generate each row's input under ``work`` and the commands of both sides."""
    return _ctas_rows(sizes, work, only) + _tool_rows(sizes, work, tools_py, missing, only)


def _ctas_rows(sizes: dict, work: Path, only: set[str]) -> list[Row]:
    from bench.bench_ingest import _STORE

    rows: list[Row] = []
    db, fresh = work / "diag.duckdb", _fresh(work)
    if "trace" in only:
        run = _ascend_folder(work / "trace", int(sizes["trace_1g"]), files=("trace_view",))
        f = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        store = [[sys.executable, "-c", _STORE, "json", str(f), str(work / "ctas.duckdb")]]
        rows.append(
            Row(
                "trace",
                f"trace_view.json {f.stat().st_size / 1e6:,.0f} MB: ingest vs DuckDB CTAS",
                [_diag("ingest", str(f), "--db", str(db), "--json")],
                store,
                "DuckDB CTAS",
                1.5,
                0.5,
                "file",
                f.stat().st_size,
                cleanup=fresh,
            )
        )
    if "csv" in only:
        run = _ascend_folder(
            work / "csv", 0, files=("kernel_details",), kernel_rows=int(sizes["kernel_rows"])
        )
        f = run / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        store = [[sys.executable, "-c", _STORE, "csv", str(f), str(work / "ctas.duckdb")]]
        rows.append(
            Row(
                "csv",
                f"kernel_details.csv {int(sizes['kernel_rows']):,} rows: ingest vs DuckDB CTAS",
                [_diag("ingest", str(f), "--db", str(db), "--json")],
                store,
                "DuckDB CTAS",
                1.0,
                1.0,
                "file",
                f.stat().st_size,
                cleanup=fresh,
            )
        )
    return rows


def _tool_rows(sizes: dict, work: Path, tools_py: Path | None, missing: str, only: set[str]) -> list[Row]:
    from bench.bench_cuda_ingest import generate_kineto

    rows: list[Row] = []
    db, fresh = work / "diag.duckdb", _fresh(work)
    advisor_why = missing or tool_imports(tools_py, "msprof_analyze")
    for key, target in (("advisor_big", 30.0), ("advisor_small", 20.0)):
        if key not in only:
            continue
        run = _ascend_folder(work / key, int(sizes[key]))
        size = (run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").stat().st_size
        diag = [
            _diag("ingest", str(run), "--db", str(db), "--json"),
            _diag("findings", "--db", str(db), "--json"),
            _diag("breakdown", "--db", str(db), "--json"),
        ]
        tool = None
        if not advisor_why:
            tool = [
                [str(tools_py), "-c", _ADVISOR, "advisor", "all", "-d", str(run), "-o", str(work / "advisor")]
            ]
        rows.append(
            Row(
                key,
                f"Ascend folder, trace_view.json {size / 1e6:,.0f} MB: ingest + findings + breakdown",
                diag,
                tool,
                "msprof-analyze advisor all",
                target,
                0.1,
                "tool",
                size,
                advisor_why,
                fresh,
            )
        )
    if "kineto" in only:
        folder = work / "kineto"
        folder.mkdir(parents=True, exist_ok=True)
        f = folder / "rank0.pt.trace.json"
        generate_kineto(f, work / "kineto_events.json", int(sizes["kineto"]))
        (work / "kineto_events.json").unlink(missing_ok=True)
        why = missing or tool_imports(tools_py, "hta")
        tool = None if why else [[str(tools_py), "-c", _HTA, str(folder)]]
        diag = [
            _diag("ingest", str(f), "--db", str(db), "--json"),
            _diag("breakdown", "--db", str(db), "--json"),
        ]
        rows.append(
            Row(
                "kineto",
                f"Kineto trace {f.stat().st_size / 1e6:,.0f} MB: ingest + breakdown",
                diag,
                tool,
                "HTA TraceAnalysis + temporal breakdown",
                10.0,
                1.0,
                "file",
                f.stat().st_size,
                why,
                fresh,
            )
        )
    return rows


ROWS = ("trace", "csv", "advisor_big", "advisor_small", "kineto")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small inputs (~20 MB), one run each: a smoke test")
    p.add_argument(
        "--scale", type=float, default=1.0, help="multiply every input size by this (full sizes only)"
    )
    p.add_argument(
        "--repeat", type=int, default=None, help="alternating runs per row (default 3, 1 with --quick)"
    )
    p.add_argument("--only", nargs="*", choices=ROWS, default=None, help="these rows only")
    p.add_argument(
        "--workdir", type=Path, default=None, help="where inputs go (default: a temp dir, removed)"
    )
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    a = p.parse_args(argv)
    sizes = QUICK if a.quick else {k: v * a.scale for k, v in FULL.items()}
    repeat = a.repeat or (1 if a.quick else 3)
    only = set(a.only or ROWS)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="diag-vs-tools-"))
    work.mkdir(parents=True, exist_ok=True)
    tools_py, missing = (None, "") if only <= {"trace", "csv"} else tools_python()
    compile_diag()
    try:
        t = time.perf_counter()
        rows = build_rows(sizes, work, tools_py, missing, only)
        print(f"generated the inputs in {time.perf_counter() - t:.1f} s under {work}", flush=True)
        results = []
        for row in rows:
            results.append(run_pair(row, repeat))
            r = results[-1]
            print(
                f"{row.label}: diag {r.get('diag', {}).get('all_wall_s')} s, "
                f"{row.tool_name} {r.get('tool', {}).get('all_wall_s')} s",
                flush=True,
            )
        print(f"\n{os.cpu_count()} CPUs, medians of {repeat} alternating run(s):\n")
        print("\n".join(table_lines(results)))
        if a.json:
            print(
                json.dumps({"repeat": repeat, "cpus": os.cpu_count(), "rows": results}, separators=(",", ":"))
            )
    finally:
        if a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
