"""Nsight Systems SQLite export (``nsys export --type sqlite``; also the .sqlite ``nsys stats`` writes).

Read offline through ``parsers._sqlite_export`` (SQLite formats each table as CSV in batches on a worker thread;
DuckDB reads it in one scan). Names are ids into ``StringIds``, resolved inside DuckDB once per distinct id.
Tables are looked up by name and columns by existence, so every schema generation from ≈2021 (no export metadata)
to 2026.1 reads; a table an export lacks (lazy export, failed capture) is simply empty, and an export with no GPU
table at all is refused with the reason. Times are session-relative ns, made epoch ns with
``TARGET_INFO_SESSION_START_TIME`` unless the export was normalised (``--ts-normalize``), minus any
``--ts-shift``. Device memory (``--cuda-memory-usage=true``) → memory and op_memory (``parsers._nsys_memory``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from pathlib import Path

import duckdb

from diag.errors import BadInputError
from diag.store import q, sql_literal
from parsers import _nsys_memory
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import add_partial, one_line
from parsers._sqlite_export import SQLITE_MAGIC, Cols, Export, Stager, open_readonly

NO_STREAM = 4294967295  # CUPTI's "no stream": a context-wide synchronisation
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
