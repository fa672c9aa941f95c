"""``diag report``: the incident postmortem of a run, a job (every rank) or (neither) the latest incident episode of
the logs (``--episode N``: another), as Markdown, HTML or JSON.

Notes saved on the app's Postmortem page (title, summary, owner, follow-ups) are part of the report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from diag.analyses.postmortem import build_postmortem
from diag.analyses.postmortem_model import Postmortem
from diag.commands._common import DEFAULT, DbOption, wrote
from diag.errors import DiagError
from diag.i18n import LANGUAGES, set_language, t
from diag.report import render
from diag.store import Store


def report(
    db: DbOption = DEFAULT,
    run: Annotated[
        int | None, typer.Option("--run", help="Run id (default: the latest incident episode of the logs).")
    ] = None,
    job: Annotated[
        int | None, typer.Option("--job", help="Job id: every rank of a multi-rank capture.")
    ] = None,
    episode: Annotated[
        int | None, typer.Option("--episode", help="This log episode (see diag logs) instead of the latest.")
    ] = None,
    baseline: Annotated[int | None, typer.Option("--baseline", help="CUDA baseline run id.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="md | html | json")] = "md",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here (default: stdout).")
    ] = None,
    lang: Annotated[
        str | None, typer.Option("--lang", help="zh | en: the report's headings and fixed phrases (#24).")
    ] = None,
) -> None:
    """Incident postmortem: what happened, impact, root cause with evidence, contributing factors, actions."""
    if fmt not in ("md", "html", "json"):
        raise DiagError(f"--format must be md, html or json, not {fmt!r}")
    if lang is not None:  # else the global --lang / $DIAG_LANG / the locale (diag.i18n)
        if lang not in LANGUAGES:
            raise DiagError(t("cli.bad_lang", value=lang))
        set_language(lang)
    if run is not None and job is not None:
        raise DiagError("give --run or --job, not both")
    if episode is not None and (run is not None or job is not None):
        raise DiagError("--episode is for the logs of no run; not with --run or --job")
    if baseline is not None and run is None and job is None:
        raise DiagError("--baseline needs --run or --job")
    with Store(db, read_only=True) as store:
        try:
            pm = build_postmortem(store, run, baseline, job_id=job, episode=episode)
        except ValueError as exc:
            raise DiagError(str(exc)) from None
    text = render(pm, fmt)
    if output is None:
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise DiagError(f"{output}: cannot write the report ({exc.strerror or exc})") from None
        wrote(output, len(text.encode("utf-8")), f"{FORMAT_NAMES[fmt]}, {_sections(pm)}")


FORMAT_NAMES = {"md": "Markdown", "html": "HTML", "json": "JSON"}


def _sections(pm: Postmortem) -> str:
    """How many of the postmortem's five sections hold something: ``4 of 5 sections``."""
    filled = [pm.what_happened, pm.impact, pm.root_cause, pm.contributing, pm.actions]
    return t("report.sections_filled", n=sum(1 for x in filled if x), total=len(filled))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
