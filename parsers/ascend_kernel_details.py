"""``kernel_details.csv`` (torch_npu) and msprof ``op_summary_*.csv``: one row per device compute/comm op.

Header names differ by version (``Block Dim``/``Block Num``, op_summary's ``Op Name``/``Task Type``…) and the
PMU column set depends on ``aic_metrics``: every column not mapped below goes into ``pmu_values``, named by ``pmu_columns``.
When a run has no trace_view.json, these rows also stand in as its device tasks.
"""

from __future__ import annotations

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
    """Without a trace, kernel rows are the run's device tasks (with the GE task type as kind)."""
    has_trace = ctx.con.execute(
        "SELECT count(*) FROM device_tasks WHERE run_id = ? AND source <> 'kernel_details'", [ctx.run_id]
    ).fetchall()[0][0]
    if has_trace:
        return
    row = ctx.con.execute(
        """INSERT INTO device_tasks (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
               op_type, start_ns, dur_ns, step, hw_task_id)
        SELECT run_id, file_id, 'kernel_details',
               CASE WHEN stream_id IS NULL THEN accelerator_core ELSE 'Stream ' || stream_id END,
               stream_id, coalesce(task_kind, 'OTHER'), accelerator_core, name, op_type, start_ns, dur_ns,
               step, hw_task_id
        FROM kernels WHERE file_id = ?""",
        [ctx.file_id],
    ).fetchall()[0]
    result.add("device_tasks", row[0] if row else 0)


PARSER = CsvTableParser(SPEC, after=stand_in_device_tasks)
