"""Incident episodes of the logs: which flagged records belong to one failure, and which never do.

A *source* is where a record came from: ``(file, origin)`` — ``origin`` is the console prefix the parser read
(``VllmWorker TP1 pid=961``, ``rank6``…); a record without one (NULL, or only its own pid field, ``pid N``) is the
file's unprefixed output, one source (a plog file is one pid's).  Time and rank are taken from the record, else
from its own source (never from a record naming another pid), never from another source:

* an untimed record takes the time of the nearest timed record *of its source* at most
  ``borrow_time_records`` records away and in the same unbroken block of lines (no blank or unread line
  between them: pasted or concatenated captures are separated by one, and unprefixed lines of two pastes
  share a source; an elision line — ``.....``, ``…``, ``[...]`` — says lines of the same log were cut out
  there, so it joins the lines around it instead; so do Python's chained-exception lines, "The above exception was
  the direct cause of the following exception:" between the blank lines traceback.py prints around them, and the
  one blank line NCCL prints before each of its WARN lines), else stays untimed;
* a record without a rank takes its source's rank only when every ranked record of that source names the
  same one.

An *episode* is a set of flagged records that are time-consistent: within one *partition* (the logs of one job,
of one run outside a job, or of no run), records sorted by time are one episode while each is at most
``gap_s`` after the previous one (an HCCL notify wait times out ~1800 s after the failure that stalled it, so
the EI0002 of the other ranks joins the failure).  Partitions never join, however close their times; the untimed
records of one unbroken block of lines of a source form an episode of their own (two pastes' untimed errors are
two episodes, never one stitched cause).  Episodes are numbered from 1 by start time, untimed last.

Thresholds: ``rules/thresholds.toml`` ``[log_episodes]``.  Data only; the SQL runs in DuckDB.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from diag.analyses.finding import thresholds
from diag.i18n import t
from diag.store import Store

# rules/log_patterns.toml: an ERROR record that no rule or catalogued code places
UNCLASSIFIED = "unclassified_error"


def settings() -> dict[str, float]:
    """``[log_episodes]`` of thresholds.toml, with the defaults documented there."""
    defaults = {"gap_s": 1900, "borrow_time_records": 50, "wrap_records": 6, "wrap_window_s": 5}
    return defaults | thresholds().get("log_episodes", {})


def scope_filter(run_id: int | None = None, job_id: int | None = None) -> tuple[str, list[Any]]:
    """SQL condition on ``l`` (log_records) for the logs of a run, of every run of a job, or (neither) all."""
    if run_id is not None:
        return " AND l.run_id = ?", [run_id]
    if job_id is not None:
        return " AND l.run_id IN (SELECT run_id FROM runs WHERE job_id = ?)", [job_id]
    return "", []


# A console prefix (vLLM / Ray actor, torchrun [rankN]:, a grep file prefix) is a source of its own; a record's
# own pid field ('pid N') or none at all is the file's unprefixed output: one source, so that the untimed
# 'aclrtSynchronizeStream failed' line above an 'EZ9999 [PID: 110830] <time>' record of the same console is
# one device exception with it, not an untimed second one.
SOURCE_SQL = (
    "CASE WHEN l.origin IS NULL OR regexp_matches(l.origin, '^pid [0-9]+$') THEN '' ELSE l.origin END"
)


def source_key(origin: str | None) -> str:
    """``SOURCE_SQL`` in Python: '' for the file's unprefixed output, else the console prefix."""
    return "" if origin is None or re.fullmatch(r"pid [0-9]+", origin) else origin


