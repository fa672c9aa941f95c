"""``diag env``: are the run's versions a published pairing, and which settings cost time (issue #21)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from diag.analyses.env_check import environment_check
from diag.analyses.version_matrix import LABELS
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, table
from diag.i18n import t
from diag.store import Store

RunOption = Annotated[int | None, typer.Option("--run", help="Run id (default: the database's only run).")]
JobOption = Annotated[int | None, typer.Option("--job", help="Job id: every rank of a multi-rank job.")]
STATUS_STYLE = {"mismatched": "red", "bad": "red", "advice": "yellow", "unknown": "yellow"}


def env(
    db: DbOption = DEFAULT, run: RunOption = None, job: JobOption = None, as_json: JsonOption = False
) -> None:
    """Versions (CANN, torch_npu, PyTorch, Python, vLLM-Ascend, vLLM, MindIE, driver) checked against the published
    pairings, and environment variables checked for settings that cost time; the answer first."""
    if run is not None and job is not None:
        raise typer.BadParameter("give --run or --job, not both", param_hint="'--run' / '--job'")
    with Store(db, read_only=True) as store:
        result = environment_check(store, run, job)
    if as_json:
        print_json(result)
        return
    out = console()
    out.print(escape(result["answer"]))
    if result["versions"]:
        out.print(_versions_table(result["versions"], result))
    if result["settings"]:
        out.print(_settings_table(result["settings"]))
    else:
        out.print(t("cli.no_env_settings"))


def _status(text: str) -> str:
    style = STATUS_STYLE.get(text)
    return f"[{style}]{escape(text)}[/]" if style else escape(text)


def _versions_table(rows: list[dict[str, Any]], result: dict[str, Any]) -> Any:  # noqa: ANN401 - a rich Table
    where = (
        t("cli_rest.env.job", job=result["job_id"])
        if result["job_id"] is not None
        else t("cli_rest.env.run", run=cell(result["run_id"]))
    )
    tbl = table(
        "component",
        "version",
        "from",
        "check",
        "pairs with",
        title=escape(t("cli_rest.env.versions", where=where)),
    )
    for r in rows:
        tbl.add_row(
            cell(LABELS.get(r["component"], r["component"])),
            cell(r["version"]),
            cell(r["from"]),
            _status(r["status"]),
            cell(r["expected"]),
        )
    return tbl


def _settings_table(rows: list[dict[str, Any]]) -> Any:  # noqa: ANN401 - a rich Table
    tbl = table("variable", "value", "from", "check", "what it costs", "what to set", title="settings")
    for r in rows:
        tbl.add_row(
            cell(r["name"]),
            cell(r["value"] or "(unset)"),
            cell(r["from"]),
            _status(r["status"]),
            cell(r["cost"]),
            cell(r["advice"]),
        )
    return tbl


def register(app: typer.Typer) -> None:
    app.command("env")(env)
