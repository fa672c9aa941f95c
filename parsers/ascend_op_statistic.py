"""``op_statistic.csv``: per op type and core type, count and time (Level1+)."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_op_statistic",
    version=1,
    table="op_stats",
    signature=("op_type", "core_type", "count", "total"),
    aliases={
        "device_id": ("Device_id",),
        "op_type": ("OP Type",),
        "core_type": ("Core Type",),
        "count": ("Count",),
        "total": ("Total Time(us)",),
        "min": ("Min Time(us)",),
        "avg": ("Avg Time(us)",),
        "max": ("Max Time(us)",),
        "ratio": ("Ratio(%)",),
    },
    select={
        "device_id": alt("device_id:int"),
        "op_type": alt("op_type:text"),
        "core_type": alt("core_type:text"),
        "count": alt("count:int"),
        "total_ns": alt("total:dur"),
        "min_ns": alt("min:dur?"),
        "avg_ns": alt("avg:dur?"),
        "max_ns": alt("max:dur?"),
        "ratio_pct": alt("ratio:float"),
    },
)

PARSER = CsvTableParser(SPEC)
