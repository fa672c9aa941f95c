"""Root causes from CANN / torch_npu logs: which classified record is the failure, which are its echoes.

Records were classified at ingest (``rules/log_patterns.toml``).  Here the flagged ones (severity other than
``none``) are cut into incident *episodes* (``log_episodes``: time-consistent records of one job / run, each
record's time and rank its own or its source's — file + console prefix — never another's).  Within an episode
the records of one category form one candidate; candidates are ranked by severity, then role (a ``cause``
before a ``symptom`` such as EI0002 on another rank, a ``consequence`` such as a watchdog abort, or a
``wrapper`` such as ERR00100), then the category's rank, then time.  The first is the root cause; symptoms,
consequences and wrappers of the same episode after it are marked as its echoes.  A wrapper names the code of
a record of its own source just after it (``[log_episodes]`` wrap_records / wrap_window_s).  Titles,
explanations and fixes are the rule's templates filled from the records (``log_explain``).

A root cause's evidence is led by the record that names the failure best: by role, then records that only echo it
last (``[settings] generic_evidence``: a bare "Inner Error!" envelope, an API return-code line, a traceback frame,
a vague runtime description), an unclassified error's records that name a code first, then the rule's position in
the rules file (specific rules first), then file order.  The lead record's rule gives the title, explanation, key line.

Also: findings in the shape of ``findings.Finding`` (``log:<category>``); the Logs and Fallback pages'
accessors live in ``log_queries`` (re-exported here).  Data only; nothing here draws.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from diag.analyses import log_episodes, owners
from diag.analyses.error_codes import describe_code, error_codes  # noqa: F401  (error_codes: re-exported)
from diag.analyses.finding import Finding
from diag.analyses.log_episodes import (
    SOURCE_SQL,
    Episode,
    describe,
    episode_ctes,
    latest_incident,
    others_text,
    source_key,
)
from diag.analyses.log_explain import explain, key_line
from diag.analyses.log_queries import (  # noqa: F401  (re-exported: the pages' accessors)
    RECORD_COLUMNS,
    classified_records,
    filter_values,
    log_evidence_for_ops,
    log_records,
    log_scopes,
    record_context,
    record_ref,
    records_by_ref,
    split_ref,
)
from diag.analyses.log_rule_files import merged_rule_data
from diag.i18n import t
from diag.store import Store

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
PATTERNS = RULES_DIR / "log_patterns.toml"
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}
ROLE_ORDER = {"cause": 0, "symptom": 1, "consequence": 2, "wrapper": 3}


@lru_cache(maxsize=2)
def log_rules(path: Path = PATTERNS) -> dict[str, Any]:
    """The rules file: settings, categories (rank, title) and rules by id (with the CUDA rules file's)."""
    data = merged_rule_data(path)
    return {
        "settings": data["settings"],
        "category": data["category"],
        "rule": {r["id"]: r for r in data["rule"]},
    }


@dataclass
class Evidence:
    file: str
    file_id: int
    record_no: int
    line_no: int
    ts_ns: int | None
    rank: int | None
    pid: int | None
    level: str | None
    code: str | None
    rule_id: str
    raw: str
    wraps: str | None = None  # for a wrapper (ERR00100…): the first real code printed after it in its source
    origin: str | None = None  # the record's source within its file (console prefix); None: the file itself
    eff_ns: int | None = None  # its time, or (untimed) the time of the nearest timed record of its source


@dataclass
class RootCause:
    rank: int  # 1 = the most likely root cause
    episode: int
    category: str
    title: str
    severity: str
    role: str  # best role among its records: cause | symptom | consequence | wrapper
    echo_of: int | None  # rank of the root cause this one most likely follows from
    count: int
    first_ns: int | None
    last_ns: int | None
    rule_ids: list[str]
    codes: list[dict[str, str]]  # code, component, meaning, typical_fix (from rules/error_codes.csv)
    ranks: list[int]
    files: list[str]
    explanation: str
    fix: str
    evidence: list[Evidence] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)  # console prefixes of its records (none: whole files)
    figures: dict[str, Any] = field(default_factory=dict)  # numbers its first record with figures states
    advice: list[str] = field(default_factory=list)  # what those figures say (OOM: request, free, reserved…)
    key_line: str = ""  # the part of its lead record that its rule matched (the op / code it is about)
    owner: str | None = None  # code | config | stack | vendor | hardware; None: from rules/owners.toml
    owner_reason: str = ""
    owner_steps: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return owners.attach(asdict(self), lambda: owners.for_log(self.category, self.codes))