# A line that only marks lines cut out of a pasted excerpt ("....." / "…" / "[...]"): the same log goes on after it,
# so it never separates two blocks, even with blank lines around it.
ELISION_RX = r"^\s*(?:\.{3,}|…+|\[(?:\.{3}|…)\]|\((?:\.{3}|…)\)|<(?:\.{3}|…)>)\s*(?:\n|$)"
# Python's chained tracebacks (Lib/traceback.py _cause_message / _context_message): "\nThe above exception was the direct
# cause of the following exception:\n\n" and "\nDuring handling of the above exception, another exception occurred:\n\n"
# — one traceback whose blank lines are its own; the exception above it is the one Python names as the cause.
CHAIN_RX = (
    r"^[^\n]*?(?:The above exception was the direct cause of the following exception|During handling of the above "
    r"exception, another exception occurred):\s*(?:\n|$)"
)
# NCCL's own blank line: ncclDebugLog (NCCL src/debug.cc) opens every WARN with "\n" — "\n%s:%d:%d [%d] %s:%d NCCL WARN "
# (host:pid:tid [cudaDev] file:line) — so one blank line before such a record is the same console going on, not two
# pasted captures.
NCCL_WARN_RX = r"^(?:[^\n]*?[\s:\]])?[\w.-]+:\d+:\d+ \[\d+\] [^\n ]+:\d+ NCCL WARN "


