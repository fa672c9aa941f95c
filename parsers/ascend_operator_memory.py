"""``operator_memory.csv``: one allocation per row (KB sizes, MB totals; empty release = after the window)."""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_operator_memory",
    version=1,
    table="op_memory",
    signature=("name", "size", "alloc"),
    aliases={
        "name": ("Name",),
        "size": ("Size(KB)",),
        "alloc": ("Allocation Time(us)",),
        "release": ("Release Time(us)",),
        "active_release": ("Active Release Time(us)",),
        "dur": ("Duration(us)",),
        "active_dur": ("Active Duration(us)",),
        "a_alloc": ("Allocation Total Allocated(MB)",),
        "a_res": ("Allocation Total Reserved(MB)",),
        "a_act": ("Allocation Total Active(MB)",),
        "r_alloc": ("Release Total Allocated(MB)",),
        "r_res": ("Release Total Reserved(MB)",),
        "r_act": ("Release Total Active(MB)",),
        "stream_ptr": ("Stream Ptr",),
        "device": ("Device Type", "Device"),
    },
    select={
        "name": alt("name:text"),
        "size_bytes": alt("size:kb"),
        "alloc_ns": alt("alloc:ts"),
        "release_ns": alt("release:ts?"),
        "active_release_ns": alt("active_release:ts?"),
        "dur_ns": alt("dur:dur?"),
        "active_dur_ns": alt("active_dur:dur?"),
        "alloc_total_allocated_bytes": alt("a_alloc:mb"),
        "alloc_total_reserved_bytes": alt("a_res:mb"),
        "alloc_total_active_bytes": alt("a_act:mb"),
        "release_total_allocated_bytes": alt("r_alloc:mb"),
        "release_total_reserved_bytes": alt("r_res:mb"),
        "release_total_active_bytes": alt("r_act:mb"),
        "stream_ptr": alt("stream_ptr:text"),
        "device": alt("device:text"),
    },
)

PARSER = CsvTableParser(SPEC)