def _rule_table() -> list[tuple[str, int, int, int]]:
    """(rule id, role rank, category rank, position in the rules file: specific rules come first)."""
    rules = log_rules()
    cats = rules["category"]
    return [
        (
            rid,
            ROLE_ORDER.get(r.get("role", "cause"), 0),
            int(cats.get(r["category"], {}).get("rank", 50)),
            pos,
        )
        for pos, (rid, r) in enumerate(rules["rule"].items())
    ]


def _generic_evidence() -> str:
    """[settings] generic_evidence: records that only echo a failure (module docstring)."""
    return str(log_rules()["settings"].get("generic_evidence", "^$"))


def _candidates(
    store: Store, run_id: int | None, job_id: int | None = None, episode: int | None = None
) -> list[dict[str, Any]]:
    """Flagged records per (episode, category), aggregated in DuckDB (there may be millions of them)."""
    n_ev = int(log_rules()["settings"].get("max_evidence", 8))
    ctes, params = episode_ctes(run_id, job_id)
    values = ", ".join("(?, ?, ?, ?)" for _ in _rule_table())
    flat = [v for row in _rule_table() for v in row]
    only = "" if episode is None else " WHERE ep.episode = ?"
    sql = f"""
    WITH {ctes},
    rr(rule_id, role_rank, cat_rank, rule_pos) AS (VALUES {values}),
    g AS (SELECT ep.*, coalesce(rr.role_rank, 0) AS role_rank,
                 coalesce(rr.cat_rank, 50) AS cat_rank,  -- a rule gone from the file since ingest: a cause
                 coalesce(rr.rule_pos, 1000) AS rule_pos,
                 CASE WHEN regexp_matches(ep.raw, ?) THEN 1 ELSE 0 END AS generic,
                 CASE ep.severity WHEN 'high' THEN 0 WHEN 'medium' THEN 1 WHEN 'low' THEN 2 ELSE 3 END AS sev_rank,
                 min(ep.eff_ns) OVER (PARTITION BY ep.episode, ep.category, ep.file_id) AS file_first_ns,
                 files.source
          FROM ep LEFT JOIN rr USING (rule_id) JOIN files ON files.file_id = ep.file_id{only})
    SELECT episode, category, count(*) AS n, min(eff_ns) AS first_ns, max(eff_ns) AS last_ns,
           min(CASE severity WHEN 'high' THEN 0 WHEN 'medium' THEN 1 WHEN 'low' THEN 2 ELSE 3 END) AS sev,
           min(role_rank) AS role, min(cat_rank) AS cat_rank, list(DISTINCT rule_id) AS rule_ids,
           list_distinct(flatten(list(list_concat(coalesce(codes, []), [code])))) AS codes,
           list(DISTINCT eff_rank) FILTER (WHERE eff_rank IS NOT NULL) AS ranks, list(DISTINCT source) AS files,
           list(DISTINCT origin) FILTER (WHERE origin IS NOT NULL) AS origins,
           list(struct_pack(file := source, file_id, record_no, line_no, ts_ns, rank := eff_rank, pid,
                            level, code, rule_id, raw, origin, eff_ns)
                -- a consequence leads by its own severity; an unclassified error by a record with its code (#16)
                ORDER BY role_rank, generic, category = '{UNCLASSIFIED}' AND code IS NULL,
                         CASE WHEN role_rank = 2 THEN sev_rank ELSE rule_pos END,
                         file_first_ns NULLS LAST, file_id, record_no)[1:{n_ev}]
               AS evidence,
           arg_min(figures, record_no) FILTER (WHERE figures IS NOT NULL) AS figures
    FROM g GROUP BY episode, category
    ORDER BY episode, category  -- ties (untimed episodes, equal keys) in one order, not the hash table's"""
    cur = store.cursor()
    cols = ["episode", "category", "n", "first_ns", "last_ns", "sev", "role", "cat_rank", "rule_ids", "codes",
            "ranks", "files", "origins", "evidence", "figures"]  # fmt: skip
    args = params + flat + [_generic_evidence()] + ([] if episode is None else [episode])
    rows = [dict(zip(cols, row, strict=True)) for row in cur.execute(sql, args).fetchall()]
    for row in rows:  # the lead record is the first evidence record: its rule titles and explains the cause
        row["lead_rule"] = row["evidence"][0]["rule_id"]
    return rows


def root_causes(
    store: Store, run_id: int | None = None, *, job_id: int | None = None, episode: int | None = None
) -> list[RootCause]:
    """Ranked root-cause candidates of the logs of ``run_id`` / ``job_id`` (neither: every log in the store),
    of one ``episode`` when given (numbers from ``log_episodes.episodes`` of the same scope)."""
    return _ranked(store, _candidates(store, run_id, job_id, episode))