def episode_ctes(run_id: int | None = None, job_id: int | None = None) -> tuple[str, list[Any]]:
    """CTEs (no leading WITH) that end in ``ep``, and their parameters: one row per flagged record of the scope
    (a run, a job's runs, or every log) with ``src`` (its source: the console prefix, '' for the file's
    unprefixed output), ``eff_ns`` / ``eff_rank`` (its own or its source's) and ``episode``.

    Millions of records, few flagged: only the flagged rows carry their text (``raw``) through the CTEs; blocks
    of lines (``blk``) are counted only in files with an untimed flagged record (the one use of a block: the
    records such a one may borrow a time from, and its episode key; elsewhere ``blk`` is 0), from narrow columns,
    the text read (and its regexps run) only at the few holes in the line numbers."""
    where, params = scope_filter(run_id, job_id)
    s = settings()
    gap_ns = int(float(s["gap_s"]) * 1e9)
    near = int(s["borrow_time_records"])
    flag = "l.category IS NOT NULL AND l.severity <> 'none'"
    ctes = f"""
    ufiles AS (SELECT DISTINCT l.file_id FROM log_records l WHERE {flag} AND l.ts_ns IS NULL{where}),
    pos AS (SELECT l.file_id, l.record_no, l.line_no, l.ts_ns, l.origin, {SOURCE_SQL} AS src,
                   max(l.line_no + coalesce(l.line_count, 1)) OVER w AS prev_end, lag(l.record_no) OVER w AS prev_no
            FROM log_records l WHERE l.file_id IN (SELECT file_id FROM ufiles){where}
            WINDOW w AS (PARTITION BY l.file_id ORDER BY l.record_no
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)),
    holes AS (SELECT * FROM pos WHERE line_no > prev_end),
    cut AS (SELECT h.file_id, h.record_no,
                   CASE WHEN NOT (regexp_matches(c.raw, '{ELISION_RX}') OR regexp_matches(c.raw, '{CHAIN_RX}'))
                              AND NOT coalesce(regexp_matches(p.raw, '{ELISION_RX}')
                                               OR regexp_matches(p.raw, '{CHAIN_RX}'), false)
                              AND NOT (regexp_matches(c.raw, '{NCCL_WARN_RX}') AND h.line_no = h.prev_end + 1)
                        THEN 1 ELSE 0 END AS gap
            FROM holes h JOIN log_records c ON c.file_id = h.file_id AND c.record_no = h.record_no
            LEFT JOIN log_records p ON p.file_id = h.file_id AND p.record_no = h.prev_no),
    blocks AS (SELECT p.file_id, p.record_no, p.ts_ns, p.origin, p.src,
                      sum(coalesce(cut.gap, 0)) OVER (PARTITION BY p.file_id ORDER BY p.record_no) AS blk
               FROM pos p LEFT JOIN cut USING (file_id, record_no)),
    flagged AS (SELECT l.*, {SOURCE_SQL} AS src, coalesce('job:' || r.job_id, 'run:' || l.run_id, 'none') AS part,
                       coalesce(b.blk, 0) AS blk
                FROM log_records l LEFT JOIN runs r USING (run_id) LEFT JOIN blocks b USING (file_id, record_no)
                WHERE {flag}{where}),
    timed AS (SELECT file_id, src, blk, record_no, ts_ns, origin FROM blocks WHERE ts_ns IS NOT NULL),
    back AS (SELECT f.file_id, f.record_no, t.ts_ns AS b_ns, f.record_no - t.record_no AS b_dist,
                    f.origin IS NULL OR t.origin IS NULL OR f.origin = t.origin AS b_ok
             FROM (SELECT * FROM flagged WHERE ts_ns IS NULL) f
             ASOF JOIN timed t ON f.file_id = t.file_id AND f.src = t.src AND f.blk = t.blk
                  AND f.record_no >= t.record_no),
    fwd AS (SELECT f.file_id, f.record_no, t.ts_ns AS a_ns, t.record_no - f.record_no AS a_dist,
                   f.origin IS NULL OR t.origin IS NULL OR f.origin = t.origin AS a_ok
            FROM (SELECT * FROM flagged WHERE ts_ns IS NULL) f
            ASOF JOIN timed t ON f.file_id = t.file_id AND f.src = t.src AND f.blk = t.blk
                  AND f.record_no <= t.record_no),
    srank AS (SELECT file_id, src, min(rank) AS src_rank
              FROM (SELECT DISTINCT l.file_id, {SOURCE_SQL} AS src, l.rank
                    FROM (SELECT DISTINCT l.file_id, l.origin, l.rank FROM log_records l WHERE l.rank IS NOT NULL
                          AND l.file_id IN (SELECT l.file_id FROM log_records l WHERE {flag}{where}){where}) l)
              GROUP BY file_id, src HAVING count(DISTINCT rank) = 1),
    e AS (SELECT f.*, coalesce(f.ts_ns,
                   CASE WHEN b.b_dist <= {near} AND b.b_ok AND (a.a_dist IS NULL OR b.b_dist <= a.a_dist
                                                               OR NOT a.a_ok) THEN b.b_ns
                        WHEN a.a_dist <= {near} AND a.a_ok THEN a.a_ns END) AS eff_ns,  -- never another pid's
                 coalesce(f.rank, sr.src_rank) AS eff_rank
          FROM flagged f LEFT JOIN back b USING (file_id, record_no) LEFT JOIN fwd a USING (file_id, record_no)
          LEFT JOIN srank sr USING (file_id, src)),
    gaps AS (SELECT *, CASE WHEN eff_ns - lag(eff_ns) OVER w > {gap_ns} THEN 1 ELSE 0 END AS new_episode
             FROM e WINDOW w AS (PARTITION BY part, eff_ns IS NULL ORDER BY eff_ns, file_id, record_no)),
    keyed AS (SELECT *, CASE WHEN eff_ns IS NULL THEN 'untimed:' || file_id || ':' || src || ':' || blk
                        ELSE part || ':' || sum(new_episode) OVER (PARTITION BY part, eff_ns IS NULL
                             ORDER BY eff_ns, file_id, record_no) END AS ekey
              FROM gaps),
    numbered AS (SELECT ekey, row_number() OVER (ORDER BY min(eff_ns) NULLS LAST, min(file_id),
                                                  min(record_no)) AS episode
                 FROM keyed GROUP BY ekey),
    ep AS (SELECT keyed.*, numbered.episode FROM keyed JOIN numbered USING (ekey))"""
    return ctes, params * ctes.count(where) if where else params


