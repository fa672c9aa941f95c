"""``diag accept``: serving runs judged on TTFT, TPOT, throughput, failed requests and memory; CUDA vs Ascend."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from diag.analyses.serving import accept, compare_serving, load_thresholds
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.store import Store

VERDICT = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "n/a": "[dim]n/a[/]"}


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.2f}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if unit else text


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
    table = Table(
        "id",
        "run",
        "platform · hardware",
        "load",
        "TTFT p99",
        "TPOT p99",
        "out tok/s",
        "verdict",
        title=f"serving acceptance ({path})",
    )
    for r in rows:
        table.add_row(
            str(r["serving_id"]),
            escape(r["label"]) + (" [yellow](partial)[/]" if r.get("partial") else ""),
            escape(f"{r['platform'] or '?'} · {r['hardware'] or '?'}"),
            _fmt(r["load"]),
            _fmt(r["ttft_p99_ms"], "ms"),
            _fmt(r["tpot_p99_ms"], "ms"),
            _fmt(r["output_throughput_tps"]),
            VERDICT[r["verdict"]],
        )
    out.print(table)
    for r in rows:
        out.print(f"[bold]{r['serving_id']}[/] {escape(r['label'])}: {VERDICT[r['verdict']]}")
        if r.get("partial"):  # verdicts are on the figures the block holds
            out.print(f"  [yellow]partial:[/] {escape(r['partial'])}", soft_wrap=True)
        for c in r["checks"]:
            margin = "" if c["margin"] is None else f", margin {_fmt(c['margin'], c['unit'])}"
            out.print(
                f"  {c['figure']:<16} {VERDICT[c['verdict']]:<22} {_fmt(c['value'], c['unit'])} vs "
                f"{_fmt(c['threshold'] or None, c['unit'])}{margin}  {escape(c.get('detail') or '')}"
            )
    if comparison:
        cmp = Table(
            "figure",
            "A",
            "B",
            "A/B",
            "gap",
            title=f"A = {comparison['a']['label']}, B = {comparison['b']['label']}",
        )
        for f in comparison["figures"]:
            gap = "-" if f["gap_pct"] is None else f"{f['gap_pct']:+.1f}%"
            cmp.add_row(
                f["figure"],
                _fmt(f["a"]),
                _fmt(f["b"]),
                _fmt(f["ratio"]),
                f"[red]{gap}[/]" if f["worse"] else gap,
            )
        out.print(cmp)
        for line in comparison["headline"]:
            out.print(f"  {escape(line)}")
        for w in comparison["warnings"]:
            out.print(f"  [yellow]warning:[/] {escape(w)}")


def register(app: typer.Typer) -> None:
    app.command("accept")(accept_cmd)
