"""``api_statistic.csv``: per CANN API (acl / runtime / node / hccl level), count and time."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_api_statistic",
    version=1,
    table="api_stats",
    signature=("level", "api_name", "time"),
    aliases={
        "device_id": ("Device_id",),
        "level": ("Level",),
        "api_name": ("API Name",),
        "time": ("Time(us)",),
        "count": ("Count",),
        "avg": ("Avg(us)",),
        "min": ("Min(us)",),
        "max": ("Max(us)",),
        "variance": ("Variance",),
    },
    select={
        "device_id": alt("device_id:text"),
        "level": alt("level:text"),
        "api_name": alt("api_name:text"),
        "total_ns": alt("time:dur"),
        "count": alt("count:int"),
        "avg_ns": alt("avg:dur?"),
        "min_ns": alt("min:dur?"),
        "max_ns": alt("max:dur?"),
        "variance": alt("variance:float"),
    },
)

PARSER = CsvTableParser(SPEC)