@dataclass
class Episode:
    episode: int
    start_ns: int | None  # None: untimed (its records and their source carry no time)
    end_ns: int | None
    records: int  # flagged records
    files: list[str]
    origins: list[str]  # console prefixes of its records ('' = the file itself is the source)
    runs: list[int]
    ranks: list[int]
    root_cause: dict[str, Any] | None = None  # category, title, severity, role of its top cause
    incident: bool = False  # its top cause is high or medium severity
    # its top cause was placed by a rule of its own (not the catch-all for an ERROR record no rule knows):
    # ranks untimed episodes only, not part of the JSON
    placed: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["placed"]
        return out


def episodes(store: Store, run_id: int | None = None, job_id: int | None = None) -> list[Episode]:
    """Every episode of the scope (run, job or every log), by number; ``root_cause`` is filled by the caller."""
    ctes, params = episode_ctes(run_id, job_id)
    sql = f"""WITH {ctes}
    SELECT ep.episode, min(eff_ns), max(eff_ns), count(*), list(DISTINCT f.source ORDER BY f.source),
           list(DISTINCT coalesce(ep.origin, '') ORDER BY coalesce(ep.origin, '')), list(DISTINCT ep.run_id ORDER BY ep.run_id)
               FILTER (WHERE ep.run_id IS NOT NULL),
           list(DISTINCT eff_rank ORDER BY eff_rank) FILTER (WHERE eff_rank IS NOT NULL)
    FROM ep JOIN files f USING (file_id) GROUP BY ep.episode ORDER BY ep.episode"""
    rows = store.cursor().execute(sql, params).fetchall()
    return [
        Episode(int(n), lo, hi, int(c), list(fs), list(os_), list(rs or []), list(ks or []))
        for n, lo, hi, c, fs, os_, rs, ks in rows
    ]


def latest_incident(eps: list[Episode]) -> Episode | None:
    """The incident episode that ended last; untimed ones only when no incident has a time (then the last
    one ingested whose cause is named, else whose unknown a rule names: in a console capture of several
    processes, untimed, the process whose traceback was cut or that only reports a bare ERROR never hides the
    one that says what failed); no incident at all: the latest episode of any kind."""
    for pool in ([e for e in eps if e.incident], eps):
        timed = [e for e in pool if e.end_ns is not None]
        if timed:
            return max(timed, key=lambda e: (e.end_ns, e.episode))
        named = [e for e in pool if e.root_cause and e.root_cause["category"] != UNCLASSIFIED]
        placed = [e for e in pool if e.placed]  # an unknown a rule names (its own fix) before a bare ERROR
        if named or placed or pool:
            return (named or placed or pool)[-1]
    return None


def _ts(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def span_text(start_ns: int | None, end_ns: int | None) -> str:
    """'2025-06-25 10:45:23.000000 – 10:45:23.586187'-style range, or 'untimed'."""
    if start_ns is None or end_ns is None:
        return t("log_episode.untimed")
    lo, hi = _ts(start_ns), _ts(end_ns)
    return lo if lo == hi else f"{lo} – {hi[11:] if hi[:10] == lo[:10] else hi}"


def describe(ep: Episode, cause: bool = True) -> str:
    """One line naming an episode: number, time range, files, origins and (``cause``) its root cause."""
    names = ", ".join(f.rsplit("/", 1)[-1] for f in ep.files)
    origins = ", ".join(o for o in ep.origins if o)
    title = f" — {ep.root_cause['title']}" if cause and ep.root_cause else ""
    where = names + (t("log_episode.sep") + origins if origins else "")
    return (
        t("log_episode.describe", n=ep.episode, span=span_text(ep.start_ns, ep.end_ns), where=where) + title
    )


def others_text(eps: list[Episode], chosen: Episode) -> str:
    """'N other episode(s): #1 (…) — title; …' or '' when there is none."""
    rest = [e for e in eps if e.episode != chosen.episode]
    if not rest:
        return ""
    return t("log_episode.others", n=len(rest), episodes=t("log_episode.sep").join(describe(e) for e in rest))
