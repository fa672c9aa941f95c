"""``step_trace_time.csv``: the exporter's per-step device-time breakdown (µs), with or without Device_id."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_step_trace_time",
    version=1,
    table="step_trace",
    signature=("step", "computing", "comm_not_overlapped", "free"),
    excludes=("Type", "Index"),  # msprof-analyze's cluster_step_trace_time.csv is a different table
    aliases={
        "device_id": ("Device_id",),
        "step": ("Step",),
        "computing": ("Computing",),
        "comm_not_overlapped": ("Communication(Not Overlapped)",),
        "overlapped": ("Overlapped",),
        "communication": ("Communication",),
        "free": ("Free",),
        "stage": ("Stage",),
        "bubble": ("Bubble",),
        "excl_receive": ("Communication(Not Overlapped and Exclude Receive)",),
        "preparing": ("Preparing",),
    },
    select={
        "device_id": alt("device_id:int"),
        "step": alt("step:int"),
        "computing_ns": alt("computing:dur"),
        "comm_not_overlapped_ns": alt("comm_not_overlapped:dur"),
        "overlapped_ns": alt("overlapped:dur?"),
        "communication_ns": alt("communication:dur?"),
        "free_ns": alt("free:dur"),
        "stage_ns": alt("stage:dur?"),
        "bubble_ns": alt("bubble:dur?"),
        "comm_not_overlapped_excl_receive_ns": alt("excl_receive:dur?"),
        "preparing_ns": alt("preparing:dur?"),
    },
)

PARSER = CsvTableParser(SPEC)