def _ranked(store: Store, cands: list[dict[str, Any]]) -> list[RootCause]:
    """``root_causes`` of candidates (``_candidates`` rows, left unchanged: those of several episodes can be
    ranked again, one episode's alone, without running the episode SQL over every record once more)."""
    cands = [dict(c) for c in cands]  # _unexplained_stop raises a candidate's severity in place
    by_episode: dict[int, list[dict[str, Any]]] = {}
    for c in cands:
        by_episode.setdefault(c["episode"], []).append(c)
    for ep, group in by_episode.items():
        by_episode[ep] = group = _without_unplaced_beside_known(group)
        _generic_report_yields(group)
        group.sort(key=lambda c: (c["sev"], c["role"], c["cat_rank"], c["first_ns"] or 0))
        placed = [c for c in group if not _last_resort(c)]
        _unexplained_stop(placed[0] if placed else group[0])
        group.sort(key=lambda c: (c["sev"], _last_resort(c), c["role"], c["cat_rank"], c["first_ns"] or 0))
    ranked = sorted(  # untimed episodes after the timed ones of the same severity and role
        by_episode.values(),
        key=lambda g: (g[0]["sev"], g[0]["role"], g[0]["first_ns"] is None, g[0]["first_ns"] or 0),
    )
    out: list[RootCause] = []
    for group in ranked:
        top = len(out) + 1
        for i, c in enumerate(group):
            echo = top if i and group[0]["role"] == 0 and c["role"] > 0 else None
            out.append(_root_cause(len(out) + 1, c, echo))
    _add_wrapped_codes(store, out)
    return out


UNCLASSIFIED = log_episodes.UNCLASSIFIED  # an ERROR record that no rule or catalogued code places


