"""torch_npu db export (``ascend_pytorch_profiler[_{rank}].db``) and msprof's ``msprof_*.db``: SQLite.

The torch_npu file is msprof's database plus the framework tables (PYTORCH_API, CONNECTION_IDS, MEMORY_RECORD,
OP_MEMORY, STEP_TIME…); msprof's own file lacks those, which are then simply not read.  Every name is an
integer into ``STRING_IDS``, times are epoch ns.  The tables are copied the way ``parsers.nsys_sqlite`` copies
an nsys export (SQLite writes CSV in batches, DuckDB reads it; no Python object per row), then mapped onto the
tables the text export fills, so that every analysis reads either:

* ``TASK`` → ``device_tasks`` (source ``db``): what trace_view.json's *Ascend Hardware* shows.  FFTS+ parent
  tasks (no context id, same stream and task id as sub-tasks that carry one — the container of a MIX kernel or
  of an HCCL op) are left out, as the trace leaves them out; the kind is the GE task type of
  ``COMPUTE_TASK_INFO`` where known (AI_VECTOR_CORE, MIX_AIV, DSA…), else the runtime type of ``TASK``; the
  small HCCL tasks of ``COMMUNICATION_TASK_INFO`` are ``COMM_TASK``; ``COMMUNICATION_OP`` rows are the
  ``COMMUNICATION`` ops of the trace's ``Group … Communication`` lane.
* ``COMPUTE_TASK_INFO`` ⋈ ``TASK`` + ``COMMUNICATION_OP`` → ``kernels`` (kernel_details.csv's rows: Wait Time
  and Step Id computed the way the exporter does; PMU from ``TASK_PMU_INFO`` with kernel_details' names).
* host ops, flows, steps, memory and counters: ``parsers.msprof_db_host``.

A run folder that holds the text export as well (``export_type`` text and db) is read from the text files:
the db file is then recorded with no rows and a note, so nothing is counted twice (see ``text_sibling``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import duckdb

from diag.errors import BadInputError
from diag.store import q
from parsers import msprof_db_host
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import one_line
from parsers._sql import task_kind
from parsers._sqlite_export import SQLITE_MAGIC, Cols, Export, Stager, open_readonly

NO_ID = 4294967295  # UINT32_MAX: the exporters' "invalid" (no context, no model)
# Files of the text export that hold what a db file holds: when one sits beside the db, the text is read.
TEXT_TWINS = ("trace_view.json", "kernel_details.csv")
MSPROF_TEXT = ("msprof_*.json", "op_summary_*.csv", "task_time_*.csv")


def _b(col: str) -> tuple[str, str]:
    return (col, "BIGINT")


def _v(col: str) -> tuple[str, str]:
    return (col, "VARCHAR")


# staged column -> (SQLite column, DuckDB type); a column the file lacks is NULL
TABLES: dict[str, Cols] = {
    "STRING_IDS": {"id": _b("id"), "value": _v("value")},
    "TASK": {
        "start": _b("startNs"), "end": _b("endNs"), "device": _b("deviceId"), "conn": _b("connectionId"),
        "gid": _b("globalTaskId"), "pid": _b("globalPid"), "type": _b("taskType"), "ctx": _b("contextId"),
        "stream": _b("streamId"), "task": _b("taskId"), "model": _b("modelId"),
    },
    "COMPUTE_TASK_INFO": {
        "gid": _b("globalTaskId"), "name": _b("name"), "type": _b("taskType"), "op_type": _b("opType"),
        "block": _b("blockDim"), "mix_block": _b("mixBlockDim"), "op_state": _b("opState"),
        "hf32": _b("hf32Eligible"), "in_shapes": _b("inputShapes"), "in_dtypes": _b("inputDataTypes"),
        "in_formats": _b("inputFormats"), "out_shapes": _b("outputShapes"), "out_dtypes": _b("outputDataTypes"),
        "out_formats": _b("outputFormats"),
    },
    "COMMUNICATION_TASK_INFO": {"gid": _b("globalTaskId"), "type": _b("taskType"), "size": _v("size")},
    "COMMUNICATION_OP": {
        "name": _b("opName"), "start": _b("startNs"), "end": _b("endNs"), "conn": _b("connectionId"),
        "grp": _b("groupName"), "op_type": _b("opType"), "device": _b("deviceId"),
    },
    "MEMCPY_INFO": {"gid": _b("globalTaskId"), "size": _v("size"), "op": _b("memcpyOperation")},
    "ENUM_MEMCPY_OPERATION": {"id": _b("id"), "name": _v("name")},
    "TASK_PMU_INFO": {"gid": _b("globalTaskId"), "name": _b("name"), "value": ("value", "DOUBLE")},
    **msprof_db_host.TABLES,
}  # fmt: skip
# Newer msprof renamed blockDim/mixBlockDim to blockNum/mixBlockNum and re-used blockDim for SIMT kernels (with
# gridDim): where the newer name exists it is the one read.
RENAMED = {("COMPUTE_TASK_INFO", "block"): "blockNum", ("COMPUTE_TASK_INFO", "mix_block"): "mixBlockNum"}


def db_tables(path: Path) -> set[str] | None:
    try:
        con = open_readonly(path)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError):
        return None


def text_sibling(path: Path, names: tuple[str, ...]) -> str | None:
    """A text export of the same run beside ``path`` (same folder, or msprof's output folder), if any."""
    for folder in (path.parent, path.parent / "mindstudio_profiler_output"):
        for pattern in names:
            found = sorted(folder.glob(pattern)) if folder.is_dir() else []
            if found:
                return found[0].name
    return None


def skipped_as_duplicate(path: Path, names: tuple[str, ...]) -> ParseResult | None:
    twin = text_sibling(path, names)
    if twin is None:
        return None
    result = ParseResult()
    result.notes.append(
        f"not stored: the text export of the same run ({twin}) holds the same data and is read instead"
    )
    return result


class AscendProfilerDbParser:
    name = "ascend_profiler_db"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        if not probe.head.startswith(SQLITE_MAGIC):
            return False
        names = db_tables(probe.path) or set()
        return "STRING_IDS" in names and bool(names & {"TASK", "CANN_API", "PYTORCH_API"})

    def parse(self, ctx: ParseContext) -> ParseResult:
        skipped = skipped_as_duplicate(ctx.path, TEXT_TWINS + MSPROF_TEXT)
        if skipped is not None:
            return skipped
        try:
            src = open_readonly(ctx.path)
            ex = Export(src)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a table or column name that is not UTF-8
            raise BadInputError(ctx.display, f"cannot open as SQLite: {one_line(exc)}") from None
        result = ParseResult()
        plan = [(t, self._cols(ex, t, c), "") for t, c in TABLES.items() if t in ex.columns]
        stager = Stager(ctx.path, ex, ctx, plan)
        temps: dict[str, str] = {}
        try:
            temps.update({t: stager.load(t) for t, _, _ in plan})
            q(ctx.con, f"CREATE OR REPLACE TEMP TABLE _adb_str AS SELECT * FROM {temps['STRING_IDS']}")
            msprof_db_host.resolve_strings(ctx.con, temps)
            if "TASK" in temps:
                _device(ctx, temps, result)
            msprof_db_host.load(ctx, temps, result)
            _run_info(ctx, ex)
        finally:
            with contextlib.suppress(duckdb.Error):  # an aborted transaction takes its temp tables with it
                for view in ("_adb_task", *(t for t in temps.values() if t.endswith("_s"))):
                    q(ctx.con, f"DROP VIEW IF EXISTS {view}")
            stager.close()
            src.close()
            with contextlib.suppress(duckdb.Error):
                for t in ("_adb_str", "_adb_steps", "_adb_pmu", "_adb_pmu_names", "_adb_stack"):
                    q(ctx.con, f"DROP TABLE IF EXISTS {t}")
        return result

    @staticmethod
    def _cols(ex: Export, table: str, cols: Cols) -> Cols:
        out = dict(cols)
        for (t, key), newer in RENAMED.items():
            if t == table and ex.has(table, newer):
                out[key] = (newer, cols[key][1])
        return out


def _device(ctx: ParseContext, temps: dict[str, str], result: ParseResult) -> None:
    con, run, file = ctx.con, ctx.run_id, ctx.file_id
    task = temps["TASK"]
    q(  # FFTS+ parents: no context id, sub-tasks with one on the same stream and task id inside their span
        con,
        f"""DELETE FROM {task} WHERE gid IN (
            SELECT p.gid FROM {task} p JOIN {task} c
              ON c.device = p.device AND c.stream = p.stream AND c.task = p.task AND c.gid <> p.gid
             AND coalesce(c.ctx, {NO_ID}) <> {NO_ID} AND c.start BETWEEN p.start AND p."end"
            WHERE coalesce(p.ctx, {NO_ID}) = {NO_ID})""",
    )
    q(
        con,
        f"""CREATE OR REPLACE TEMP VIEW _adb_task AS
        SELECT t.*, ty.value AS type_name FROM {task} t LEFT JOIN _adb_str ty ON ty.id = t.type""",
    )
    steps = temps.get("STEP_TIME")
    q(
        con,
        "CREATE OR REPLACE TEMP TABLE _adb_steps AS "
        + (f"SELECT id AS step, start, \"end\" FROM {steps}" if steps else "SELECT NULL::BIGINT AS step, "
           "NULL::BIGINT AS start, NULL::BIGINT AS \"end\" WHERE false"),
    )  # fmt: skip
    compute = temps.get("COMPUTE_TASK_INFO")
    comm = temps.get("COMMUNICATION_TASK_INFO")
    memcpy = temps.get("MEMCPY_INFO")
    joins = ""
    if compute:
        joins += f" LEFT JOIN (SELECT gid, name AS c_name, type AS c_type, op_type AS c_op FROM {compute}) c USING (gid)"
    if comm:
        joins += f" LEFT JOIN (SELECT gid, type AS m_type, size AS m_size FROM {comm}) m USING (gid)"
    if memcpy:
        ops = temps.get("ENUM_MEMCPY_OPERATION")
        op = (
            f"coalesce((SELECT any_value(name) FROM {ops} e WHERE e.id = op), CAST(op AS VARCHAR))"
            if ops
            else "op"
        )
        joins += f" LEFT JOIN (SELECT gid, size AS y_size, {op} AS y_op FROM {memcpy}) y USING (gid)"
    c_name, c_type, c_op = ("c.c_name", "c.c_type", "c.c_op") if compute else ("NULL",) * 3
    m_gid, m_type, m_size = ("m.gid", "m.m_type", "m.m_size") if comm else ("NULL",) * 3
    y_size, y_op = ("y.y_size", "y.y_op") if memcpy else ("NULL", "NULL")
    sql = f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
               op_type, start_ns, dur_ns, hw_task_id, connection_id, memcpy_bytes, memcpy_direction)
        SELECT {run}, {file}, 'db', 'Stream ' || t.stream, t.stream,
               CASE WHEN {m_gid} IS NOT NULL THEN 'COMM_TASK'
                    ELSE coalesce({task_kind(c_type)}, {task_kind("t.type_name")}, 'OTHER') END,
               t.type_name, coalesce(nullif({c_name}, 'N/A'), {m_type}, t.type_name), nullif({c_op}, 'N/A'),
               t.start, t."end" - t.start, t.task, t.conn,
               TRY_CAST(coalesce({y_size}, {m_size}) AS BIGINT), CAST({y_op} AS VARCHAR)
        FROM _adb_task t {joins} WHERE t.gid >= $lo AND t.gid < $hi"""
    for lo, hi in _chunks(con, task):  # bounded joins: the ingest runs under a small memory limit
        result.add("device_tasks", q(con, sql, {"lo": lo, "hi": hi})[0][0])
    if "COMMUNICATION_OP" in temps:
        op = temps["COMMUNICATION_OP"]
        n = q(
            con,
            f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, task_kind, task_type, name, op_type,
                   start_ns, dur_ns, connection_id)
            SELECT {run}, {file}, 'db', 'Group ' || coalesce(o.grp, '?') || ' Communication',
                   'COMMUNICATION', 'HCCL', o.name, o.op_type, o.start, o."end" - o.start, o.conn
            FROM {op} o""",
        )[0][0]
        result.add("device_tasks", n)
    _kernels(ctx, temps, result)


