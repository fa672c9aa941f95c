"""The records behind the Logs and Fallback pages: scopes, filter values, filtered records, the lines around
one record, and the log records that name an op in a fallback message.  Data only; SQL runs in DuckDB."""

from __future__ import annotations

import re
from typing import Any

from diag.analyses.log_episodes import scope_filter
from diag.store import Store

RECORD_COLUMNS = (
    "file_id", "source", "record_no", "line_no", "line_count", "ts_ns", "level", "module", "pid", "tid",
    "process_name", "device_id", "rank", "source_loc", "code", "category", "rule_id", "severity", "message", "raw",
)  # fmt: skip


def _run_filter(run_id: int | None) -> tuple[str, list[Any]]:
    return scope_filter(run_id)


def record_ref(file_id: int, record_no: int) -> int:
    """One integer naming a log record (the table has no id column): file_id in the high 32 bits."""
    return (int(file_id) << 32) | int(record_no)


def split_ref(ref: int) -> tuple[int, int]:
    return ref >> 32, ref & 0xFFFFFFFF


# -- the Logs page -------------------------------------------------------------------------------------------
def log_scopes(store: Store) -> list[dict[str, Any]]:
    """Where logs are: one entry per run that has log records, and one (run_id None) for logs of no run."""
    rows = (
        store.cursor()
        .execute(
            """SELECT l.run_id, any_value(r.name), count(DISTINCT l.file_id), count(*)
               FROM log_records l LEFT JOIN runs r USING (run_id) GROUP BY l.run_id ORDER BY l.run_id NULLS LAST"""
        )
        .fetchall()
    )
    return [{"run_id": r, "name": n, "files": int(f), "records": int(c)} for r, n, f, c in rows]


def filter_values(store: Store, run_id: int | None = None) -> dict[str, Any]:
    """Distinct values for the page's filters and the time span (ns)."""
    where, params = _run_filter(run_id)
    cur = store.cursor()
    out: dict[str, Any] = {}
    for col in ("level", "module", "code", "category", "rank"):
        rows = cur.execute(
            f"SELECT DISTINCT {col} FROM log_records l WHERE {col} IS NOT NULL{where} ORDER BY 1", params
        ).fetchall()
        out[col] = [r[0] for r in rows]
    lo, hi = cur.execute(
        f"SELECT min(ts_ns), max(ts_ns) FROM log_records l WHERE true{where}", params
    ).fetchall()[0]
    out["start_ns"], out["end_ns"] = lo, hi
    return out


def _select_list() -> str:
    return ", ".join("f.source" if c == "source" else f"l.{c}" for c in RECORD_COLUMNS)


def log_records(
    store: Store,
    run_id: int | None = None,
    *,
    levels: list[str] | None = None,
    modules: list[str] | None = None,
    codes: list[str] | None = None,
    categories: list[str] | None = None,
    ranks: list[int] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    flagged_only: bool = False,
    limit: int = 2000,
) -> list[dict[str, Any]]:
    """Records matching every filter given, in time order (untimed ones by file and position)."""
    where, params = _run_filter(run_id)
    for col, values in (("level", levels), ("module", modules), ("code", codes), ("category", categories),
                        ("rank", ranks)):  # fmt: skip
        if values:
            where += f" AND list_contains(?, l.{col})"
            params.append(list(values))
    if start_ns is not None:
        where += " AND l.ts_ns >= ?"
        params.append(int(start_ns))
    if end_ns is not None:
        where += " AND l.ts_ns <= ?"
        params.append(int(end_ns))
    if flagged_only:
        where += " AND l.category IS NOT NULL AND l.severity <> 'none'"
    cols = _select_list()
    rows = (
        store.cursor()
        .execute(
            f"""SELECT {cols} FROM log_records l JOIN files f USING (file_id) WHERE true{where}
                ORDER BY l.ts_ns NULLS LAST, l.file_id, l.record_no LIMIT ?""",
            [*params, int(limit)],
        )
        .fetchall()
    )
    return [dict(zip(RECORD_COLUMNS, r, strict=True)) for r in rows]