def _without_unplaced_beside_known(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An episode's unclassified ERROR records are a root cause only when nothing in it is placed: beside a
    known cause or symptom (high / medium) they are most often its detail lines (HCCL tables, call traces) — an
    unknown is reported, never stacked under a known failure as a second one."""
    known = any(c["category"] != UNCLASSIFIED and c["sev"] <= 1 and c["role"] <= 1 for c in group)
    placed = any(c["category"] != UNCLASSIFIED for c in group)
    yielding = _yields_to_placed()

    # held only by rules with yields_to_placed (a cut traceback)
    def names_nothing(c: dict[str, Any]) -> bool:
        return bool(c["rule_ids"]) and all(r in yielding for r in c["rule_ids"])

    return [
        c for c in group if not (c["category"] == UNCLASSIFIED and (known or (placed and names_nothing(c))))
    ]


@lru_cache(maxsize=1)
def _yields_to_placed() -> frozenset[str]:
    """Rules whose record names nothing (``yields_to_placed``: a traceback cut before its exception line)."""
    return frozenset(k for k, r in log_rules()["rule"].items() if r.get("yields_to_placed"))


def _generic_report_yields(group: list[dict[str, Any]]) -> None:
    """A candidate held only by generic reports (rules with ``yields_to_codes_of``) whose own codes do not place it
    becomes a symptom of the candidate whose catalogued code has one of those categories (the 507034 vector core
    timeout beside the device's "exception of aivec error" report): that candidate is made the cause.  In place."""
    rules = log_rules()["rule"]
    catalog = error_codes()
    for c in group:
        yields = {cat for r in c["rule_ids"] for cat in rules.get(r, {}).get("yields_to_codes_of", [])}
        if not yields or not all(rules.get(r, {}).get("yields_to_codes_of") for r in c["rule_ids"]):
            continue
        if any(catalog.get(k, {}).get("category") == c["category"] for k in c["codes"] or []):
            continue  # its own code places it (507015 AI Core exception): it stays a cause
        verdicts = [
            o
            for o in group
            if o is not c
            and o["category"] in yields
            and any(catalog.get(k, {}).get("category") == o["category"] for k in o["codes"] or [])
        ]
        if verdicts:
            c["role"] = max(c["role"], ROLE_ORDER["symptom"])
            for o in verdicts:
                o["role"] = min(o["role"], ROLE_ORDER["cause"])


LAST_RESORT_RULE = (
    "unclassified_error_words"  # rules/log_patterns.toml: an unlevelled line with failure words
)


def _last_resort(c: dict[str, Any]) -> bool:
    """A candidate held only by the last-resort rule: it leads an episode only when no rule placed anything in it
    (a process stop that no record explains is still that stop, raised to low, and goes first)."""
    return bool(c["rule_ids"]) and all(r == LAST_RESORT_RULE for r in c["rule_ids"])


def _unexplained_stop(top: dict[str, Any]) -> None:
    """An episode whose best candidate is a consequence at info (the process died, was killed or aborted, and no
    record of it says why) is still a stop: reported at low severity, the answer being "it stopped, cause not in
    the log" — never raised to medium, which would claim a failure the log does not show."""
    if top["role"] == ROLE_ORDER["consequence"] and top["sev"] == SEVERITY_ORDER["info"]:
        top["sev"] = SEVERITY_ORDER["low"]


def episodes(store: Store, run_id: int | None = None, job_id: int | None = None) -> list[Episode]:
    """The scope's episodes, each with its top root cause (``root_cause``) and whether it is an incident."""
    return _with_top_causes(
        log_episodes.episodes(store, run_id, job_id), root_causes(store, run_id, job_id=job_id)
    )


def _with_top_causes(eps: list[Episode], causes: list[RootCause]) -> list[Episode]:
    """``eps`` with each one's top root cause (``causes``: those of every episode of the same scope)."""
    # placed: a rule of its own names it; the catch-alls and a cut traceback (yields_to_placed) name nothing
    unnamed = {UNCLASSIFIED, LAST_RESORT_RULE} | _yields_to_placed()
    top: dict[int, RootCause] = {}
    for rc in causes:
        top.setdefault(rc.episode, rc)
    for ep in eps:
        rc = top.get(ep.episode)
        if rc is not None:
            ep.root_cause = {"rank": rc.rank, "category": rc.category, "title": rc.title,
                             "severity": rc.severity, "role": rc.role,
                             **owners.for_log(rc.category, rc.codes).fields()}  # fmt: skip
            ep.incident = rc.severity in ("high", "medium")
            ep.placed = any(r not in unnamed for r in rc.rule_ids)
    return eps


@dataclass
class LogScope:
    """What a log report covers: one episode's root causes (or every episode's), in words."""

    causes: list[RootCause]
    episodes: list[Episode]
    episode: Episode | None  # None: every episode of the run / job / store
    scope: str  # 'latest incident episode #2 (2025-09-04 09:50:11.954378; concat.log; rank0)'
    others: str  # 'N other episode(s): …' or ''


def log_scope(
    store: Store,
    run_id: int | None = None,
    job_id: int | None = None,
    episode: int | None = None,
    every_episode: bool = False,
) -> LogScope:
    """The root causes of ``episode``, else (no run / job, not ``every_episode``) of the latest incident
    episode, else of every episode of the scope."""
    cands = _candidates(store, run_id, job_id)  # every episode's, once: the chosen one's are among them
    every = _ranked(store, cands)
    eps = _with_top_causes(log_episodes.episodes(store, run_id, job_id), every)
    if episode is not None:
        chosen = next((e for e in eps if e.episode == episode), None)
        if chosen is None:
            raise ValueError(t("log_scope.no_episode", episode=episode, n=len(eps)))
    elif run_id is None and job_id is None and not every_episode:
        chosen = latest_incident(eps)
    else:
        chosen = None
    causes = every if chosen is None else _ranked(store, [c for c in cands if c["episode"] == chosen.episode])
    if chosen is None:
        return LogScope(causes, eps, None, t("log_scope.every", n=len(eps)), "")
    latest = "log_scope.latest_incident" if chosen.incident else "log_scope.latest"
    label = "" if episode is not None else t(latest)
    return LogScope(causes, eps, chosen, label + describe(chosen, cause=False), others_text(eps, chosen))


def _root_cause(rank: int, c: dict[str, Any], echo_of: int | None) -> RootCause:
    roles = {v: k for k, v in ROLE_ORDER.items()}
    evidence = [Evidence(**e) for e in c["evidence"]]
    figures = json.loads(c["figures"]) if isinstance(c["figures"], str) else dict(c["figures"] or {})
    lead_code = _lead_code(evidence)
    said = explain(c["lead_rule"], c["category"], [e.raw for e in evidence], figures, lead_code)
    return RootCause(
        rank=rank,
        episode=int(c["episode"]),
        category=c["category"],
        title=said.title,
        severity={v: k for k, v in SEVERITY_ORDER.items()}[c["sev"]],
        role=roles[c["role"]],
        echo_of=echo_of,
        count=int(c["n"]),
        first_ns=c["first_ns"],
        last_ns=c["last_ns"],
        rule_ids=sorted(c["rule_ids"]),
        codes=[describe_code(k) for k in sorted(c["codes"] or [])],
        ranks=sorted(c["ranks"] or []),
        files=sorted(c["files"]),
        explanation=said.explanation,
        fix=said.fix,
        evidence=evidence,
        origins=sorted(c["origins"] or []),
        figures=figures,
        advice=said.advice,
        key_line=_key_line(c["lead_rule"], evidence),
    )


@lru_cache(maxsize=1)
def _wrapper_code() -> re.Pattern[str]:
    """rules/log_codes.toml ``wrapper``: the generic envelope codes (EZ9999, ERR00100 …)."""
    with open(RULES_DIR / "log_codes.toml", "rb") as fh:
        return re.compile(tomllib.load(fh)["wrapper"])


def _lead_code(evidence: list[Evidence]) -> str | None:
    """The code a root cause is named by: the first code of its evidence that is not a generic envelope (the
    507014 beside an EZ9999 record), else the first code."""
    codes = [e.code for e in evidence if e.code]
    return next((c for c in codes if not _wrapper_code().match(c)), codes[0] if codes else None)


def _key_line(rule_id: str, evidence: list[Evidence]) -> str:
    """The lead record's key line: where its rule's pattern (or its code) is, not its first characters."""
    lead = next((e for e in evidence if e.rule_id == rule_id), evidence[0] if evidence else None)
    if lead is None:
        return ""
    return key_line(lead.raw, log_rules()["rule"].get(rule_id, {}).get("pattern", ""), lead.code)


_WRAPPED_CODE = f"""
    SELECT real[1] FROM (
        SELECT record_no, ts_ns, list_filter(list_concat(coalesce(codes, []), [code]),
                                             lambda c: c NOT LIKE 'ERR%' AND NOT regexp_matches(c, '^E.9999$')) AS real
        FROM log_records l WHERE file_id = $file AND {SOURCE_SQL} = $src AND record_no >= $rec
          AND (origin IS NULL OR $origin IS NULL OR origin = $origin)  -- never another pid's code
        ORDER BY record_no LIMIT $n)
    WHERE len(real) > 0 AND ($ts IS NULL OR ts_ns IS NULL OR abs(ts_ns - $ts) <= $window)
    ORDER BY record_no LIMIT 1"""


def _add_wrapped_codes(store: Store, causes: list[RootCause]) -> None:
    """A wrapper (ERR00100, EZ9999 Inner Error!) names the real code printed in its own record or the next
    few records *of its own source*, close in time: never a code of another process."""
    cur = store.cursor()
    s = log_episodes.settings()
    for rc in causes:
        for ev in rc.evidence:
            if log_rules()["rule"].get(ev.rule_id, {}).get("role") != "wrapper":
                continue
            row = cur.execute(
                _WRAPPED_CODE,
                {"file": ev.file_id, "src": source_key(ev.origin), "origin": ev.origin, "rec": ev.record_no, "n": int(s["wrap_records"]) + 1,
                 "ts": ev.eff_ns, "window": int(float(s["wrap_window_s"]) * 1e9)},
            ).fetchall()  # fmt: skip
            ev.wraps = row[0][0] if row else None


def log_findings(store: Store, run_id: int | None = None) -> list[Finding]:
    """The root causes as findings (category ``log:<category>``), ready to sit beside the device findings.

    ``Finding.run_id`` is the run asked for; None when the logs belong to no run.
    """
    out, key = [], "finding.log.root_cause"  # its texts: diag/i18n/*.findings.toml
    for rc in root_causes(store, run_id):
        first = rc.evidence[0] if rc.evidence else None
        where = t(f"{key}.title_where", ranks=", ".join(map(str, rc.ranks))) if rc.ranks else ""
        echo = t(f"{key}.title_echo", echo_of=rc.echo_of) if rc.echo_of else ""
        line = rc.key_line or (first.raw.splitlines()[0][:160] if first else "")
        title = t(f"{key}.title", rank=rc.rank, title=rc.title, where=where, count=rc.count, echo=echo,
                  line=line)  # fmt: skip
        out.append(
            Finding(
                run_id,  # type: ignore[arg-type]
                f"log:{rc.category}",
                rc.severity,
                title,
                0.0,
                0,
                {
                    "rank": rc.rank,
                    "role": rc.role,
                    "echo_of": rc.echo_of,
                    "rule_ids": rc.rule_ids,
                    "codes": rc.codes,
                    "ranks": rc.ranks,
                    "files": rc.files,
                    "explanation": rc.explanation,
                    "records": [asdict(e) for e in rc.evidence],
                },
                rc.fix,
                rc.first_ns,
                rc.last_ns,
                code="log.root_cause",
            )
        )
    return out
