"""``nsys stats --format csv`` output: per-kernel (and per-API, per-range, per-copy) summaries, no timeline.

One file holds one report (``--output base`` writes ``base_<report>.csv``) or several, concatenated on stdout
with banner lines between them (``Processing [x.sqlite] with [.../cuda_gpu_kern_sum.py]...``,
`` ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):``, ``[3/8] Executing 'cuda_gpu_kern_sum' stats report``,
``SKIPPED: …``, ``WARNING: …``).  Columns are matched by prefix across the header generations
(``Time(%)``/``Time (%)``, ``Average``/``Avg (ns)``, ``Instances``/``Count``/``Num Calls``/``Operations``,
``Minimum``/``Min (ns)``) and each column's unit comes from its header (``--timeunit`` may say us/ms/s).
Report ids are stored under their current names (``gpukernsum`` → ``cuda_gpu_kern_sum``).

Time summaries go to ``kernel_stats``, one row per name, with an op class for the GPU reports.  Memory-size
summaries (``cuda_gpu_mem_size_sum``: MB, taken as 10^6 bytes as nsys prints them) have no time: their
figures go to ``kernel_metrics`` in bytes (section = report, metric = total/avg/med/min/max/stddev; the
``count`` too), as written in ``value_text``.  These files are aggregates (hundreds of rows): read with the
csv module.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from diag.analyses.op_classes import classify
from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import check_not_empty, encoding_error

OLD_REPORT_NAMES = {
    "gpukernsum": "cuda_gpu_kern_sum", "gpumemtimesum": "cuda_gpu_mem_time_sum",
    "gpumemsizesum": "cuda_gpu_mem_size_sum", "cudaapisum": "cuda_api_sum", "nvtxsum": "nvtx_sum",
    "nvtxppsum": "nvtx_sum", "nvtxkernsum": "nvtx_kern_sum", "gputrace": "cuda_gpu_trace",
    "osrtsum": "osrt_sum", "cudaapitrace": "cuda_api_trace", "gpusum": "cuda_gpu_sum",
}  # fmt: skip
GPU_REPORTS = (
    "cuda_gpu_kern_sum",
    "cuda_gpu_kern_gb_sum",
    "cuda_gpu_mem_time_sum",
    "cuda_gpu_sum",
    "nvtx_kern_sum",
)
TIME_UNITS = {
    "ns": 1,
    "nsec": 1,
    "us": 1_000,
    "usec": 1_000,
    "ms": 1_000_000,
    "msec": 1_000_000,
    "s": 10**9,
    "sec": 10**9,
}
SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
# Every report id `nsys stats --help-reports` lists (2021-2025), for a file name ``PREFIX_<report>.csv``.
REPORT_IDS = tuple(
    sorted(
        {
            *OLD_REPORT_NAMES, *OLD_REPORT_NAMES.values(), *GPU_REPORTS, "cuda_api_gpu_sum",
            "cuda_kern_exec_sum", "cuda_kern_exec_trace", "nvtx_gpu_proj_sum", "nvtx_gpu_proj_trace",
            "nvtx_pushpop_sum", "nvtx_pushpop_trace", "nvtx_startend_sum", "openacc_sum", "openmp_sum",
            "um_sum", "um_total_sum", "um_cpu_page_faults_sum", "mpi_event_sum", "mpi_event_trace",
            "vulkan_marker_sum", "vulkan_gpu_marker_sum", "dx11_pix_sum", "dx12_gpu_marker_sum",
            "dx12_pix_sum", "opengl_khr_range_sum", "opengl_khr_gpu_range_sum", "wddm_queue_sum",
        },
        key=len,
        reverse=True,
    )
)  # fmt: skip
_BANNER = re.compile(
    r"^\s*(\*\*|Processing \[|\[\d+/\d+\]|Generating |Exporting |SKIPPED|WARNING|NOTICE|ERROR|Report file|"
    r"Use the |Consider using|Exported successfully)"
)
_REPORT_ID = re.compile(r"\(([a-z0-9_]+)\):\s*$|\[[^\]]*?([a-z0-9_]+)\.py\]|Executing '([a-z0-9_]+)'")
_UNIT = re.compile(r"\(\s*([A-Za-z%/]+)\s*\)\s*$")
# canonical column -> header prefixes (a header matches when it equals one or starts with it + ' (')
COLUMNS = {
    "pct": ("Time (%)", "Time(%)", "Time"),
    "total": ("Total Time", "Total"),
    "count": ("Instances", "Count", "Num Calls", "Operations", "Calls"),
    "avg": ("Avg", "Average"),
    "med": ("Med", "Median"),
    "min": ("Min", "Minimum"),
    "max": ("Max", "Maximum"),
    "stddev": ("StdDev", "Std Dev"),
    "name": ("Name", "Operation", "Range"),
}


def _match(header: list[str]) -> dict[str, tuple[int, str | None]]:
    """canonical column -> (index, unit) by header prefix."""
    found: dict[str, tuple[int, str | None]] = {}
    for i, h in enumerate(header):
        base = _UNIT.sub("", h).strip()
        unit = m.group(1) if (m := _UNIT.search(h)) else None
        for canonical, names in COLUMNS.items():
            if canonical not in found and base in names and not (canonical == "total" and base == "Time"):
                found[canonical] = (i, "%" if canonical == "pct" else unit)
                break
    return found


def is_stats_header(fields: list[str]) -> bool:
    cols = _match(fields)
    return "name" in cols and "count" in cols and ("total" in cols or "avg" in cols)


@dataclass
class Section:
    report: str | None
    header: list[str]
    line: int  # 1-based line of the header
    rows: list[list[str]] = field(default_factory=list)


def split_sections(text: str) -> list[Section]:
    """The CSV tables of a file, each with the report id its banner (if any) named."""
    sections: list[Section] = []
    report: str | None = None
    current: Section | None = None
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            current = None
            continue
        if _BANNER.match(line):
            current = None
            if m := _REPORT_ID.search(line):
                report = next(g for g in m.groups() if g)
            continue
        try:
            fields = next(csv.reader([line]), [])
        except csv.Error:  # a field over the csv module's limit: a row that fits no header
            fields = []
        if current is None:
            if is_stats_header(fields):
                current = Section(report, [f.strip() for f in fields], no)
                sections.append(current)
                report = None
            continue
        current.rows.append(fields)
    return sections


def _report_name(section: Section, path: Path) -> str:
    name = section.report
    if not name:
        stem = path.stem.lower()
        candidates = [*OLD_REPORT_NAMES, *OLD_REPORT_NAMES.values(), "cuda_gpu_kern_gb_sum"]
        name = next((c for c in sorted(candidates, key=len, reverse=True) if c in stem), None)
    if not name:
        cols = {_UNIT.sub("", h).strip() for h in section.header}
        if "Range" in cols:
            name = "nvtx_sum"
        elif "Operation" in cols:
            name = "cuda_gpu_mem_time_sum" if "Total Time" in cols else "cuda_gpu_mem_size_sum"
        elif "Num Calls" in cols:
            name = "cuda_api_sum"
        else:
            name = "cuda_gpu_kern_sum"
    return OLD_REPORT_NAMES.get(name, name)


def _number(text: str) -> float | None:
    t = text.strip().replace(",", "")
    try:
        return float(t) if t and t.lower() not in ("n/a", "-") else None
    except ValueError:
        return None


class NsysStatsCsvParser:
    name = "nsys_stats_csv"
    version = 1
    platform = "cuda"
    run_per_file = True

    def detect(self, probe: Probe) -> bool:
        if b"\x00" in probe.head[:4096]:
            return False
        for line in probe.text.splitlines()[:200]:
            if not line.strip() or _BANNER.match(line):
                continue
            return is_stats_header([f.strip() for f in next(csv.reader([line]), [])])
        return False

    def capture_of(self, probe: Probe) -> str | None:
        """The capture a file is one report of: ``PREFIX`` of ``PREFIX_<report>.csv``, the name ``nsys stats
        --output PREFIX`` gives each report; None for any other name (a stdout capture, a renamed file)."""
        stem = probe.path.stem
        for report in REPORT_IDS:
            if stem == report or stem.endswith(f"_{report}"):
                return f"nsys_stats:{stem[: -len(report)].rstrip('_')}"
        return None

    def parse(self, ctx: ParseContext) -> ParseResult:
        check_not_empty(ctx.path, ctx.display)
        try:
            text = ctx.path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise encoding_error(ctx.path, ctx.display) or BadInputError(ctx.display, "not UTF-8") from None
        sections = split_sections(text)
        if not sections:
            raise BadInputError(
                ctx.display, "no nsys stats table found (no header with Name/Count/Total Time)"
            )
        result = ParseResult()
        bad: list[str] = []
        for section in sections:
            report = _report_name(section, ctx.path)
            cols = _match(section.header)
            rows = [r for r in section.rows if len(r) == len(section.header)]
            bad += [
                f"line {section.line + i + 1}"
                for i, r in enumerate(section.rows)
                if len(r) != len(section.header)
            ]
            if cols.get("total", (0, None))[1] in SIZE_UNITS:
                result.add("kernel_metrics", self._sizes(ctx, report, cols, rows))
            elif report.endswith("_trace"):
                result.notes.append(f"{report}: per-event trace reports are not stored (ingest the .sqlite)")
            else:
                result.add("kernel_stats", self._times(ctx, report, cols, rows))
        if bad:
            result.partial = f"skipped {len(bad)} row(s) that do not fit their header: {', '.join(bad[:5])}"
        return result

    def _times(self, ctx: ParseContext, report: str, cols: dict, rows: list[list[str]]) -> int:
        def value(row: list[str], key: str) -> float | None:
            """The cell in ns (time columns), as a count, or as a percentage."""
            if key not in cols or (v := _number(row[cols[key][0]])) is None:
                return None
            return v if key in ("count", "pct") else v * TIME_UNITS.get(cols[key][1] or "ns", 1)

        def integer(v: float | None) -> int | None:
            return round(v) if v is not None and -(2.0**63) < v < 2.0**63 else None  # NaN, inf: None

        out = []
        for r in rows:
            name = r[cols["name"][0]].strip()
            op_class = classify(name) if report in GPU_REPORTS else None
            out.append(
                (ctx.run_id, ctx.file_id, report, name, op_class, integer(value(r, "count")),
                 integer(value(r, "total")), value(r, "avg"), value(r, "med"), integer(value(r, "min")),
                 integer(value(r, "max")), value(r, "stddev"), value(r, "pct"))
            )  # fmt: skip
        if out:
            ctx.con.executemany(
                "INSERT INTO kernel_stats (run_id, file_id, report, name, op_class, count, total_ns, avg_ns, "
                "med_ns, min_ns, max_ns, stddev_ns, time_pct) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                out,
            )
        return len(out)

    def _sizes(self, ctx: ParseContext, report: str, cols: dict, rows: list[list[str]]) -> int:
        out = []
        for r in rows:
            name = r[cols["name"][0]].strip()
            for key in ("count", "total", "avg", "med", "min", "max", "stddev"):
                if key not in cols:
                    continue
                text = r[cols[key][0]].strip()
                value = _number(text)
                unit = cols[key][1]
                if key != "count" and value is not None:
                    value = float(round(value * SIZE_UNITS.get(unit or "B", 1)))
                out.append((ctx.run_id, ctx.file_id, name, report, key, "" if key == "count" else "B", value,
                            f"{text} {unit}" if unit and key != "count" else text))  # fmt: skip
        if out:
            ctx.con.executemany(
                "INSERT INTO kernel_metrics (run_id, file_id, kernel_name, section, metric, unit, value, value_text) "
                "VALUES (?,?,?,?,?,?,?,?)",
                out,
            )
        return len(out)


PARSER = NsysStatsCsvParser()
