"""``l2_cache.csv``: L2 cache hit and victim rate per device task (``_l2_cache=True``)."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_l2_cache",
    version=1,
    table="l2_cache",
    signature=("stream_id", "task_id", "hit_rate"),
    aliases={
        "stream_id": ("Stream Id",),
        "task_id": ("Task Id",),
        "hit_rate": ("Hit Rate",),
        "victim_rate": ("Victim Rate",),
        "op_name": ("Op Name",),
    },
    select={
        "stream_id": alt("stream_id:int"),
        "hw_task_id": alt("task_id:int"),
        "hit_rate": alt("hit_rate:float"),
        "victim_rate": alt("victim_rate:float"),
        "op_name": alt("op_name:text"),
    },
)

PARSER = CsvTableParser(SPEC)
