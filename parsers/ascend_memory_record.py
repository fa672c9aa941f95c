"""``memory_record.csv`` (MB = 1024² B; msprof's variant in KB): memory per component over time."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_memory_record",
    version=1,
    table="memory",
    signature=("component", "ts", "reserved", "has_allocated"),
    excludes=("Name",),
    aliases={
        "component": ("Component",),
        "ts": ("Timestamp(us)",),
        "allocated_mb": ("Total Allocated(MB)",),
        "allocated_kb": ("Total Allocated(KB)",),
        "reserved": ("Total Reserved(MB)", "Total Reserved(KB)"),
        "reserved_mb": ("Total Reserved(MB)",),
        "reserved_kb": ("Total Reserved(KB)",),
        "active_mb": ("Total Active(MB)",),
        "stream_ptr": ("Stream Ptr",),
        "device": ("Device Type", "Device"),
        "has_allocated": ("Total Allocated(MB)", "Total Allocated(KB)"),
    },
    select={
        "component": alt("component:text"),
        "ts_ns": alt("ts:ts"),
        "allocated_bytes": alt("allocated_mb:mb", "allocated_kb:kb"),
        "reserved_bytes": alt("reserved_mb:mb", "reserved_kb:kb"),
        "active_bytes": alt("active_mb:mb"),
        "stream_ptr": alt("stream_ptr:text"),
        "device": alt("device:text"),
    },
    required=("component", "ts", "reserved", "has_allocated"),
    constants={"source": "'memory_record'"},
)

PARSER = CsvTableParser(SPEC)
