"""The parser registry: one line per format. Ordering matters for detection (first match wins)."""

from __future__ import annotations

import importlib
from pathlib import Path

from parsers import (
    ascend_api_statistic,
    ascend_communication,
    ascend_kernel_details,
    ascend_l2_cache,
    ascend_memory_record,
    ascend_npu_module_mem,
    ascend_op_statistic,
    ascend_operator_details,
    ascend_operator_memory,
    ascend_profiler_db,
    ascend_profiler_info,
    ascend_static_op_mem,
    ascend_step_trace_time,
    ascend_trace_view,
    kineto_trace,
    moe_deployment,
    moe_hotspot,
    msprof_analysis_db,
    msprof_csv,
    ncu_csv,
    nsight_report,
    nsys_sqlite,
    nsys_stats_csv,
    serving_bench,
)
from parsers._base import ParseContext, Parser, ParseResult, Probe


class DeferredParser:
    """A parser whose module is imported when it is first asked something: the log parser's modules import
    Polars, PyArrow and NumPy at once (~60 MB of RSS, a quarter of a 250 MB Kineto ingest's peak), which an
    ingest of a file that another parser claims never uses.  Last in PARSERS, it loads only for a file no
    export parser took (tests/test_ingest_memory.py)."""

    def __init__(self, module: str, name: str) -> None:
        self.name = name  # known without importing: PARSER_BY_NAME, the ledger's parser column
        self._module = module
        self._parser: Parser | None = None

    def load(self) -> Parser:
        if self._parser is None:
            self._parser = importlib.import_module(self._module).PARSER
            if self._parser.name != self.name:
                raise RuntimeError(f"{self._module}.PARSER is named {self._parser.name!r}, not {self.name!r}")
        return self._parser

    @property
    def version(self) -> int:
        return self.load().version

    @property
    def platform(self) -> str:
        return self.load().platform

    def detect(self, probe: Probe) -> bool:
        return self.load().detect(probe)

    def parse(self, ctx: ParseContext) -> ParseResult:
        return self.load().parse(ctx)

    def __getattr__(self, attr: str) -> object:  # creates_run, run_per_file … as the parser says
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)


PARSERS: tuple[Parser, ...] = (
    ascend_trace_view.PARSER,
    ascend_communication.PARSER,
    ascend_communication.MATRIX_PARSER,
    ascend_profiler_info.PARSER,
    ascend_profiler_info.METADATA_PARSER,
    ascend_operator_details.PARSER,  # before kernel_details: both have Name, only this has host durations
    ascend_kernel_details.PARSER,
    ascend_step_trace_time.PARSER,
    ascend_memory_record.PARSER,
    ascend_npu_module_mem.PARSER,
    ascend_operator_memory.PARSER,
    ascend_static_op_mem.PARSER,  # graph mode: Op Name + Graph ID + Node Index Start
    ascend_op_statistic.PARSER,
    ascend_api_statistic.PARSER,
    ascend_l2_cache.PARSER,
    msprof_csv.TASK_TIME_PARSER,  # msprof CLI summaries (op_summary, op/api_statistic: the parsers above)
    msprof_csv.COMMUNICATION_STATISTIC_PARSER,
    msprof_csv.STEP_TRACE_PARSER,
    ascend_profiler_db.PARSER,  # SQLite magic + STRING_IDS and TASK / CANN_API / PYTORCH_API
    msprof_analysis_db.PARSER,  # SQLite magic + StepTraceTime / CommAnalyzer* (torch_npu analysis.db)
    nsys_sqlite.PARSER,  # CUDA: SQLite magic + nsys tables
    kineto_trace.PARSER,  # a JSON object with traceEvents (plain or .gz); Ascend traces are bare arrays
    nsys_stats_csv.PARSER,
    ncu_csv.PARSER,
    nsight_report.PARSER,  # after the CUDA exports: a renamed export is read, only binary reports refused
    moe_hotspot.PARSER,  # {prefill|decode}_<rank>.csv of integers (expert hotspot): name and content
    moe_deployment.PARSER,  # {prefill|decode}_global_deployment.json with layer_list
    serving_bench.PARSER,  # serving results (text blocks, AISBench tables, JSON): before the log parser
    # last: logs are claimed by content only when no export parser took the file
    DeferredParser("parsers.cann_log", "cann_log"),
)

PARSER_BY_NAME: dict[str, Parser] = {p.name: p for p in PARSERS}


def detect(probe: Probe) -> Parser | None:
    """The first parser that recognises the file's content, or None."""
    for parser in PARSERS:
        if parser.detect(probe):
            return parser
    return None


def detect_path(path: Path) -> Parser | None:
    return detect(Probe.of(path))


__all__ = [
    "PARSERS",
    "PARSER_BY_NAME",
    "ParseContext",
    "ParseResult",
    "Parser",
    "Probe",
    "detect",
    "detect_path",
]