CHUNK = 250_000


def _chunks(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[int, int]]:
    """globalTaskId ranges of about CHUNK tasks (at least one range, so that once-only parts run)."""
    lo, hi = q(con, f"SELECT min(gid), max(gid) FROM {table}")[0]
    if lo is None:
        return [(0, 0)]
    return [(a, a + CHUNK) for a in range(int(lo), int(hi) + 1, CHUNK)]


def pmu_label(name: str) -> tuple[str, float]:
    """DB PMU metric → kernel_details' column name and the factor to its unit (``*_time`` is ns in the DB)."""
    special = {"aic_total_time": "aicore_time", "aiv_total_time": "aiv_time"}
    base = special.get(name, name)
    return (f"{base}(us)", 0.001) if base.endswith("_time") else (base, 1.0)


def _kernels(ctx: ParseContext, temps: dict[str, str], result: ParseResult) -> None:
    compute = temps.get("COMPUTE_TASK_INFO")
    if not compute:
        return
    con, run, file = ctx.con, ctx.run_id, ctx.file_id
    pmu_sql, pmu_join, names = "NULL", "", []
    if pmu := temps.get("TASK_PMU_INFO"):
        raw = [r[0] for r in q(con, f"SELECT DISTINCT name FROM {pmu} WHERE name IS NOT NULL ORDER BY 1")]
        labels = [pmu_label(m) for m in raw]
        names = [label for label, _ in labels]
        # metric names come from the file: bound as a parameter, the pivot addresses them by position
        q(
            con,
            "CREATE OR REPLACE TEMP TABLE _adb_pmu_names AS SELECT unnest($names::VARCHAR[]) AS name, "
            "unnest($factors::DOUBLE[]) AS f, generate_subscripts($names::VARCHAR[], 1) AS idx",
            {"names": raw, "factors": [f for _, f in labels]},
        )
        cols = ", ".join(f"max(p.value * n.f) FILTER (WHERE n.idx = {i})" for i in range(1, len(raw) + 1))
        q(
            con,
            f"CREATE OR REPLACE TEMP TABLE _adb_pmu AS SELECT p.gid, [{cols}] AS v "
            f"FROM {pmu} p JOIN _adb_pmu_names n USING (name) GROUP BY p.gid",
        )
        pmu_sql, pmu_join = "p.v", "LEFT JOIN _adb_pmu p ON p.gid = k.gid"
    comm_ops = ""
    if op := temps.get("COMMUNICATION_OP"):
        comm_ops = f"""UNION ALL
            SELECT NULL, coalesce(o.device, (SELECT min(device) FROM _adb_task)), NULL, NULL, NULL,
                   o.name, o.op_type, NULL, 'COMMUNICATION', o.start, o."end" - o.start,
                   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM {op} o WHERE $first"""
    sh = "NULLIF(trim(nullif({}, 'N/A'), '\"'), '')"
    sql = f"""INSERT INTO kernels (run_id, file_id, step, device_id, model_id, hw_task_id, stream_id, name, op_type,
               op_state, accelerator_core, task_kind, start_ns, dur_ns, wait_ns, block_dim, mix_block_dim,
               hf32_eligible, input_shapes, input_dtypes, input_formats, output_shapes, output_dtypes,
               output_formats, context_id, pmu_values)
        WITH k AS (
            SELECT c.gid, t.device, t.model, t.task, t.stream, c.name AS name, c.op_type AS op_type,
                   c.op_state AS op_state, c.type AS core, t.start, t."end" - t.start AS dur,
                   c.block, c.mix_block, c.hf32 AS hf32, c.in_shapes AS in_shapes,
                   c.in_dtypes AS in_dtypes, c.in_formats AS in_formats,
                   c.out_shapes AS out_shapes, c.out_dtypes AS out_dtypes,
                   c.out_formats AS out_formats, t.ctx
            FROM {compute} c JOIN {temps["TASK"]} t USING (gid) WHERE c.gid >= $lo AND c.gid < $hi
            {comm_ops})
        SELECT {run}, {file}, st.step,
               k.device, nullif(k.model, {NO_ID}), k.task, k.stream, k.name, nullif(k.op_type, 'N/A'),
               nullif(k.op_state, 'N/A'), nullif(k.core, 'N/A'), {task_kind("k.core")}, k.start, k.dur,
               NULL,
               k.block, k.mix_block, nullif(k.hf32, 'N/A'), {sh.format("k.in_shapes")}, nullif(k.in_dtypes, 'N/A'),
               nullif(k.in_formats, 'N/A'), {sh.format("k.out_shapes")}, nullif(k.out_dtypes, 'N/A'),
               nullif(k.out_formats, 'N/A'), CAST(nullif(k.ctx, {NO_ID}) AS VARCHAR), {pmu_sql}
        FROM k LEFT JOIN _adb_steps st ON k.start BETWEEN st.start AND st."end" {pmu_join}"""
    for i, (lo, hi) in enumerate(_chunks(con, temps["TASK"])):
        params = {"lo": lo, "hi": hi} | ({"first": i == 0} if comm_ops else {})
        result.add("kernels", q(con, sql, params)[0][0])
    # kernel_details' Wait Time: gap to the previous row's end, device-wide, in start order (on a narrow
    # projection: a window over the full rows would hold them all in memory)
    q(
        con,
        f"""UPDATE kernels SET wait_ns = w.wait FROM (
            SELECT rowid AS rid, greatest(0, start_ns - coalesce(lag(start_ns + dur_ns) OVER (ORDER BY start_ns, rowid),
                   start_ns)) AS wait FROM kernels WHERE file_id = {file}) w
        WHERE kernels.rowid = w.rid""",
    )
    if names:
        q(con, "INSERT INTO pmu_columns (run_id, file_id, names) VALUES (?, ?, ?)", [run, file, names])


