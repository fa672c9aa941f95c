"""``npu_module_mem.csv``: memory reserved per CANN module (SLOG, HCCL, RUNTIME…) over time."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_npu_module_mem",
    version=1,
    table="memory",
    signature=("component", "ts", "reserved"),
    excludes=("Total Allocated(MB)", "Total Allocated(KB)", "Name"),
    aliases={
        "device_id": ("Device_id",),
        "component": ("Component",),
        "ts": ("Timestamp(us)",),
        "reserved": ("Total Reserved(MB)", "Total Reserved(KB)"),
        "reserved_mb": ("Total Reserved(MB)",),
        "reserved_kb": ("Total Reserved(KB)",),
        "device": ("Device",),
    },
    select={
        "component": alt("component:text"),
        "ts_ns": alt("ts:ts"),
        "reserved_bytes": alt("reserved_mb:mb", "reserved_kb:kb"),
        "device": alt("device:text"),
    },
    constants={"source": "'npu_module_mem'"},
)

PARSER = CsvTableParser(SPEC)