def classified_records(
    store: Store, run_id: int | None = None, limit: int = 1000, job_id: int | None = None
) -> list[dict[str, Any]]:
    """Records a rule flagged (noise excluded) of a run / a job / every log, most severe first, then by time."""
    where, params = scope_filter(run_id, job_id)
    cols = _select_list()
    rows = (
        store.cursor()
        .execute(
            f"""SELECT {cols} FROM log_records l JOIN files f USING (file_id)
                WHERE l.category IS NOT NULL AND l.severity <> 'none'{where}
                ORDER BY CASE l.severity WHEN 'high' THEN 0 WHEN 'medium' THEN 1 WHEN 'low' THEN 2 ELSE 3 END,
                         l.ts_ns NULLS LAST, l.file_id, l.record_no LIMIT ?""",
            [*params, int(limit)],
        )
        .fetchall()
    )
    return [dict(zip(RECORD_COLUMNS, r, strict=True)) for r in rows]


def record_context(
    store: Store, file_id: int, record_no: int, before: int = 5, after: int = 5
) -> list[dict[str, Any]]:
    """The records around one record of a file, in file order."""
    cols = _select_list()
    rows = (
        store.cursor()
        .execute(
            f"""SELECT {cols} FROM log_records l JOIN files f USING (file_id)
                WHERE l.file_id = ? AND l.record_no BETWEEN ? AND ? ORDER BY l.record_no""",
            [file_id, record_no - before, record_no + after],
        )
        .fetchall()
    )
    return [dict(zip(RECORD_COLUMNS, r, strict=True)) for r in rows]


# -- the Fallback page ---------------------------------------------------------------------------------------
_OP_IN_LOG = r"The operator '([^']+)'|Could not run '([^']+)'|Op ?\[([^\]]+)\] does not hit|opName\[(\w+)\]|fault op_name=(\w+)"


def _norm_op(name: str) -> str:
    name = name.lower().split("::")[-1].split(".")[0]
    name = re.sub(r"^node_|_\d+$", "", name)
    return name.replace("_", "")


def log_evidence_for_ops(
    store: Store, run_id: int | None, op_types: list[str], include_unassigned: bool = True
) -> dict[str, list[int]]:
    """For each op type, the log records that name it in a fallback message (``record_ref`` ids, file order).

    Matches torch_npu "The operator 'aten::isin.Tensor_Tensor_out' … fall back to run on the CPU", GE W11001
    "Op [node_select_scatter_1] does not hit …" and AI CPU failures naming the op; names are compared
    without namespace, overload, ``node_`` prefix, numeric suffix, underscores and case.  Logs that belong
    to no run count for every run unless ``include_unassigned`` is False.
    """
    where, params = "", []
    if run_id is not None:
        where = " AND (run_id = ? OR run_id IS NULL)" if include_unassigned else " AND run_id = ?"
        params = [run_id]
    rows = (
        store.cursor()
        .execute(
            f"""SELECT file_id, record_no, raw FROM log_records
                WHERE category IN ('cpu_fallback', 'aicpu_fallback', 'device_exception'){where}
                ORDER BY file_id, record_no""",
            params,
        )
        .fetchall()
    )
    wanted = {op: _norm_op(op) for op in op_types}
    out: dict[str, list[int]] = {op: [] for op in op_types}
    for file_id, record_no, raw in rows:
        names = [_norm_op(next(g for g in m if g)) for m in re.findall(_OP_IN_LOG, raw)]
        for op, norm in wanted.items():
            if norm and any(_same_op(norm, n) for n in names):
                out[op].append(record_ref(file_id, record_no))
    return out


def _same_op(a: str, b: str) -> bool:
    return a == b or (min(len(a), len(b)) >= 4 and (a in b or b in a))


def records_by_ref(store: Store, refs: list[int]) -> list[dict[str, Any]]:
    """Log records by ``record_ref`` id: file, line, level, code and raw text."""
    if not refs:
        return []
    pairs = [split_ref(r) for r in refs]
    rows = (
        store.cursor()
        .execute(
            """SELECT f.source, l.line_no, l.level, l.code, l.raw FROM log_records l JOIN files f USING (file_id)
           WHERE list_contains($pairs, struct_pack(a := l.file_id, b := l.record_no)) ORDER BY l.file_id, l.record_no""",
            {"pairs": [{"a": a, "b": b} for a, b in pairs]},
        )
        .fetchall()
    )
    return [dict(zip(("file", "line_no", "level", "code", "raw"), r, strict=True)) for r in rows]
