"""Is this run's environment the published one, and are its settings costing time? (``diag env``, issue #21)

Versions come from the profiler (profiler_info's torch_npu_version / cann_version, version keys of the profiler
metadata or the .db's META_DATA) and from the run's logs (rules/version_lines.toml); each is checked against the
published pairings (rules/version_matrix.toml, diag.analyses.version_matrix). Environment variables come from the
profiler metadata's ENV_VARIABLES record and from log lines that print them; each is checked by
rules/env_checks.toml. A version mismatch (owner ``stack``) or a ``bad`` setting (owner ``config``) is a finding in
category ``environment``; ``advice`` settings are listed, never findings, and unknown versions are said, never
guessed.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses.finding import Finding
from diag.analyses.postmortem_env import json_value
from diag.analyses.version_matrix import COMPONENTS, LABELS, check_versions
from diag.errors import DiagError
from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules"
SUGGEST_INSTALL = "vm.suggest_install"  # the text key of a mismatch's suggestion (diag/i18n/*.rest.toml)
# which source a component is judged by: the first that states it
FROM_ORDER = ("profiler_info", "profiler metadata", "log")


@cache
def env_rules() -> dict[str, Any]:
    with open(RULES / "env_checks.toml", "rb") as fh:
        return tomllib.load(fh)


@cache
def line_rules() -> dict[str, Any]:
    with open(RULES / "version_lines.toml", "rb") as fh:
        return tomllib.load(fh)


def scope_runs(store: Store, run_id: int | None, job_id: int | None) -> list[dict[str, Any]]:
    """The runs a check covers: one run, a job's runs, or (neither given) the database's only run."""
    cur = store.cursor()
    cols = "run_id, platform, torch_npu_version, cann_version, versions, metadata"
    if job_id is not None:
        rows = cur.execute(f"SELECT {cols} FROM runs WHERE job_id = ? ORDER BY run_id", [job_id]).fetchall()
        if not rows:
            raise DiagError(f"no job {job_id} in {store.path}")
    elif run_id is not None:
        rows = cur.execute(f"SELECT {cols} FROM runs WHERE run_id = ?", [run_id]).fetchall()
        if not rows:
            raise DiagError(f"no run {run_id} in {store.path}")
    else:
        rows = cur.execute(f"SELECT {cols} FROM runs ORDER BY run_id LIMIT 2").fetchall()
        if len(rows) > 1:
            raise DiagError(tr("cli.pick_run_env"))
    names = ("run_id", "platform", "torch_npu_version", "cann_version", "versions", "metadata")
    return [dict(zip(names, r, strict=True)) for r in rows]


def _profiler_versions(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    keys = line_rules()["metadata_keys"]
    for r in runs:
        for comp, col in (("torch_npu", "torch_npu_version"), ("cann", "cann_version")):
            if r[col]:
                out.append({"component": comp, "version": str(r[col]).strip(), "from": "profiler_info"})
        meta = json_value(r["metadata"])
        versions = json_value(r["versions"]) if r["platform"] == "ascend" else None
        for record in (meta, versions):
            if not isinstance(record, dict):
                continue
            for comp, names in keys.items():
                value = next((record[n] for n in names if record.get(n) not in (None, "")), None)
                if value is not None:
                    out.append(
                        {"component": comp, "version": str(value).strip(), "from": "profiler metadata"}
                    )
    return out


def _log_where(runs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    if runs:
        return "l.run_id IN (SELECT unnest($runs))", {"runs": [r["run_id"] for r in runs]}
    return "TRUE", {}  # a database of logs only: every log


def _log_versions(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each (component, version) a log line states, with the first file:line that states it: one scan of the
    run's records with a keyword prefilter, then each pattern over the few lines that pass it."""
    where, params = _log_where(runs)
    params["pre"] = line_rules()["prefilter"]["pattern"]
    parts = []
    for i, rule in enumerate(line_rules()["line"]):
        params[f"p{i}"] = rule["pattern"]
        params[f"c{i}"] = rule["component"]
        parts.append(
            f"SELECT $c{i} AS component, regexp_extract(raw, $p{i}, 1) AS version, file_id, line_no "
            f"FROM cand WHERE regexp_matches(raw, $p{i})"
        )
    rows = (
        store.cursor()
        .execute(
            f"""WITH cand AS MATERIALIZED (SELECT l.raw, l.file_id, l.line_no FROM log_records l
                                           WHERE {where} AND regexp_matches(l.raw, $pre))
                SELECT component, version, arg_min(f.relpath || ':' || coalesce(m.line_no, 0), (m.file_id, m.line_no))
                FROM ({" UNION ALL ".join(parts)}) m JOIN files f USING (file_id)
                WHERE version <> '' GROUP BY component, version ORDER BY min((m.file_id, m.line_no))""",
            params,
        )
        .fetchall()
    )
    return [{"component": c, "version": v, "from": f"log {where_}"} for c, v, where_ in rows]


