"""Nsight Systems SQLite export (``nsys export --type sqlite``; also the .sqlite ``nsys stats`` writes).

Read offline with the standard library's ``sqlite3`` (DuckDB's sqlite extension would be downloaded at run
time).  Each table is moved in batches of 200k rows that SQLite itself formats as CSV text (``printf`` +
``group_concat``, in C) into a temporary file, which DuckDB then reads in one scan: memory stays bounded on
GB exports and no Python object is made per row.  Measured on 1M kernel rows × 9 columns: 1.0 s this way,
2.6 s with ``cursor.fetchmany`` into Arrow batches registered with DuckDB.  A worker thread writes the next
tables' CSV while DuckDB loads the earlier ones (sqlite3 and DuckDB both release the GIL).  Names are ids
into ``StringIds``, resolved inside DuckDB once per distinct id.  Tables are looked up by name and columns by
existence, so every schema generation from ≈2021 (no export metadata) to 2026.1 reads; a table an export
lacks (lazy export, failed capture) is simply empty, and an export with no GPU table at all is refused with
the reason.  Times are session-relative ns, made epoch ns with ``TARGET_INFO_SESSION_START_TIME`` unless
the export was normalised (``--ts-normalize``), minus any ``--ts-shift``.  Device memory
(``--cuda-memory-usage=true``) → memory and op_memory (``parsers._nsys_memory``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from diag.errors import BadInputError
from diag.store import file_literal, q, sql_literal
from parsers import _nsys_memory
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import add_partial, one_line

SQLITE_MAGIC = b"SQLite format 3\x00"
BATCH_ROWS = 200_000
NO_STREAM = 4294967295  # CUPTI's "no stream": a context-wide synchronisation
_CSV = (  # rows end in '\n' only: a '\r' inside a quoted name is text (DuckDB would take it for a line end)
    "header=false, delim=',', quote='\"', escape='\"', new_line='\\n', auto_detect=false, "
    "max_line_size=4194304, buffer_size=16777216"
)
# ENUM_CUDA_MEMCPY_OPER as every export seen has it; an id an export adds comes from its ENUM table
MEMCPY_KINDS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM_HtoD", 12: "UVM_DtoH", 13: "UVM_DtoD",
}  # fmt: skip
MEMCPY_LABELS = {
    0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
    5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array", 8: "Device-to-Device",
    9: "Host-to-Host", 10: "Peer-to-Peer", 11: "Unified Host-to-Device", 12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}  # fmt: skip
SYNC_TYPES = {0: "Unknown sync", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
NVTX_RANGE_TYPES = (34, 35, 37, 59, 60)  # mark, push, start, PushPop range, StartEnd range
NVTX_DOMAIN_CREATE = 75
GPU_KEYS = ("kernels", "memcpy", "memset")  # the tables that make an export worth storing
USELESS_SHORT_NAMES = ("Kernel", "Kernel2", "kernel")  # CUTLASS / cuBLAS short names say nothing

Cols = dict[str, tuple[str, str]]  # staged column -> (SQLite column, DuckDB type)
ACTIVITY: Cols = {
    "start": ("start", "BIGINT"), "end": ("end", "BIGINT"), "device": ("deviceId", "BIGINT"),
    "stream": ("streamId", "BIGINT"), "corr": ("correlationId", "BIGINT"),
}  # fmt: skip
KERNEL: Cols = {
    "d": ("demangledName", "BIGINT"),
    "s": ("shortName", "BIGINT"),
    "m": ("mangledName", "BIGINT"),
}
COPY: Cols = {"bytes": ("bytes", "BIGINT"), "kind": ("copyKind", "BIGINT")}
MEMSET: Cols = {"bytes": ("bytes", "BIGINT")}
SYNC: Cols = {"kind": ("syncType", "BIGINT")}
EVENT: Cols = {
    "ts": ("timestamp", "BIGINT"), "device": ("deviceId", "BIGINT"), "stream": ("streamId", "BIGINT"),
    "corr": ("correlationId", "BIGINT"),
}  # fmt: skip
RUNTIME: Cols = {
    "start": ("start", "BIGINT"), "end": ("end", "BIGINT"), "cls": ("eventClass", "BIGINT"),
    "gtid": ("globalTid", "BIGINT"), "corr": ("correlationId", "BIGINT"), "name": ("nameId", "BIGINT"),
}  # fmt: skip
NVTX: Cols = {
    "start": ("start", "BIGINT"), "end": ("end", "BIGINT"), "type": ("eventType", "BIGINT"),
    "text": ("text", "VARCHAR"), "gtid": ("globalTid", "BIGINT"), "text_id": ("textId", "BIGINT"),
    "domain": ("domainId", "BIGINT"),
}  # fmt: skip
NAME_SQL = (
    "coalesce(nullif(d.value, ''), CASE WHEN s.value NOT IN ({}) THEN nullif(s.value, '') END, "
    "nullif(m.value, ''), s.value)"
).format(", ".join(f"'{n}'" for n in USELESS_SHORT_NAMES))
_NCCL = "regexp_matches({}, '^(void\\s+)?nccl')"


def open_readonly(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def nsys_tables(path: Path) -> set[str] | None:
    """The table names when the file is an nsys export, else None."""
    try:
        con = open_readonly(path)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError):  # a name that is not UTF-8: not a usable export
        return None
    marker = any(
        t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_"))
        or t in ("META_DATA_EXPORT", "EXPORT_META_DATA")
        for t in names
    )
    return names if "StringIds" in names and marker else None


class Export:
    """One open export: its tables and columns, metadata, enums, and the time offset to epoch ns."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        self.columns = {
            t: {r[1]: bool(r[3]) for r in con.execute(f'PRAGMA table_info("{t}")')} for t in names
        }
        meta = self.first("META_DATA_EXPORT", "EXPORT_META_DATA")
        self.meta: dict[str, str] = dict(self.rows(f"SELECT name, value FROM {meta}")) if meta else {}

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def first(self, *tables: str) -> str | None:
        return next((t for t in tables if t in self.columns), None)

    def has(self, table: str | None, column: str) -> bool:
        return table is not None and column in self.columns.get(table, {})

    def kernel_table(self) -> str | None:
        """The kernel table; later exports may version it (``_V2``…), older ones called it CONCURRENT_KERNEL."""
        if "CUPTI_ACTIVITY_KIND_KERNEL" in self.columns:
            return "CUPTI_ACTIVITY_KIND_KERNEL"
        versioned = sorted(
            (t for t in self.columns if re.fullmatch(r"CUPTI_ACTIVITY_KIND_KERNEL_V\d+", t)),
            key=lambda t: int(t.rsplit("_V", 1)[1]),
        )
        return versioned[-1] if versioned else self.first("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")

    def param(self, key: str) -> str | None:
        """An export parameter (2022.1 wrote EXPORT_X, later EXPORT_PARAM_X; EXPORT_CONFIG_X is the default)."""
        for prefix in ("EXPORT_PARAM_", "EXPORT_", "EXPORT_CONFIG_"):
            if prefix + key in self.meta:
                return self.meta[prefix + key]
        return None

    def offset_ns(self) -> tuple[int, str | None]:
        """What to add to an export time to make it epoch ns, and a note when that is not possible."""
        shift = int(self.param("TIME_SHIFT") or 0)
        if (self.param("TIME_NORMALIZE") or "").lower() == "true":
            return -shift, None
        if self.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
            row = self.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            if row and row[0][0] is not None:
                return int(row[0][0]) - shift, None
        return -shift, "no session start time in this export (nsys ≤2021): timestamps are session-relative"

    def enum(self, table: str, column: str) -> dict[int, str]:
        """id -> name or label of an ENUM_* table ({} when the export has none)."""
        if not self.has(table, column):
            return {}
        return {int(i): v for i, v in self.rows(f"SELECT id, {column} FROM {table}")}


