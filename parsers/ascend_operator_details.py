"""``operator_details.csv``: host torch ops with their host and linked device durations (multi-line stacks)."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_operator_details",
    version=1,
    table="op_details",
    signature=("name", "host_self"),
    aliases={
        "name": ("Name",),
        "input_shapes": ("Input Shapes",),
        "call_stack": ("Call Stack",),
        "host_self": ("Host Self Duration(us)",),
        "host_total": ("Host Total Duration(us)",),
        "device_self": ("Device Self Duration(us)",),
        "device_total": ("Device Total Duration(us)",),
        "device_self_aicore": ("Device Self Duration With AICore(us)",),
        "device_total_aicore": ("Device Total Duration With AICore(us)",),
    },
    select={
        "name": alt("name:text"),
        "input_shapes": alt("input_shapes:text"),
        "call_stack": alt("call_stack:text"),
        "host_self_ns": alt("host_self:dur"),
        "host_total_ns": alt("host_total:dur?"),
        "device_self_ns": alt("device_self:dur?"),
        "device_total_ns": alt("device_total:dur?"),
        "device_self_aicore_ns": alt("device_self_aicore:dur?"),
        "device_total_aicore_ns": alt("device_total_aicore:dur?"),
    },
)

PARSER = CsvTableParser(SPEC)
