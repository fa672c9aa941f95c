"""msprof (CANN command-line profiler) summaries that torch_npu's text export has no twin for.

``PROF_*/mindstudio_profiler_output/`` (and ``device_*/summary/`` before CANN 8) holds, besides the files
the torch_npu parsers read already (``op_summary_*`` → ``ascend_kernel_details``, ``op_statistic_*``,
``api_statistic_*``, ``npu_module_mem_*``, ``memory_record_*``, ``msprof_*.json`` → ``ascend_trace_view``):

* ``task_time_*.csv`` — every device task (``kernel_type`` KERNEL_AICORE / KERNEL_AICPU / EVENT_RECORD…,
  ``kernel_name`` N/A for non-kernels): the run's ``device_tasks`` (source ``task_time``) when no timeline
  (``msprof_*.json`` / ``trace_view.json``) sits beside it — the timeline holds the same tasks and is read
  instead, so nothing is counted twice.  At Level0 it is where AI_CPU tasks show (``KERNEL_AICPU``).
* ``communication_statistic_*.csv`` — per HCCL op type: ``op_stats`` rows with core type COMMUNICATION.
* ``step_trace_*.csv`` — graph-mode iterations: ``steps`` (an iteration ends at ``Iteration End`` and lasts
  ``Iteration Time``).

Column lists: ``../shared/formats/ascend_profiler.md`` §d "CSV headers" (MSPROF ``*_assembler.cpp``).
"""

from __future__ import annotations

from dataclasses import replace

from parsers._base import ParseContext, ParseResult
from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt
from parsers.ascend_kernel_details import retire_stand_ins, stand_ins
from parsers.ascend_op_statistic import SPEC as OP_STATISTIC
from parsers.ascend_profiler_db import skipped_as_duplicate

TIMELINES = ("trace_view.json", "msprof_*.json", "msprof_slice_*.json")

TASK_TIME = CsvSpec(
    name="msprof_task_time",
    version=1,
    table="device_task_rows",
    signature=("kernel_type", "task_start", "task_time"),
    aliases={
        "kernel_name": ("kernel_name",),
        "kernel_type": ("kernel_type",),
        "stream_id": ("stream_id",),
        "task_id": ("task_id",),
        "task_time": ("task_time(us)",),
        "task_start": ("task_start(us)",),
    },
    select={
        "name": alt("kernel_name:text"),
        "task_type": alt("kernel_type:text"),
        "task_kind": alt("kernel_type:kind"),
        "stream_id": alt("stream_id:int"),
        "hw_task_id": alt("task_id:int"),
        "start_ns": alt("task_start:ts"),
        "dur_ns": alt("task_time:dur"),
    },
    constants={"source": "'task_time'"},
)


def _task_time_after(ctx: ParseContext, result: ParseResult) -> None:
    """Lanes and names as the timeline has them."""
    ctx.con.execute(
        "UPDATE device_task_rows SET stream = 'Stream ' || stream_id, name = coalesce(name, task_type), "
        "task_kind = coalesce(task_kind, 'OTHER') WHERE file_id = ?",
        [ctx.file_id],
    ).fetchall()


class TaskTimeParser(CsvTableParser):
    def parse(self, ctx: ParseContext) -> ParseResult:
        skipped = skipped_as_duplicate(ctx.path, TIMELINES)
        has_trace = ctx.con.execute(
            "SELECT count(*) FROM device_task_rows WHERE run_id = ? AND source = 'trace_view'", [ctx.run_id]
        ).fetchall()[0][0]
        if skipped is None and has_trace:
            skipped = ParseResult(notes=["not stored: the run's timeline holds the same device tasks"])
        if skipped is not None:
            return skipped
        stood_in = stand_ins(ctx.con, ctx.run_id)  # kernel_details stand-ins give way (real tasks now)
        result = super().parse(ctx)
        retire_stand_ins(ctx.con, ctx.run_id, stood_in, result)
        return result


# op_statistic's columns without Core Type: every row is a communication op
COMMUNICATION_STATISTIC = replace(
    OP_STATISTIC,
    name="msprof_communication_statistic",
    version=1,
    signature=("op_type", "count", "total", "ratio"),
    excludes=("Core Type",),  # op_statistic has it
    aliases={k: v for k, v in OP_STATISTIC.aliases.items() if k != "core_type"},
    select={k: v for k, v in OP_STATISTIC.select.items() if k != "core_type"},
    constants={"core_type": "'COMMUNICATION'"},
)

STEP_TRACE = CsvSpec(
    name="msprof_step_trace",
    version=1,
    table="steps",
    signature=("iteration", "iteration_end", "iteration_time"),
    aliases={
        "iteration": ("Iteration ID",),
        "iteration_end": ("Iteration End(us)",),
        "iteration_time": ("Iteration Time(us)",),
    },
    select={
        "step": alt("iteration:int"),
        "start_ns": alt("iteration_time:dur"),  # the duration for now: made the start in _step_after
        "end_ns": alt("iteration_end:ts"),
    },
)


def _step_after(ctx: ParseContext, result: ParseResult) -> None:
    ctx.con.execute(
        "UPDATE steps SET start_ns = end_ns - start_ns WHERE file_id = ?", [ctx.file_id]
    ).fetchall()


TASK_TIME_PARSER = TaskTimeParser(TASK_TIME, after=_task_time_after)
COMMUNICATION_STATISTIC_PARSER = CsvTableParser(COMMUNICATION_STATISTIC)
STEP_TRACE_PARSER = CsvTableParser(STEP_TRACE, after=_step_after)