# -- moving rows: SQLite writes CSV (a worker thread), DuckDB reads it (this thread) ----------------------
def csv_line(have: dict[str, bool], cols: Cols) -> str:
    """The SQLite expression that prints one row of ``cols`` as a CSV line; a missing column is NULL."""
    exprs, fmts = [], []
    for src, duck_type in cols.values():
        exprs.append(f'"{src}"' if src in have else "NULL")
        if duck_type == "VARCHAR":
            exprs[-1] = f"ifnull({exprs[-1]}, '')"  # %w prints NULL as '(NULL)'
            fmts.append('"%w"')  # %w doubles double quotes: a quoted CSV field
        else:
            fmts.append("%d" if have.get(src) else "%s")  # %s prints NULL as an empty field
    return "printf('" + ",".join(fmts) + "', " + ", ".join(exprs) + ")"


def write_csv(path: Path, table: str, line: str, where: str, out: Path) -> None:
    """Rows of ``table`` as CSV into ``out``, batches of rowids formatted by SQLite (its own connection)."""
    con = open_readonly(path)
    try:
        with open(out, "w", encoding="utf-8", newline="") as fh:
            try:
                lo, hi = con.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchall()[0]
            except sqlite3.OperationalError:  # a WITHOUT ROWID table: one streamed query instead
                cur = con.execute(f'SELECT {line} FROM "{table}"' + (f" WHERE {where}" if where else ""))
                while rows := cur.fetchmany(50_000):
                    fh.write("\n".join(r[0] for r in rows) + "\n")
                return
            cond = f" AND ({where})" if where else ""
            sql = f'SELECT group_concat({line}, char(10)) FROM "{table}" WHERE rowid >= ? AND rowid < ?{cond}'
            for start in range(lo, hi + 1, BATCH_ROWS) if lo is not None else ():
                if text := con.execute(sql, (start, start + BATCH_ROWS)).fetchall()[0][0]:
                    fh.write(text + "\n")
    finally:
        con.close()


