"""``diag accept``: serving runs judged on TTFT, TPOT, throughput, failed requests and memory; CUDA vs Ascend."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from diag.analyses.serving import accept, load_thresholds
from diag.analyses.serving_compare import compare_serving
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_num, fmt_pct, table
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store

VERDICT = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "n/a": "[dim]n/a[/]"}
VERDICT_PADDED = {
    k: v.replace("[/]", " " * (5 - len(k)) + "[/]") for k, v in VERDICT.items()
}  # aligned words


def accept_cmd(
    db: DbOption = DEFAULT,
    serving: Annotated[
        list[int] | None, typer.Option("--serving", help="Serving run id (repeatable; default: all).")
    ] = None,
    thresholds: Annotated[
        str | None,
        typer.Option("--thresholds", help="Thresholds file (default: diag/rules/serving_thresholds.toml)."),
    ] = None,
    ttft_ms: Annotated[
        float | None, typer.Option("--ttft-ms", help="TTFT limit, ms (overrides the file).")
    ] = None,
    tpot_ms: Annotated[
        float | None, typer.Option("--tpot-ms", help="TPOT limit, ms (overrides the file).")
    ] = None,
    profile: Annotated[
        int | None,
        typer.Option("--profile", help="Profile run of the deployment (memory), instead of by folder."),
    ] = None,
    compare: Annotated[
        tuple[int, int] | None,
        typer.Option("--compare", help="Two serving ids A B: A against B side by side."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any judged run fails.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Serving acceptance: pass / fail with margins per figure, from the thresholds file."""
    try:
        rules = load_thresholds(thresholds)
    except (OSError, ValueError) as exc:
        raise DiagError(f"{thresholds}: cannot read thresholds ({exc})") from exc
    with Store(db, read_only=True) as store:
        rows = accept(store, rules, serving, profile, ttft_ms, tpot_ms)
        missing = sorted(set(serving or []) - {r["serving_id"] for r in rows})
        if missing:
            raise DiagError(f"no serving run {missing[0]} in {store.path}")
        try:
            comparison = compare_serving(store, compare[0], compare[1], rules) if compare else None
        except KeyError as exc:
            raise DiagError(f"{exc.args[0]} in {store.path}") from exc
    if as_json:
        print_json({"db": db, "thresholds": rules["_path"], "serving": rows, "comparison": comparison})
    else:
        _print(rows, comparison, rules["_path"])
    if strict and any(r["verdict"] == "fail" for r in rows):
        raise typer.Exit(1)


def _print(rows: list[dict[str, Any]], comparison: dict[str, Any] | None, path: str) -> None:
    out = console()
    if not rows:
        out.print(t("cli.no_serving_run"))
        return
    tbl = table(
        "id",
        "run",
        "platform · hardware",
        "load",
        "TTFT p99",
        "TPOT p99",
        "out tok/s",
        "verdict",
        title=escape(f"serving acceptance ({path})"),
    )
    for r in rows:
        tbl.add_row(
            cell(r["serving_id"]),
            cell(r["label"]) + (" [yellow](partial)[/]" if r.get("partial") else ""),
            f"{cell(r['platform'])} · {cell(r['hardware'])}",
            fmt_num(r["load"]),
            fmt_num(r["ttft_p99_ms"], "ms"),
            fmt_num(r["tpot_p99_ms"], "ms"),
            fmt_num(r["output_throughput_tps"]),
            VERDICT[r["verdict"]],
        )
    out.print(tbl)
    for r in rows:
        out.print(f"[bold]{r['serving_id']}[/] {cell(r['label'])}: {VERDICT[r['verdict']]}")
        if r.get("partial"):  # verdicts are on the figures the block holds
            out.print(f"  [yellow]{t('cli_rest.accept.partial')}[/] {escape(r['partial'])}", soft_wrap=True)
        for c in r["checks"]:
            margin = (
                ""
                if c["margin"] is None
                else t("cli_rest.accept.margin", margin=fmt_num(c["margin"], c["unit"]))
            )
            versus = t("cli_rest.accept.versus")
            out.print(
                f"  {escape(str(c['figure'])):<16} {VERDICT_PADDED[c['verdict']]} {fmt_num(c['value'], c['unit'])}{versus}"
                f"{fmt_num(c['threshold'] or None, c['unit'])}{margin}  {escape(c.get('detail') or '')}"
            )
    if comparison:
        cmp = table(
            "figure",
            "A",
            "B",
            "A/B",
            "gap",
            title=escape(f"A = {comparison['a']['label']}, B = {comparison['b']['label']}"),
        )
        for f in comparison["figures"]:
            gap = fmt_pct(f["gap_pct"], signed=True)
            cmp.add_row(
                cell(f["figure"]),
                fmt_num(f["a"]),
                fmt_num(f["b"]),
                fmt_num(f["ratio"]),
                f"[red]{gap}[/]" if f["worse"] else gap,
            )
        out.print(cmp)
        for line in comparison["headline"]:
            out.print(f"  {escape(line)}")
        for w in comparison["warnings"]:
            out.print(f"  [yellow]warning:[/] {escape(w)}")


def register(app: typer.Typer) -> None:
    app.command("accept")(accept_cmd)