def _run_info(ctx: ParseContext, ex: Export) -> None:
    """Device name, rank and device, and META_DATA's JSON values (ENV_VARIABLES…) as the run's metadata."""
    store, run = ctx.store, ctx.run_id
    rank = device = None
    if ex.has("RANK_DEVICE_MAP", "rankId"):
        rows = ex.rows("SELECT rankId, deviceId FROM RANK_DEVICE_MAP ORDER BY deviceId LIMIT 1")
        if rows:
            rank = rows[0][0] if rows[0][0] is not None and int(rows[0][0]) >= 0 else None
            device = rows[0][1]
    if device is None and ex.has("TASK", "deviceId"):
        device = ex.rows("SELECT min(deviceId) FROM TASK")[0][0]
    name = None
    if ex.has("NPU_INFO", "name"):
        rows = ex.rows("SELECT id, name FROM NPU_INFO ORDER BY id")
        name = next((n for i, n in rows if i == device), rows[0][1] if rows else None)
    meta: dict[str, object] = {}
    if ex.has("META_DATA", "value"):
        for key, value in ex.rows("SELECT name, value FROM META_DATA"):
            if key and not str(key).startswith("SCHEMA_VERSION"):
                try:
                    meta[str(key)] = json.loads(value)
                except (TypeError, ValueError):
                    meta[str(key)] = value
    have = q(ctx.con, "SELECT metadata IS NOT NULL, rank, device FROM runs WHERE run_id = ?", [run])
    had_meta = bool(have and have[0][0])
    store.update_run(
        run,
        device_name=name,
        rank=rank if have and have[0][1] is None else None,
        device=int(device) if device is not None and have and have[0][2] is None else None,
        metadata=meta if meta and not had_meta else None,
    )
    if isinstance(meta.get("parallel_group_info"), dict) and not had_meta:
        store.set_job_groups(run, meta["parallel_group_info"])


PARSER = AscendProfilerDbParser()