class Stager:
    """Tables copied into DuckDB temp tables (``_ns_<table>``): a worker thread has SQLite write the CSV of the
    next tables while DuckDB loads and inserts the earlier ones (sqlite3 and DuckDB both release the GIL)."""

    def __init__(self, path: Path, ex: Export, ctx: ParseContext, plan: list[tuple[str, Cols, str]]) -> None:
        self.ctx, self.cols, self.temps = ctx, {t: c for t, c, _ in plan}, []
        self.files = {t: ctx.tmpdir / f"nsys_{ctx.file_id}_{t}.csv" for t, _, _ in plan}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsys-csv")
        self.jobs = {
            t: self.pool.submit(write_csv, path, t, csv_line(ex.columns[t], c), w, self.files[t])
            for t, c, w in plan
        }

    def load(self, table: str) -> str:
        temp = f"_ns_{table.lower()}"
        spec = "{" + ", ".join(f"'{n}': '{t}'" for n, (_, t) in self.cols[table].items()) + "}"
        try:
            self.jobs[table].result()
            path = file_literal(self.files[table])
            q(
                self.ctx.con,
                f"CREATE OR REPLACE TEMP TABLE {temp} AS SELECT * FROM read_csv({path}, {_CSV}, columns={spec})",
            )
        except (sqlite3.Error, duckdb.Error, OSError, UnicodeDecodeError) as exc:
            raise BadInputError(self.ctx.display, f"cannot read table {table}: {one_line(exc)}") from None
        finally:
            self.files[table].unlink(missing_ok=True)
        self.temps.append(temp)
        return temp

    def close(self) -> None:
        for job in self.jobs.values():
            job.cancel()
        self.pool.shutdown(wait=True)
        for f in self.files.values():
            f.unlink(missing_ok=True)
        with contextlib.suppress(duckdb.Error):  # an aborted transaction takes its temp tables with it
            for t in self.temps:
                q(self.ctx.con, f"DROP TABLE IF EXISTS {t}")


def stage(ex: Export, ctx: ParseContext, table: str, cols: Cols, where: str = "") -> str:
    """Copy one table into a DuckDB temp table (what the parser does table by table; for tests and tools)."""
    stager = Stager(ctx.path, ex, ctx, [(table, cols, where)])
    try:
        return stager.load(table)
    finally:
        stager.temps.clear()  # the caller keeps the table
        stager.close()


