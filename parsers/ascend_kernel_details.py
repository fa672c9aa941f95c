"""``kernel_details.csv`` (torch_npu) and msprof ``op_summary_*.csv``: one row per device compute/comm op.

Header names differ by version (``Block Dim``/``Block Num``, op_summary's ``Op Name``/``Task Type``…) and the
PMU column set depends on ``aic_metrics``: every column not mapped below goes into ``pmu_values``, named by ``pmu_columns``.
When a run has no stored timeline, these rows also stand in as its device tasks (the view ``device_tasks``).
"""

from __future__ import annotations

import duckdb

from parsers._base import ParseContext, ParseResult
from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_kernel_details",
    version=1,
    table="kernels",
    signature=("name", "start"),  # detection; a file missing a required column then fails naming it
    required=("name", "start", "dur"),
    aliases={
        "step": ("Step Id", "Step ID"),
        "device_id": ("Device_id",),
        "model_id": ("Model ID",),
        "hw_task_id": ("Task ID",),
        "stream_id": ("Stream ID",),
        "name": ("Name", "Op Name"),
        "op_type": ("Type", "OP Type"),
        "op_state": ("OP State",),
        "core": ("Accelerator Core", "Task Type"),
        "start": ("Start Time(us)", "Task Start Time(us)"),
        "dur": ("Duration(us)", "Task Duration(us)"),
        "wait": ("Wait Time(us)", "Task Wait Time(us)"),
        # 'Block Num' is the newer name of 'Block Dim'; where both appear, 'Block Dim' is the SIMT kernels' new
        # field of another meaning (formats/ascend_profiler.md, surprises #1): the first spelling found wins.
        "block_dim": ("Block Num", "Block Dim"),
        "mix_block_dim": ("Mix Block Num", "Mix Block Dim"),
        "hf32": ("HF32 Eligible",),
        "in_shapes": ("Input Shapes",),
        "in_dtypes": ("Input Data Types",),
        "in_formats": ("Input Formats",),
        "out_shapes": ("Output Shapes",),
        "out_dtypes": ("Output Data Types",),
        "out_formats": ("Output Formats",),
        "context_id": ("Context ID",),
    },
    select={
        "step": alt("step:int"),
        "device_id": alt("device_id:int"),
        "model_id": alt("model_id:int"),
        "hw_task_id": alt("hw_task_id:int"),
        "stream_id": alt("stream_id:int"),
        "name": alt("name:text"),
        "op_type": alt("op_type:text"),
        "op_state": alt("op_state:text"),
        "accelerator_core": alt("core:text"),
        "task_kind": alt("core:kind"),
        "start_ns": alt("start:ts"),
        "dur_ns": alt("dur:dur"),
        "wait_ns": alt("wait:dur?"),
        "block_dim": alt("block_dim:int"),
        "mix_block_dim": alt("mix_block_dim:int"),
        "hf32_eligible": alt("hf32:text"),
        "input_shapes": alt("in_shapes:shapes"),
        "input_dtypes": alt("in_dtypes:text"),
        "input_formats": alt("in_formats:text"),
        "output_shapes": alt("out_shapes:shapes"),
        "output_dtypes": alt("out_dtypes:text"),
        "output_formats": alt("out_formats:text"),
        "context_id": alt("context_id:text"),
    },
    rest_as_list="pmu_values",
    excludes=("Host Self Duration(us)",),
)


def stand_in_device_tasks(ctx: ParseContext, result: ParseResult) -> None:
    """Without a stored timeline, the kernel rows are the run's device tasks: the view ``device_tasks`` shows
    them (diag.schema), nothing is copied.  Counted as this file's device_tasks rows, as the ledger always had."""
    if not _has_stored_tasks(ctx.con, ctx.run_id):
        result.add("device_tasks", result.rows.get("kernels", 0))


def stand_ins(con: duckdb.DuckDBPyConnection, run_id: int) -> list[tuple[int, int]]:
    """(file_id, rows) of the kernel_details files whose rows stand in for the run's device tasks now."""
    return con.execute(
        "SELECT file_id, count(*) FROM kernels WHERE run_id = ? AND file_id IN "
        "(SELECT file_id FROM files WHERE stand_in_tasks) GROUP BY file_id ORDER BY file_id",
        [run_id],
    ).fetchall()


def retire_stand_ins(
    con: duckdb.DuckDBPyConnection, run_id: int, before: list[tuple[int, int]], result: ParseResult
) -> None:
    """After a timeline file stored the run's tasks: the kernel rows that stood in (``before``) no longer do,
    and leave their files' row counts, as the copies a trace replaced once did."""
    if not before or not _has_stored_tasks(con, run_id):
        return
    for file_id, n in before:
        con.execute("UPDATE files SET rows = rows - ? WHERE file_id = ?", [n, file_id]).fetchall()
    result.removed["device_tasks"] = result.removed.get("device_tasks", 0) + sum(n for _, n in before)


def _has_stored_tasks(con: duckdb.DuckDBPyConnection, run_id: int) -> bool:
    return bool(
        con.execute(
            "SELECT 1 FROM device_task_rows WHERE run_id = ? AND source IS DISTINCT FROM 'kernel_details' LIMIT 1",
            [run_id],
        ).fetchall()
    )


PARSER = CsvTableParser(SPEC, after=stand_in_device_tasks)
