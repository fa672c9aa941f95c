"""``diag bugreport``: what a vendor issue needs about one run (diag.analyses.bugreport), as Markdown or JSON.

Paths are cut to their shortest unambiguous tail; host names, IPs and user names are dropped unless
``--include-hosts``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from diag.analyses.bugreport import bug_report
from diag.commands._common import DEFAULT, DbOption, wrote
from diag.commands._format import MISSING
from diag.errors import DiagError
from diag.report_blocks import md_escape, md_fence
from diag.store import Store

SECTIONS = ("Versions", "Device", "Root cause", "Error codes", "Failing op", "Evidence", "Environment",
            "Reproduction")  # fmt: skip


class UsageError(DiagError):
    exit_code = 2


def _value(v: Any) -> str:  # noqa: ANN401
    return MISSING if v in (None, "") else md_escape(v)


def _pairs(d: dict[str, Any]) -> list[str]:
    return [f"- {md_escape(k)}: {_value(v)}" for k, v in d.items()] or ["_Not recorded._"]


def _op_lines(op: dict[str, Any] | None) -> list[str]:
    if not op or not op.get("name"):
        return [f"_{md_escape((op or {}).get('note') or 'No log root cause.')}_"]
    out = [
        f"- op: {md_escape(op['name'])} (op type {md_escape(op['op_type'])}, named by {md_escape(op['named_by'])})"
    ]
    if op.get("error_str"):
        out.append(f"- errorStr: {md_escape(op['error_str'])}")
    if op["note"]:
        out.append(f"- {md_escape(op['note'])}")
    if op["kernel_rows"]:
        out += ["", "| input shapes | input dtypes | input formats | output shapes | output dtypes | op state | "
                "block dim | kernels |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for k in op["kernel_rows"]:
            cells = [k["input_shapes"], k["input_dtypes"], k["input_formats"], k["output_shapes"],
                     k["output_dtypes"], k["op_state"], k["block_dim"], k["count"]]  # fmt: skip
            out.append("| " + " | ".join(_value(c) for c in cells) + " |")
    return out


def _code_line(c: dict[str, Any]) -> str:
    if not c["meaning"]:
        return f"- {md_escape(c['code'])}: not in diag's catalog"
    name = f" {md_escape(c['name'])}" if c["name"] else ""
    return f"- {md_escape(c['code'])}{name} ({_value(c['component'])}): {md_escape(c['meaning'])}"


def to_markdown(r: dict[str, Any]) -> str:
    rc = r["root_cause"]
    out = [f"# Bug report: run {r['run_id']}", ""]
    if r["redacted"]:
        out += ["_Paths shortened; host names, IP addresses and user names removed._", ""]
    body: dict[str, list[str]] = {
        "Versions": _pairs(r["versions"]),
        "Device": _pairs(r["device"]),
        "Root cause": ["_No error in the run's logs._"] if rc is None else [
            f"**{md_escape(rc['title'])}** ({md_escape(rc['category'])}, {md_escape(rc['severity'])})", "",
            md_escape(rc["explanation"]), "", f"Owner: {_value(rc['owner'])} — {md_escape(rc['owner_reason'])}"],
        "Error codes": [_code_line(c) for c in r["error_codes"]]
        or ["_No error code._"],
        "Failing op": _op_lines(r["failing_op"]),
        "Evidence": [md_fence("\n".join(f"{e['where']}: {e['text']}" for e in r["evidence"]))]
        if r["evidence"] else ["_No log records._"],
        "Environment": _pairs(r["environment"]) + ([""] + _pairs(r["profiler"]) if r["profiler"] else []),
        "Reproduction": [f"- {md_escape(h)}" for h in r["reproduction"]] or ["_No hint from the data._"],
    }  # fmt: skip
    for name in SECTIONS:
        out += [f"## {name}", "", *body[name], ""]
    return "\n".join(out)


def bugreport(
    db: DbOption = DEFAULT,
    run: Annotated[int | None, typer.Option("--run", help="Run id (see diag runs).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="md | json")] = "md",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here (default: stdout).")
    ] = None,
    include_hosts: Annotated[
        bool, typer.Option("--include-hosts", help="Keep host names, IP addresses and user names.")
    ] = False,
) -> None:
    """What a vendor issue needs: versions, device, error codes, the failing op, evidence lines, environment."""
    if run is None:
        raise UsageError("--run is required (see diag runs)")
    if fmt not in ("md", "json"):
        raise UsageError(f"--format must be md or json, not {fmt!r}")
    with Store(db, read_only=True) as store:
        report = bug_report(store, run, include_hosts)
    text = (
        json.dumps(report, ensure_ascii=False, indent=2, default=str)
        if fmt == "json"
        else to_markdown(report)
    )
    if output is None:
        sys.stdout.write(text + "\n")
        return
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise DiagError(f"{output}: cannot write the bug report ({exc.strerror or exc})") from None
    wrote(output, None, "Markdown" if fmt == "md" else "JSON")


def register(app: typer.Typer) -> None:
    app.command("bugreport")(bugreport)