def _log_env(store: Store, runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    names = sorted({c["name"] for c in env_rules()["check"]})
    where, params = _log_where(runs)
    params["p"] = line_rules()["env_line"]["pattern"].replace("{names}", "|".join(names))
    rows = (
        store.cursor()
        .execute(
            f"""SELECT name, value, arg_min(f.relpath || ':' || coalesce(line_no, 0), (file_id, line_no)) FROM
                  (SELECT regexp_extract(l.raw, $p, 1) AS name, regexp_extract(l.raw, $p, 2) AS value, l.file_id,
                          l.line_no FROM log_records l WHERE {where} AND regexp_matches(l.raw, $p))
                JOIN files f USING (file_id) GROUP BY name, value ORDER BY name, value""",
            params,
        )
        .fetchall()
    )
    return [{"name": n, "value": v, "from": f"log {w}"} for n, v, w in rows]


def _metadata_env(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    seen: dict[tuple[str, str], dict[str, str]] = {}
    for r in runs:
        meta = json_value(r["metadata"])
        variables = meta.get("ENV_VARIABLES") if isinstance(meta, dict) else None
        for name, value in (variables or {}).items() if isinstance(variables, dict) else ():
            text = "" if value is None else str(value).strip()
            seen.setdefault(
                (str(name), text), {"name": str(name), "value": text, "from": "profiler metadata"}
            )
    return list(seen.values())


def fires(check: dict[str, Any], value: str) -> bool:
    """Whether one env_checks.toml rule fires on a variable's value ("" = recorded unset)."""
    v = value.strip()
    when = check["when"]
    if v == "":
        return bool(check.get("unset")) and when == "lacks"
    if when == "in":
        return v.lower() in {str(x).lower() for x in check["values"]}
    if when in ("lt", "gt"):
        try:
            number = float(v)
        except ValueError:
            return False
        return number < check["limit"] if when == "lt" else number > check["limit"]
    if when == "set":
        return True
    if when == "lacks":
        return check["text"].lower() not in v.lower()
    raise ValueError(f"env_checks.toml: unknown when = {when!r}")


def check_settings(observed: list[dict[str, str]], platforms: set[str]) -> list[dict[str, Any]]:
    """One row per (variable, value, where) that a rule covers: the rules that fire, else ``ok``."""
    rules, out = env_rules(), []
    for ob in observed:
        checks = [
            c
            for c in rules["check"]
            if c["name"] == ob["name"] and (not platforms or c["platform"] in platforms)
        ]
        if not checks:
            continue
        hits = [c for c in checks if fires(c, ob["value"])]
        for c in hits:
            out.append(
                {
                    **ob,
                    "status": c["status"],
                    "severity": c["severity"],
                    "cost": c.get(f"cost_{current_language()}") or c["cost"],  # cost_zh beside the English
                    "advice": c.get(f"advice_{current_language()}") or c["advice"],
                    "owner": "config",
                    "source": rules["sources"][c["source"]],
                }
            )
        if not hits and ob["value"] != "":
            out.append(
                {
                    **ob,
                    "status": "ok",
                    "severity": "info",
                    "cost": "",
                    "advice": "",
                    "owner": "config",
                    "source": rules["sources"][checks[0]["source"]],
                }
            )
    return out


def _judged(found: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """Per component, the version it is judged by: profiler_info first, then metadata, then the first log line."""
    out: dict[str, dict[str, str]] = {}
    for origin in FROM_ORDER:
        for f in found:
            if f["from"].startswith(origin):
                out.setdefault(f["component"], f)
    return out


def check_found(found: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Version rows with their check; a source that disagrees with the judged version is itself a mismatch."""
    judged = _judged(found)
    checks = check_versions({c: f["version"] for c, f in judged.items()})
    rows = []
    for f in sorted(
        found, key=lambda f: COMPONENTS.index(f["component"]) if f["component"] in COMPONENTS else 99
    ):
        main = judged[f["component"]]
        chk = checks[f["component"]]
        row = {
            "component": f["component"],
            "version": f["version"],
            "from": f["from"],
            "status": chk.status,
            "expected": chk.expected,
            "reason": chk.reason,
        }
        if f is not main and f["version"] != main["version"]:
            row.update(
                status="mismatched",
                expected=f"{main['version']} ({main['from']})",
                reason=f"{LABELS.get(f['component'], f['component'])} {f['version']} in {f['from']} but "
                f"{main['version']} in {main['from']}: two installs on the path?",
                suggestion=f"Check which {LABELS.get(f['component'], f['component'])} the process loads (two "
                "installs, or a set_env.sh of another version) and keep one",
            )
        row.setdefault("suggestion", tr(SUGGEST_INSTALL))
        rows.append(row)
    return rows


def answer(
    versions: list[dict[str, Any]], settings: list[dict[str, Any]], platforms: set[str] | None = None
) -> str:
    """The one line ``diag env`` prints first."""
    reasons = list(dict.fromkeys(v["reason"] for v in versions if v["status"] == "mismatched"))
    bad = [s for s in settings if s["status"] == "bad"]
    if reasons:
        text = "; ".join(reasons)
    elif not versions and platforms and "ascend" not in platforms:
        text = tr("vm.answer_other_platform", platforms="/".join(sorted(platforms)))
    elif not versions:
        text = tr("vm.answer_no_versions")
    elif all(v["status"] == "supported" for v in versions):
        shown = ", ".join(f"{LABELS.get(v['component'], v['component'])} {v['version']}" for v in versions)
        text = f"{shown}: a published pairing (version matrix read {_date_read()})"
    else:
        unknown = ", ".join(
            f"{LABELS.get(v['component'], v['component'])} {v['version']}"
            for v in versions
            if v["status"] == "unknown"
        )
        text = f"{unknown}: not in the published tables (read {_date_read()}), so not checked"
    if bad:
        text += f"; {len(bad)} setting(s) cost time: " + ", ".join(f"{s['name']}={s['value']}" for s in bad)
    return text


def _date_read() -> str:
    from diag.analyses.version_matrix import matrix

    return str(matrix()["date_read"])


def _checked(store: Store, runs: list[dict[str, Any]]) -> tuple[list[dict], list[dict], set[str]]:
    """(version rows, setting rows, platforms) of the runs in scope (all logs when there are none)."""
    found = _profiler_versions(runs) + _log_versions(store, runs)
    # one row per (component, version, where): the ranks of a job repeat their profiler_info
    unique = list({(f["component"], f["version"], f["from"]): f for f in found}.values())
    platforms = {r["platform"] for r in runs if r["platform"]}
    settings = check_settings(_metadata_env(runs) + _log_env(store, runs), platforms)
    return check_found(unique), settings, platforms


def environment_check(store: Store, run_id: int | None = None, job_id: int | None = None) -> dict[str, Any]:
    """{run_id, job_id, answer, versions, settings, findings} for one run, a job, or the database's only run."""
    runs = scope_runs(store, run_id, job_id)
    versions, settings, platforms = _checked(store, runs)
    rid = (
        runs[0]["run_id"] if runs and job_id is None else run_id
    )  # None for a job or a database of logs only
    return {
        "run_id": rid,
        "job_id": job_id,
        "answer": answer(versions, settings, platforms),
        "versions": versions,
        "settings": settings,
        "findings": [f.to_json() for f in _findings(rid, versions, settings)],
    }


def _findings(
    run_id: int | None, versions: list[dict[str, Any]], settings: list[dict[str, Any]]
) -> list[Finding]:
    out = []
    for reason in dict.fromkeys(v["reason"] for v in versions if v["status"] == "mismatched"):
        rows = [v for v in versions if v["reason"] == reason]
        out.append(
            Finding(
                run_id,  # type: ignore[arg-type]  # None for a database of logs only, as log findings do
                "environment",
                "high",
                tr("finding.environment.version_mismatch.title", reason=reason),
                0.0,
                0,
                {"owner": "stack", "versions": rows, "matrix": "diag/rules/version_matrix.toml"},
                rows[0]["suggestion"],
                code="environment.version_mismatch",
            )
        )
    for s in settings:
        if s["status"] == "bad":
            out.append(
                Finding(
                    run_id,  # type: ignore[arg-type]
                    "environment",
                    s["severity"],
                    tr(
                        "finding.environment.bad_setting.title",
                        name=s["name"],
                        value=s["value"],
                        cost=s["cost"],
                    ),
                    0.0,
                    0,
                    {
                        "owner": "config",
                        "name": s["name"],
                        "value": s["value"],
                        "from": s["from"],
                        "source": s["source"],
                    },
                    s["advice"],
                    code="environment.bad_setting",
                )
            )
    return out


def env_findings(store: Store, run_id: int) -> list[Finding]:
    """The environment findings of one run (the hook ``diag findings`` calls)."""
    versions, settings, _ = _checked(store, scope_runs(store, run_id, None))
    return _findings(run_id, versions, settings)
