"""A before/after pair from one generated run: the same profile with one op made slower, or its versions edited.

    python -m sample_traces._before_after RUN_DIR --op MatMulV2 --factor 1.2
    python -m sample_traces._before_after RUN_DIR --set cann_version=8.1.RC1 --env HCCL_BUFFSIZE=400
    python -m sample_traces._before_after RUN_DIR --rename TransData=TransDataV2

``RUN_DIR`` is a ``*_ascend_pt`` folder written by ``sample_traces/generate.py``.  ``--op``/``--factor`` multiply
the duration of every kernel of that operator type, in ``kernel_details.csv`` (its ``Duration(us)`` column) and
in ``trace_view.json`` (the ``dur`` of the same kernels' X events in the "Ascend Hardware" process); start times
are kept, so the rest of the profile is byte for byte what it was.  ``--set`` edits a top-level field of
``profiler_info_*.json`` (``cann_version``, ``torch_npu_version``), ``--env`` an entry of profiler_metadata.json's
``ENV_VARIABLES`` — what an upgrade or a changed setting leaves in a real capture (torch_npu writes both files).
"""

from __future__ import annotations

import argparse
import csv
import json
from decimal import Decimal
from pathlib import Path

OUTPUT = "ASCEND_PROFILER_OUTPUT"


def _scaled_us(text: str, factor: float) -> str:
    return f"{Decimal(text.strip()) * Decimal(str(factor)):.3f}"


def another_capture(run_dir: Path) -> None:
    """Make the copy another capture: its profiler_info ends 1 ns later (diag keys a run by that file's hash, and
    two real captures never end at the same instant)."""
    for info in Path(run_dir).glob("profiler_info*.json"):
        record = json.loads(info.read_text(encoding="utf-8"))
        record["end_info"]["collectionTimeEnd"] += 1
        info.write_text(json.dumps(record, indent=4), encoding="utf-8")


def scale_op(run_dir: Path, op_type: str, factor: float) -> int:
    """Multiply the durations of every ``op_type`` kernel by ``factor`` (the folder becomes another capture);
    returns the kernels changed."""
    another_capture(run_dir)
    kd = Path(run_dir) / OUTPUT / "kernel_details.csv"
    with open(kd, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    type_col, dur_col, name_col = head.index("Type"), head.index("Duration(us)"), head.index("Name")
    names, changed = set(), 0
    for row in rows[1:]:
        if row[type_col] == op_type:
            row[dur_col] = _scaled_us(row[dur_col], factor)
            names.add(row[name_col])
            changed += 1
    with open(kd, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    tv = Path(run_dir) / OUTPUT / "trace_view.json"
    events = json.loads(tv.read_text(encoding="utf-8"))
    hardware = {
        e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Ascend Hardware"
    }
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in hardware and e.get("name") in names:
            e["dur"] = float(_scaled_us(str(e["dur"]), factor))
    tv.write_text(json.dumps(events), encoding="utf-8")
    return changed


def rename_op(run_dir: Path, old: str, new: str) -> int:
    """Rename operator type ``old`` to ``new`` in kernel_details.csv (its Type column, which the op table reads):
    one op gone and a new one in its place, as a fusion or kernel change in an upgrade leaves it."""
    kd = Path(run_dir) / OUTPUT / "kernel_details.csv"
    with open(kd, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    type_col = rows[0].index("Type")
    hits = [row for row in rows[1:] if row[type_col] == old]
    for row in hits:
        row[type_col] = new
    with open(kd, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return len(hits)


def edit_environment(run_dir: Path, fields: dict[str, str], env: dict[str, str]) -> None:
    """Set ``fields`` in profiler_info_*.json and ``env`` in profiler_metadata.json's ENV_VARIABLES."""
    for info in Path(run_dir).glob("profiler_info*.json"):
        record = json.loads(info.read_text(encoding="utf-8"))
        record.update(fields)
        info.write_text(json.dumps(record, indent=4), encoding="utf-8")
    if env:
        meta_path = Path(run_dir) / "profiler_metadata.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        meta.setdefault("ENV_VARIABLES", {}).update(env)
        meta_path.write_text(json.dumps(meta, indent=4), encoding="utf-8")


def _pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--op", help="operator type (kernel_details Type), e.g. MatMulV2")
    p.add_argument("--factor", type=float, default=1.2)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="profiler_info field")
    p.add_argument("--rename", metavar="OLD=NEW", help="rename an operator type in kernel_details.csv")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="ENV_VARIABLES entry")
    args = p.parse_args(argv)
    if args.op:
        print(f"{scale_op(args.run_dir, args.op, args.factor)} {args.op} kernels scaled by {args.factor}")
    if args.rename:
        old, new = args.rename.split("=", 1)
        print(f"{rename_op(args.run_dir, old, new)} {old} kernels renamed {new}")
    if args.set or args.env:
        edit_environment(args.run_dir, _pairs(args.set), _pairs(args.env))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