def _case(expr: str, mapping: dict[int, str], default: str) -> str:
    whens = " ".join(f"WHEN {k} THEN {sql_literal(v)}" for k, v in mapping.items())
    return f"CASE {expr} {whens} ELSE {default} END"


class _Insert:
    """INSERTs of one file's rows, with the run/file ids, the time offset and the stream labels."""

    def __init__(self, ctx: ParseContext, result: ParseResult, off: int, multi_device: bool) -> None:
        self.ctx, self.result, self.off = ctx, result, off
        prefix = "'GPU ' || y.device || ' · ' || " if multi_device else ""
        self.lane = f"CASE WHEN y.stream IS NULL THEN y.name ELSE {prefix}'Stream ' || y.stream END"

    def device(self, select: str) -> None:
        """``select`` yields kind, type, name, start, dur, corr, bytes, direction, stream, device."""
        c = self.ctx
        n = q(
            c.con,
            f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
                   start_ns, dur_ns, connection_id, memcpy_bytes, memcpy_direction)
            SELECT {c.run_id}, {c.file_id}, 'nsys', {self.lane}, y.stream, y.kind, y.type, y.name,
                   y.start + {self.off}, y.dur, y.corr, y.bytes, y.direction
            FROM ({select}) y(kind, type, name, start, dur, corr, bytes, direction, stream, device)""",
        )[0][0]
        self.result.add("device_tasks", n)

    def host(self, select: str) -> None:
        """``select`` yields gtid, category, name, start, dur, corr, domain."""
        c = self.ctx
        pid = "((y.gtid >> 24) & 16777215)"  # serialized GlobalId: pid in bits 24-47, tid in 0-23
        n = q(
            c.con,
            f"""INSERT INTO host_ops (run_id, file_id, pid, tid, process, category, name, start_ns, dur_ns,
                   correlation, api_level)
            SELECT {c.run_id}, {c.file_id}, {pid}, y.gtid & 16777215, p.name, y.category, y.name,
                   y.start + {self.off}, y.dur, y.corr, y.domain
            FROM ({select}) y(gtid, category, name, start, dur, corr, domain)
                 LEFT JOIN _ns_proc p ON p.pid = {pid}""",
        )[0][0]
        self.result.add("host_ops", n)


class NsysSqliteParser:
    name = "nsys_sqlite"
    version = 3  # 2: GPU tables without start/end, or all empty, are refused (#18); 3: device memory (#19)
    platform = "cuda"
    run_per_file = True

    def detect(self, probe: Probe) -> bool:
        return probe.head.startswith(SQLITE_MAGIC) and nsys_tables(probe.path) is not None

    def parse(self, ctx: ParseContext) -> ParseResult:
        try:
            src = open_readonly(ctx.path)
            ex = Export(src)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise BadInputError(ctx.display, f"cannot open as SQLite: {one_line(exc)}") from None
        try:
            plan = self._plan(ex)
            unreadable = _drop_unreadable(plan, ex)
            if not any(t in plan for t in GPU_KEYS):
                raise BadInputError(ctx.display, _unusable_reason(ex, unreadable))
            if empty := _no_gpu_rows(ex, plan):
                raise BadInputError(ctx.display, empty)
            result = ParseResult()
            add_partial(result, f"partial: {'; '.join(unreadable)}: not read" if unreadable else None)
            stager = Stager(ctx.path, ex, ctx, list(plan.values()))
            try:
                self._load(ex, ctx, result, {k: t for k, (t, _, _) in plan.items()}, stager)
            finally:
                stager.close()
                with contextlib.suppress(duckdb.Error):
                    for t in ("_ns_str", "_ns_proc"):
                        q(ctx.con, f"DROP TABLE IF EXISTS {t}")
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a damaged file fails on its first page read
            raise BadInputError(ctx.display, f"cannot read as SQLite: {one_line(exc)}") from None
        finally:
            src.close()
        return result

    @staticmethod
    def _plan(ex: Export) -> dict[str, tuple[str, Cols, str]]:
        """What to copy, in the order it is used: key -> (table, columns, row filter)."""
        event = ex.first("CUPTI_ACTIVITY_KIND_CUDA_EVENT")
        types = ", ".join(str(t) for t in (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE))
        wanted = {
            "strings": (ex.first("StringIds"), {"id": ("id", "BIGINT"), "value": ("value", "VARCHAR")}, ""),
            "kernels": (ex.kernel_table(), ACTIVITY | KERNEL, ""),
            "memcpy": (ex.first("CUPTI_ACTIVITY_KIND_MEMCPY"), ACTIVITY | COPY, ""),
            "memset": (ex.first("CUPTI_ACTIVITY_KIND_MEMSET"), ACTIVITY | MEMSET, ""),
            "sync": (ex.first("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"), ACTIVITY | SYNC, ""),
            "event": (event if ex.has(event, "timestamp") else None, EVENT, ""),  # timestamped from nsys 2025
            "runtime": (ex.first("CUPTI_ACTIVITY_KIND_RUNTIME"), RUNTIME, ""),
            "nvtx": (ex.first("NVTX_EVENTS"), NVTX, f"eventType IN ({types})"),
        } | _nsys_memory.plan(ex)
        return {k: v for k, v in wanted.items() if v[0]}  # type: ignore[misc]

    def _load(
        self, ex: Export, ctx: ParseContext, result: ParseResult, tables: dict[str, str], st: Stager
    ) -> None:
        off, note = ex.offset_ns()
        result.notes.extend([note] if note else [])
        if "kernels" not in tables:
            result.notes.append("no CUDA kernels captured (the export has no kernel table)")
        q(ctx.con, f"CREATE OR REPLACE TEMP TABLE _ns_str AS SELECT * FROM {st.load(tables['strings'])}")
        dev = {k: st.load(tables[k]) for k in ("kernels", "memcpy", "memset") if k in tables}
        devices = _device_time(ctx, [dev["kernels"]] if "kernels" in dev else list(dev.values()))
        ins = _Insert(ctx, result, off, multi_device=len(devices) > 1)
        if "kernels" in dev:  # names and kinds resolved once per distinct (demangled, short, mangled) ids
            ins.device(
                f"""WITH ids AS (SELECT DISTINCT d, s, coalesce(m, -1) AS m FROM {dev["kernels"]}),
                     nm AS (SELECT ids.*, {NAME_SQL} AS name FROM ids LEFT JOIN _ns_str d ON d.id = ids.d
                            LEFT JOIN _ns_str s ON s.id = ids.s LEFT JOIN _ns_str m ON m.id = ids.m)
                SELECT CASE WHEN {_NCCL.format("nm.name")} THEN 'COMMUNICATION' ELSE 'CUDA_KERNEL' END,
                       'CUDA_KERNEL', nm.name, x.start, x."end" - x.start, x.corr, NULL, NULL, x.stream, x.device
                FROM {dev["kernels"]} x JOIN nm ON nm.d = x.d AND nm.s = x.s AND nm.m = coalesce(x.m, -1)"""
            )
        if "memcpy" in dev:
            codes = {
                k: _short_kind(v) for k, v in ex.enum("ENUM_CUDA_MEMCPY_OPER", "name").items()
            } | MEMCPY_KINDS
            labels = ex.enum("ENUM_CUDA_MEMCPY_OPER", "label") | MEMCPY_LABELS
            code, label = _case("x.kind", codes, "'Unknown'"), _case("x.kind", labels, "'Unknown'")
            ins.device(
                f"""SELECT 'MEMCPY', 'CUDA_MEMCPY_' || {code}, '[CUDA memcpy ' || {label} || ']', x.start,
                           x."end" - x.start, x.corr, x.bytes, {code}, x.stream, x.device
                FROM {dev["memcpy"]} x"""
            )
        if "memset" in dev:
            ins.device(
                f"""SELECT 'MEMCPY', 'CUDA_MEMSET', '[CUDA memset]', x.start, x."end" - x.start, x.corr,
                           x.bytes, NULL, x.stream, x.device
                FROM {dev["memset"]} x"""
            )
        if "sync" in tables:
            kinds = _case("x.kind", ex.enum("ENUM_CUPTI_SYNC_TYPE", "label") | SYNC_TYPES, "'Sync'")
            ins.device(
                f"""SELECT 'SYNC', 'CUDA_SYNC', {kinds}, x.start, x."end" - x.start, x.corr, NULL, NULL,
                           nullif(x.stream, {NO_STREAM}), x.device
                FROM {st.load(tables["sync"])} x"""
            )
        if "event" in tables:
            ins.device(
                f"""SELECT 'SYNC', 'CUDA_EVENT', 'CUDA event record', x.ts, 0, x.corr, NULL, NULL,
                           nullif(x.stream, {NO_STREAM}), x.device
                FROM {st.load(tables["event"])} x WHERE x.ts IS NOT NULL"""
            )
        self._host(ex, ctx, ins, tables, st)
        # after the runtime rows: the allocations take the names of the API calls that made them
        _nsys_memory.load(ctx, result, ex, tables, st, off)
        self._run_info(ex, ctx, devices)

    def _host(self, ex: Export, ctx: ParseContext, ins: _Insert, tables: dict[str, str], st: Stager) -> None:
        q(ctx.con, "CREATE OR REPLACE TEMP TABLE _ns_proc (pid BIGINT, name VARCHAR)")
        if ex.has("PROCESSES", "pid") and ex.has("PROCESSES", "name"):
            procs = ex.rows("SELECT pid, max(name) FROM PROCESSES WHERE pid IS NOT NULL GROUP BY pid")
            if procs:
                ctx.con.executemany("INSERT INTO _ns_proc VALUES (?, ?)", procs)
        if "runtime" in tables:
            classes = ex.enum("ENUM_NSYS_EVENT_CLASS", "name") or {0: "CUDA_RUNTIME", 1: "CUDA_DRIVER"}
            cuda = {
                k: "cuda_driver" if "DRIVER" in v else "cuda_runtime"
                for k, v in classes.items()
                if "CUDA_" in v
            }
            temp = st.load(tables["runtime"])
            ins.host(  # API names (a few hundred) resolved once, '_v7000' version suffixes dropped as nsys stats does
                f"""WITH nm AS (SELECT ids.name AS id, regexp_replace(s.value, '_v\\d+$', '') AS value
                            FROM (SELECT DISTINCT name FROM {temp}) ids LEFT JOIN _ns_str s ON s.id = ids.name)
                SELECT x.gtid, {_case("x.cls", cuda, "'cuda_api'")}, nm.value, x.start, x."end" - x.start, x.corr, NULL
                FROM {temp} x LEFT JOIN nm ON nm.id = x.name"""
            )
        if "nvtx" in tables:
            temp = st.load(tables["nvtx"])
            ins.host(
                f"""WITH dom AS (SELECT domain, any_value(nullif(text, '')) AS name FROM {temp}
                                 WHERE type = {NVTX_DOMAIN_CREATE} GROUP BY domain)
                SELECT x.gtid, 'nvtx', coalesce(nullif(x.text, ''), s.value), x.start,
                       coalesce(x."end" - x.start, 0), NULL, dom.name
                FROM {temp} x LEFT JOIN _ns_str s ON s.id = x.text_id
                     LEFT JOIN dom ON dom.domain = x.domain AND x.domain <> 0
                WHERE x.type <> {NVTX_DOMAIN_CREATE}"""
            )

    def _run_info(self, ex: Export, ctx: ParseContext, devices: dict[int, int]) -> None:
        table, key = (
            ("TARGET_INFO_GPU", "id")
            if ex.has("TARGET_INFO_GPU", "id")
            else ("TARGET_INFO_CUDA_GPU", "deviceId")
        )
        names = dict(ex.rows(f"SELECT {key}, name FROM {table}")) if ex.has(table, "name") else {}
        device = max(devices, key=lambda d: (devices[d], -d)) if devices else None
        name = names.get(device) if device is not None else (names[min(names)] if names else None)
        env: dict[str, str] = {}
        if ex.has("TARGET_INFO_SYSTEM_ENV", "value"):
            env = dict(ex.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name LIKE '%Version'"))
        versions = {
            "nsys": ex.meta.get("EXPORT_PRODUCT_VERSION"),
            "nsys_export_schema": ex.meta.get("EXPORT_SCHEMA_VERSION") or (None if ex.meta else "legacy"),
            "cuda_driver": env.get("CudaDriverVersion"),
            "nvidia_driver": env.get("NvDriverVersion"),
        }
        versions = {k: v for k, v in versions.items() if v}
        ctx.store.update_run(
            ctx.run_id, device_name=name, device=device, versions=json.dumps(versions) if versions else None
        )


def _device_time(ctx: ParseContext, temps: list[str]) -> dict[int, int]:
    """Device id -> busy ns summed over the staged tables (the run's device is the busiest)."""
    out: dict[int, int] = {}
    for temp in temps:
        for dev, dur in q(
            ctx.con, f'SELECT device, sum("end" - start) FROM {temp} WHERE device IS NOT NULL GROUP BY 1'
        ):
            out[int(dev)] = out.get(int(dev), 0) + int(dur or 0)
    return out


def _short_kind(enum_name: str) -> str:
    """'CUDA_MEMCPY_KIND_HTOD' -> 'HtoD', 'CUDA_MEMCPY_KIND_UVM_DTOH' -> 'UVM_DtoH'."""
    name = enum_name.removeprefix("CUDA_MEMCPY_KIND_")
    return re.sub(r"([A-Z])TO([A-Z])$", lambda m: f"{m[1]}to{m[2]}", name)


def _drop_unreadable(plan: dict[str, tuple[str, Cols, str]], ex: Export) -> list[str]:
    """Take out of ``plan`` the GPU tables without a start and an end column (garbled or not nsys's); what
    was taken out, in words (``table X lacks column(s) start, end``)."""
    dropped = []
    for key in GPU_KEYS:
        if key not in plan:
            continue
        table = plan[key][0]
        lacking = [c for c in ("start", "end") if not ex.has(table, c)]
        if lacking:
            del plan[key]
            dropped.append(f"table {table} lacks column(s) {', '.join(lacking)}")
    return dropped


def _unusable_reason(ex: Export, unreadable: list[str]) -> str:
    """Why an export with no GPU table left to read is refused."""
    if unreadable:  # (an export without CUPTI tables at all is a real one with CUDA tracing off: see below)
        return (
            f"not an Nsight Systems export: {'; '.join(unreadable)} (its GPU activity tables are not nsys's)"
        )
    return _no_gpu_reason(ex)


def _no_gpu_rows(ex: Export, plan: dict[str, tuple[str, Cols, str]]) -> str | None:
    """The failure when the GPU tables are there but hold no row (a capture that recorded no GPU work, or a
    blank export); stored, it would be a run of nothing marked ok."""
    names = [plan[k][0] for k in GPU_KEYS if k in plan]
    if any(ex.rows(f'SELECT EXISTS (SELECT 1 FROM "{t}")')[0][0] for t in names):
        return None
    return (
        f"no GPU activity captured: {', '.join(names)} hold(s) no rows — the capture stopped before the GPU "
        "work or the export is blank; profile again with `nsys profile --trace=cuda,nvtx …`"
    )


def _no_gpu_reason(ex: Export) -> str:
    calls: list[tuple] = []
    if ex.has("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"):
        calls = ex.rows(
            "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "GROUP BY 1 ORDER BY 2 DESC, 1"
        )
    total = sum(n for _, n in calls)
    what = (
        f"only {total} CUDA API call(s): {', '.join(c for c, _ in calls[:3])}{' …' if len(calls) > 3 else ''}"
        if calls
        else "no CUDA activity at all"
    )
    return (
        f"no GPU activity captured (no kernel, memcpy or memset table; {what}): the capture stopped before the "
        "GPU work or CUDA tracing was off — profile again with `nsys profile --trace=cuda,nvtx …`"
    )


PARSER = NsysSqliteParser()
