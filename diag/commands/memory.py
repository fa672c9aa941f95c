"""``diag memory``: peak memory, headroom, allocator slack, top allocators, OOMs and the KV budget of a run."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from diag.analyses import memory_logs
from diag.analyses.memory import memory_summary, runs_with_memory
from diag.analyses.memory_findings import size_text
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import MISSING, cell, escape, fmt_count, fmt_ns, fmt_pct, path_tails, table
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store

RunOption = Annotated[
    int | None, typer.Option("--run", help="Run id (default: the last run with memory data).")
]
LogOption = Annotated[
    str | None,
    typer.Option("--log", help="An ingested log file: its OOM and KV-cache figures (path as ingested)."),
]
# the command's own sentences are in diag/i18n/{en,zh}.toml [cli.memory]: the reader's language; --json keeps keys


class MemoryUsageError(DiagError):
    """``--run`` names no run, or ``--log`` no ingested log: a usage error (exit 2), said in one line."""

    exit_code = 2


def memory(
    db: DbOption = DEFAULT, run: RunOption = None, log: LogOption = None, as_json: JsonOption = False
) -> None:
    """Peak allocated / reserved memory (when, which step, which op), headroom vs the device's capacity, allocator
    slack, top allocators, memory outside the framework, and the OOMs / KV-cache budget of the logs."""
    with Store(db, read_only=True) as store:
        if (
            run is not None
            and not store.cursor().execute("SELECT 1 FROM runs WHERE run_id = ?", [run]).fetchall()
        ):
            raise MemoryUsageError(f"no run {run} in {db} (see `diag runs`)")
        if log is not None:
            try:
                memory_logs.file_ids(store, log)
            except ValueError as exc:
                raise MemoryUsageError(f"{exc} (see `diag logs`)") from None
        summary = memory_summary(store, run, log)
        source = _run_source(store, summary["run_id"])
        others = len(runs_with_memory(store)) - 1 if run is None and log is None else 0
    if as_json:
        print_json(summary)
        return
    out = console()
    has_memory = summary["peak_reserved_bytes"] is not None or summary["top_allocators"]
    static = summary["static_graph"]
    if not (has_memory or static or summary["oom"] or summary["kv_cache"] or summary["log_settings"]):
        where = (
            t("cli.memory.where_run", run=summary["run_id"])
            if summary["run_id"] is not None
            else t("cli.memory.where_db")
        )
        out.print(escape(t("cli.memory.none", where=where)))
        return
    if summary["run_id"] is not None:
        more = t("cli.memory.last_of", n=others + 1) if others > 0 else ""
        out.print(f"{t('cli.run', run=summary['run_id'])} · {escape(source or MISSING)}{more}")
    if has_memory:
        out.print(escape(headline(summary)))
        for line in detail_lines(summary):
            out.print(escape(line))
    if static:
        out.print(escape(static_graph_line(static)))
    if has_memory:
        _print_tables(out, summary)
    _print_logs(out, summary)
    _print_findings(out, summary)


def _run_source(store: Store, run_id: int | None) -> str | None:
    if run_id is None:
        return None
    rows = store.cursor().execute("SELECT source FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return rows[0][0] if rows else None


def headline(s: dict[str, Any]) -> str:
    """The answer first: Peak reserved 57.6 GiB of 64.0 GiB (90.0%) at 1,234.5 ms, step 3, during MatMulV2 — …"""
    peak = s["peak_reserved_bytes"]
    if peak is None:
        return t("cli.memory.no_reserved")
    text = t("cli.memory.peak", size=size_text(peak))
    if s["capacity_bytes"]:
        text += t(
            "cli.memory.of_capacity", capacity=size_text(s["capacity_bytes"]), pct=fmt_pct(s["capacity_pct"])
        )
    if s["peak_ts_ms"] is not None:
        text += t("cli.memory.at_ms", ms=f"{s['peak_ts_ms']:,.1f}")
    if s["peak_step"] is not None:
        text += t("cli.memory.at_step", step=s["peak_step"])
    if s["peak_op"]:
        text += t("cli.memory.during", op=s["peak_op"])
    if s["headroom_pct"] is not None:
        return text + t("cli.memory.headroom", pct=fmt_pct(s["headroom_pct"]), source=_capacity_word(s))
    return text + t("cli.memory.headroom_unknown")


def _capacity_word(s: dict[str, Any]) -> str:
    name = f": {s['device_name']}" if s.get("device_name") else ""
    words = {"device_table": t("cli.memory.from_device_table") + name, "log": t("cli.memory.from_oom")}
    return words.get(s["capacity_from"], MISSING)


def detail_lines(s: dict[str, Any]) -> list[str]:
    lines = [
        t(
            "cli.memory.series",
            reserved=s["reserved_series"] or MISSING,
            allocator=s["allocator_series"] or MISSING,
        )
    ]
    if s["peak_allocated_bytes"] is not None:
        lines.append(
            t(
                "cli.memory.allocated",
                allocated=size_text(s["peak_allocated_bytes"]),
                slack=size_text(s["slack_at_peak_bytes"]),
                pct=fmt_pct(s["slack_at_peak_pct"]),
                most=size_text(s["slack_peak_bytes"]),
            )
        )
    if s["non_app_bytes"] is not None:
        parts = ", ".join(
            f"{m['module']} {size_text(m['peak_reserved_bytes'])}" for m in s["non_app_modules"][:5]
        )
        lines.append(t("cli.memory.outside", size=size_text(s["non_app_bytes"]), parts=parts))
    churn = s["churn"]
    if churn:
        lines.append(
            t(
                "cli.memory.churn",
                allocs=fmt_count(churn["allocs_per_step"], 1),
                frees=fmt_count(churn["frees_per_step"], 1),
                steps=len(churn["per_step"]),
            )
        )
    return lines


def static_graph_line(g: dict[str, Any]) -> str:
    """Static graph memory (graph mode): 1.4 GiB over 6 ops (largest: model.layers.0.mlp/MatMulV2 1.0 GiB)."""
    largest = g["ops"][0] if g["ops"] else None
    biggest = f"{largest['name']} {size_text(largest['bytes'])}" if largest else MISSING
    return t(
        "cli.memory.static", size=size_text(g["total_bytes"]), ops=fmt_count(g["op_count"]), largest=biggest
    )


def _print_tables(out: Console, s: dict[str, Any]) -> None:
    if s["components"]:
        tbl = table("source", "component", "peak reserved", "peak allocated", "samples", title="components")
        for c in s["components"]:
            tbl.add_row(
                cell(c["source"]),
                cell(c["component"]),
                size_text(c["peak_reserved_bytes"]),
                size_text(c["peak_allocated_bytes"]),
                fmt_count(c["samples"]),
            )
        out.print(tbl)
    if s["top_allocators"]:
        tbl = table(
            "operator",
            "bytes",
            "held",
            "allocations",
            title="top allocators (bytes × time held; held = sum over allocations)",
        )
        for a in s["top_allocators"]:
            tbl.add_row(cell(a["name"]), size_text(a["bytes"]), fmt_ns(a["held_ns"]), fmt_count(a["count"]))
        out.print(tbl)
    if s["peak_allocators"]:
        tbl = table("operator", "live bytes", "share", "allocations", title="live at the peak (op_memory)")
        for a in s["peak_allocators"]:
            tbl.add_row(
                cell(a["name"]), size_text(a["bytes"]), fmt_pct(a["share_pct"]), fmt_count(a["count"])
            )
        out.print(tbl)


def oom_line(s: dict[str, Any]) -> str:
    """The answer when there is no profile: 1 OOM in the logs: out_of_memory (asked for 72.0 MiB of 61.3 GiB)."""
    parts = []
    for o in s["oom"]:
        asked = (
            t("cli.memory.asked", size=size_text(o.get("requested_bytes")))
            if o.get("requested_bytes")
            else ""
        )
        of = (
            t("cli.memory.of", size=size_text(o["capacity_bytes"]))
            if asked and o.get("capacity_bytes")
            else ""
        )
        parts.append(f"{o.get('verdict') or 'unknown'}" + (f" ({asked}{of})" if asked else ""))
    key = "cli.memory.ooms_one" if len(parts) == 1 else "cli.memory.ooms"
    return t(key, n=len(parts), list=", ".join(parts))


def _print_logs(out: Console, s: dict[str, Any]) -> None:
    if s["oom"]:
        out.print(escape(oom_line(s)))
        tbl = table("verdict", "requested", "capacity", "allocated", "reserved", "free", "where", title="OOM")
        tails = path_tails(o.get("file") for o in s["oom"])
        for o in s["oom"]:
            where = f"{tails.get(o.get('file') or '', MISSING)}:{o.get('line') or MISSING}"
            tbl.add_row(
                cell(o.get("verdict")),
                *(size_text(o.get(k)) for k in ("requested_bytes", "capacity_bytes", "allocated_bytes")),
                *(size_text(o.get(k)) for k in ("reserved_bytes", "free_bytes")),
                cell(where),
            )
        out.print(tbl)
    if s["log_settings"]:
        tbl = table("setting", "value", "where", title="memory settings the logs state")
        tails = path_tails(x.get("file") for x in s["log_settings"])
        for x in s["log_settings"]:
            where = f"{tails.get(x.get('file') or '', MISSING)}:{x.get('line') or MISSING}"
            tbl.add_row(cell(x["setting"]), cell(x["value"]), cell(where))
        out.print(tbl)
    kv = s["kv_cache"]
    if kv:
        tbl = table("figure", "value", title="KV-cache budget (start-up memory profiling)")
        for key, value in kv.items():
            shown = size_text(value) if key.endswith("_bytes") else cell(value)
            tbl.add_row(cell(key.removesuffix("_bytes").replace("_", " ")), shown)
        out.print(tbl)


def _print_findings(out: Console, s: dict[str, Any]) -> None:
    if not s["findings"]:
        return
    tbl = table("severity", "finding", "owner", "suggestion", title="memory findings", show_lines=True)
    for f in s["findings"]:
        tbl.add_row(
            cell(f["severity"]), cell(f["title"]), cell(f["evidence"].get("owner")), cell(f["suggestion"])
        )
    out.print(tbl)


def register(app: typer.Typer) -> None:
    app.command("memory")(memory)
