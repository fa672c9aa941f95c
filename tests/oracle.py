"""Independent counts of what a source file holds, computed with the standard library only.

The tests compare the store against these; they share no code with the parsers.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

DEVICE = {"Ascend Hardware"}
COMM = {"HCCL", "Communication"}
OVERLAP = "Overlap Analysis"
COUNTER_KEYS = {
    "MHz",
    "KB",
    "Read(MB/s)",
    "Write(MB/s)",
    "Throughput(MB/s)",
    "Hit Rate(%)",
    "value",
    "Mata Bw Level",
    "L2 Buffer Bw Level",
}


def trace_counts(events: list[dict]) -> Counter:
    procs = {
        e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    c: Counter = Counter()
    starts, finishes = set(), set()
    for e in events:
        ph = e.get("ph")
        proc = procs.get(e.get("pid"))
        if proc is None and ph == "X" and "Task Type" in (e.get("args") or {}):
            proc = "Ascend Hardware"
        if ph == "X":
            if proc in DEVICE:
                c["device_tasks"] += 1
                if (e.get("args") or {}).get("Task Type") == "AI_CPU":
                    c["ai_cpu"] += 1
            elif proc in COMM:
                c["device_tasks"] += 1
            elif proc == OVERLAP:
                c["overlap_slices"] += 1
            else:
                c["host_ops"] += 1
            if str(e.get("name", "")).startswith("ProfilerStep#"):
                c["step_names"] += 0  # counted below as distinct
        elif ph == "C":
            c["counters"] += sum(
                1 for k, v in (e.get("args") or {}).items() if k in COUNTER_KEYS and v is not None
            )
        elif ph == "s":
            starts.add((e.get("cat"), str(e.get("id"))))
        elif ph == "f":
            finishes.add((e.get("cat"), str(e.get("id"))))
    c["links"] = len(starts & finishes)
    c["steps"] = len(
        {
            e["name"]
            for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        }
    )
    return c


def load_trace(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def complete_prefix_events(data: bytes, cut: int) -> list[dict]:
    """The events of a JSON array whose text ends at or before byte ``cut``."""
    decoder = json.JSONDecoder()
    text = data.decode("utf-8")
    # work in characters but convert the cut from bytes
    cut_chars = len(data[:cut].decode("utf-8", errors="ignore"))
    i = text.index("[") + 1
    out = []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        obj, end = decoder.raw_decode(text, i)
        if end > cut_chars:
            break
        out.append(obj)
        i = end
    return out


def csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def us_to_ns(value: str) -> int:
    return int((Decimal(value.strip()) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def kernel_figures(path: Path) -> dict:
    header, rows = csv_rows(path)
    rows = [r for r in rows if len(r) == len(header)]
    col = {h: i for i, h in enumerate(header)}
    core = col.get("Accelerator Core")
    return {
        "rows": len(rows),
        "ai_cpu": sum(1 for r in rows if core is not None and r[core].strip() == "AI_CPU"),
        "dur_ns": sum(us_to_ns(r[col["Duration(us)"]]) for r in rows),
        "first_start_ns": us_to_ns(rows[0][col["Start Time(us)"]]) if rows else None,
    }
