"""CANN host/device logs (``plog-*.log``, ``device-*.log``) and torch_npu / vLLM console captures.

One row of ``log_records`` per record: a header line plus the lines that continue it (Possible Cause,
Solution, TraceBack, indented error-manager and Python traceback lines), classified at ingest by the rules of
``diag/rules/log_patterns.toml``.  The grammar is in ``shared/formats/cann_logs.md``; in short:

* plog: ``[LEVEL] MODULE(pid,pname):YYYY-MM-DD-hh:mm:ss.mmm.uuu [file:line]body`` (pname may be empty, TorchAir
  writes a space between date and time, spaces may be missing, two records can be glued on one line); the
  thread id sits in the body in a module-specific layout;
* console: error-manager blocks (``EZ9999: …``, ``EZ9999[PID: n] ts (EZ9999): …``, ``[PID: n] ts Title(EI0011): …``),
  torch_npu ``[ERROR] ts (PID:n, Device:d, RankID:r) ERR00100 …``, c10 ``[W… file:line] Warning: …``, glog,
  MindIE, Python logging and tracebacks, behind vLLM / Ray / torchrun / grep prefixes, which are stripped.

Streaming: the file is read in blocks of about ``BLOCK_BYTES``, each cut just before a line that starts a record
(a plog header), so that blocks parse independently: decoded (UTF-8, else GB18030 — logs of Chinese systems
are often GBK), split, parsed with Polars (slices and regexes over whole columns, which release the GIL) on
``WORKERS`` threads, classified, and inserted in file order as one Arrow batch per block.  Memory is bounded by
a few blocks' frames (plus DuckDB's memory_limit) whatever the file size.
Times are local time as if UTC (logs carry no zone), int64 ns; console forms without a year get NULL.
"""

from __future__ import annotations

import itertools
import os
import re
import tomllib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe

RULES_PATH = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_patterns.toml"
BLOCK_BYTES = 4 << 20
MAX_LINE_BYTES = 64 << 20
WORKERS = max(1, min(4, os.cpu_count() or 1))  # blocks parsed at once (each a few tens of MB of frames)
LEVELS = "ERROR|WARNING|INFO|DEBUG|EVENT|TRACE"
_TS = r"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)"
_HMS = r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
# Lines that may be plog headers: parsed by position, checked, and the rest sent through PLOG_RX.
PLOG_START = rf"^\[(?:{LEVELS})\] ?[A-Z][A-Z0-9_]*\(\d+,"
PLOG_RX = (
    rf"^\[(?P<level>{LEVELS})\]\s?(?P<module>[A-Z][A-Z0-9_]*)\((?P<pid>\d+),(?P<pname>[^)]*)\):{_TS}[- ]{_HMS}"
    r"\.(?P<ms>\d{3})\.(?P<us>\d{3})\s*(?:\[status:\w+\]\s*)?\[(?P<src>[^\]\s]+?:\d+)\](?P<body>.*)$"
)
_LEVEL_TAG = rf"\[(?:{LEVELS})\]"
GLUED = rf"(\S)(\[(?:{LEVELS})\]\s?[A-Z][A-Z0-9_]*\(\d+,[^)]*\):\d{{4}}-)"
PREFIX_RX = (
    r"^(?P<pfile>[^\s:\[\]()]+\.log:)?(?:\((?P<actor>[^()]{1,80}?) pid=(?P<apid>\d+)(?:, ip=[^)]*)?\)\s)?"
    r"(?:\[?rank(?P<trank>\d+)\]: ?)?(?:(?P<vlevel>ERROR|WARNING|INFO|DEBUG|CRITICAL) (?:(?P<Y>\d{4})-)?"
    r"(?P<M>\d\d)-(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))? \[?[\w./-]+:\d+\] ?)?"
    r"(?P<rest>.*)$"
)
_PREFIXED = (
    r"^(?:[^\s:\[\]()]+\.log:|\([^()]{1,80}? pid=\d+|\[?rank\d+\]:|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d)"
)
_EM_TS = rf"{_TS}-{_HMS}\.(?P<ms>\d{{3}})\.(?P<us>\d{{3}})"
# Console record forms, tried in order on the prefix-stripped line; the groups they may have are the columns.
FORMS: tuple[tuple[str, str], ...] = (
    ("pta", rf"^\[(?P<level>ERROR|WARNING|INFO)\] {_TS}-{_HMS} \(PID:(?P<pid>\d+), Device:(?P<dev>-?\d+), "
            r"RankID:(?P<rank>-?\d+)\) (?P<code>ERR\d{5}) ?(?P<msg>.*)$"),
    ("em", rf"^(?P<code>[EWI][0-9A-Z]\d{{4}})(?:[:\s]\s*(?:\[PID: ?(?P<pid>\d+)\]\s*)?|\[PID: ?(?P<pid2>\d+)\]\s*)"
           rf"(?:{_EM_TS}\s*)?(?P<msg>.*)$"),
    ("em_title", rf"^\[PID: ?(?P<pid>\d+)\] {_EM_TS} (?P<msg>.*)$"),
    ("c10", r"^\[(?P<level>[WEI])(?:\d{3,4} \d\d:\d\d:\d\d\.\d+)? ?(?P<src>[\w./-]+:\d+)\] (?:Warning: )?(?P<msg>.*)$"),
    ("glog", r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<tid>\d+) (?P<src>[^\s\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("mindie", rf"^\[{_TS} {_HMS}[.,](?P<f>\d+)\] \[(?P<level>[A-Za-z]+)\] \[(?P<tid>\d+)\] \[(?P<src>[^\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("pylog", rf"^\[{_TS} {_HMS}[.,](?P<f>\d+)\] (?P<module>[\w.]+): \[(?P<level>[A-Z]+)\] ?(?P<msg>.*)$"),
    ("pylog2", rf"^{_TS} {_HMS}[.,](?P<f>\d+) - (?P<module>\S+) - (?P<level>[A-Z]+) - (?P<msg>.*)$"),
    ("paddle", r"^\[(?P<level>[WEIF]) +\d+/ ?\d+ \d\d:\d\d:\d\d\.\d+ (?P<src>\S+:\d+)[^\]]*\] ?(?P<msg>.*)$"),
    ("vllm", rf"^(?P<level>ERROR|WARNING|INFO|DEBUG) {_TS} {_HMS}[.,](?P<f>\d+) \[(?P<src>[^\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("bracket", r"^\[(?P<level>(?i:error|warning|warn|info|debug))\]:? ?(?P<msg>.*)$"),
    ("colon", r"^(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+(?P<msg>.*)$"),
    ("pyexc", r"^(?P<module>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?:: (?P<msg>.*))?$"),
    ("pywarn", r"^(?P<src>\S+\.py:\d+): (?P<module>\w*Warning): (?P<msg>.*)$"),
    ("traceback", r"^(?P<msg>Traceback \(most recent call last\):.*)$"),
)  # fmt: skip
FORM_LEVEL = {"pyexc": "ERROR", "pywarn": "WARNING"}
CONT = r"^(?:\s|TraceBack \(most recent call last\)|Possible Cause|Solution:|\^)|\[FUNC:\w+\]\[FILE:"
TID_RX = r"^(?P<pre>\s*(?:\[(?P<t1>\d+)\]|(?P<t2>\d+) ?|>>> \(tid:(?P<t3>\d+)\)\s*|tid:(?P<t4>\d+),|(?P<dl>\[\w+\])\[tid:(?P<t5>\d+)\]))"
CODES = (  # in priority order; the first found is the record's code
    ("lead", r"(?:^|RecentErrMsg: |Warning: )(?P<x>[EWI][0-9A-Z]\d{4})[:\[ ]"),
    ("title", r"\((?P<x>[EWI][0-9A-Z]\d{4})\):"),
    ("pta", r"\b(?P<x>ERR\d{5})\b"),
    ("module", r"module_name=(?P<x>E[0-9A-Z]\d{4})"),
    (
        "rc",
        r"(?:error code is |error code ?[:=] ?|ErrCode=|failed ?: ?|runtime result = |result = )(?P<x>\d{6})\b",
    ),
)
RANK_RX = r"(?:RankID:|rankId\[|(?:^|[^\w])rank\[)(?P<x>\d+)"
DEVICE_RX = r"(?:Device:|device_id=|dev_id=|deviceLogicId\[|deviceId\[|\(NPU |device\()(?P<x>\d+)[,;)\]\s]"
LEVEL_TAGS = {"ER": "ERROR", "WA": "WARNING", "IN": "INFO", "DE": "DEBUG", "EV": "EVENT", "TR": "TRACE"}
LEVEL_NAMES = {"W": "WARNING", "E": "ERROR", "I": "INFO", "F": "ERROR", "D": "DEBUG", "WARN": "WARNING",
               "CRITICAL": "ERROR", "FATAL": "ERROR"}  # fmt: skip
PREFIX_FIELDS = {"p_level": pl.String, "p_ts": pl.Int64, "p_rank": pl.Int32, "p_pid": pl.Int64}
_PLOG_NAME = re.compile(r"^(?:plog|device)-(?:app-)?(\d+)_\d{14,17}\.log$")
_DEVICE_DIR = re.compile(r"^device-(\d+)$")
COLUMNS = {
    "run_id": pl.Int64, "file_id": pl.Int64, "record_no": pl.Int64, "line_no": pl.Int64, "line_count": pl.Int32,
    "ts_ns": pl.Int64, "level": pl.String, "module": pl.String, "pid": pl.Int64, "tid": pl.Int64,
    "process_name": pl.String, "device_id": pl.Int32, "rank": pl.Int32, "source_loc": pl.String, "code": pl.String,
    "message": pl.String, "raw": pl.String, "category": pl.String, "rule_id": pl.String, "severity": pl.String,
}  # fmt: skip
LINE_FIELDS = {"level": pl.String, "module": pl.String, "pid": pl.Int64, "tid": pl.Int64, "pname": pl.String,
               "src": pl.String, "ts_ns": pl.Int64, "msg": pl.String, "code": pl.String, "dev": pl.Int32,
               "rank": pl.Int32, "form": pl.String}  # fmt: skip


# -- rules ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    id: str
    category: str
    severity: str
    role: str
    pattern: str
    codes: tuple[str, ...]
    levels: tuple[str, ...]
    explanation: str
    fix: str


@lru_cache(maxsize=4)
def load_rules(path: Path = RULES_PATH) -> tuple[Rule, ...]:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    return tuple(
        Rule(
            r["id"],
            r["category"],
            r["severity"],
            r.get("role", "cause"),
            r.get("pattern", ""),
            tuple(str(c) for c in r.get("codes", ())),
            tuple(r.get("levels", ())),
            r["explanation"],
            r["fix"],
        )
        for r in data["rule"]
    )


def _rule_condition(rule: Rule) -> pl.Expr:
    cond = pl.lit(False)
    if rule.pattern:
        cond = pl.col("raw").str.contains(rule.pattern)
    if rule.codes:
        cond = cond | pl.col("code").is_in(list(rule.codes)).fill_null(False)
    if not rule.pattern and not rule.codes:
        cond = pl.lit(True)
    if rule.levels:
        cond = cond & pl.col("level").is_in(list(rule.levels)).fill_null(False)
    return cond


def classify(records: pl.DataFrame, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """Add rule_id / category / severity: the first matching rule, tried only where any rule can match."""
    combined = "|".join(f"(?:{r.pattern})" for r in rules if r.pattern)
    codes = sorted({c for r in rules for c in r.codes})
    levels = sorted({lv for r in rules if not r.pattern and not r.codes for lv in r.levels})
    maybe = records.select(
        pl.col("raw").str.contains(combined) | pl.col("code").is_in(codes).fill_null(False)
        | pl.col("level").is_in(levels).fill_null(False)
    ).to_series()  # fmt: skip
    idx = np.zeros(records.height, dtype=np.int64)  # 0 = no rule, i + 1 = rules[i]
    left = np.flatnonzero(maybe.fill_null(False).to_numpy())
    sub = records[left]
    for i, rule in enumerate(rules, start=1):  # first match wins: each rule sees what the ones above left
        if not len(left):
            break
        hit = sub.select(_rule_condition(rule)).to_series().fill_null(False).to_numpy()
        if hit.any():
            idx[left[hit]] = i
            left, sub = left[~hit], sub.filter(pl.Series(~hit))
    take = pl.Series(idx)

    def column(values: list[str]) -> pl.Series:
        return pl.Series([None, *values], dtype=pl.String).gather(take)

    return records.with_columns(
        rule_id=column([r.id for r in rules]),
        category=column([r.category for r in rules]),
        severity=column([r.severity for r in rules]),
    )


# -- detection -----------------------------------------------------------------------------------------------
_STRONG = re.compile(
    rf"\[(?:{LEVELS})\]\s?[A-Z][A-Z0-9_]*\(\d+,[^)\n]*\):\d{{4}}-\d\d-\d\d[- ]\d\d:\d\d:\d\d\.\d{{3}}\.\d{{3}}"
    r"|(?:^|[\s:])[EWI][0-9A-Z]\d{4}(?:: (?:Inner Error|\[PID: ?\d+\]|\d{4}-\d\d-\d\d-)|\[PID: ?\d+\]|  +\[)"
    r"|\[PID: ?\d+\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} [\w -]+\([EWI][0-9A-Z]\d{4}\):"
    r"|\(PID:\d+, Device:-?\d+, RankID:-?\d+\) ERR\d{5}|\[W(?:\d{3,4} [\d:.]+)? ?[\w./-]+:\d+\] Warning: "
    r"|NPU out of memory\. Tried to allocate|will fall back to run on the CPU|(?:NPU|OPS|HCCL) function error: "
    r"|GetWorkspaceSize not in libopapi|Unsupported soc version: |does not hit the high-priority operator"
    r"|The (?:error|extend info) from device\(|\[FUNC:\w+\]\[FILE:[\w.]+\]\[LINE:\d+\]",
    re.M,
)
_WEAK = re.compile(
    r"\b(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\b|^Traceback \(most recent call last\)|^\w[\w.]*(?:Error|Exception): "
    r"|^[IWEF]\d{4} \d\d:\d\d:\d\d|^\[?\d{4}-\d\d-\d\d[ T-]\d\d:\d\d:\d\d|\btorch|\bNPU\b",
    re.M,
)
_JSON_START = re.compile(r'\s*(?:\{|\[\s*(?:\{|"|\[|\]))')
_NOT_LOGS = {
    ".csv",
    ".json",
    ".jsonl",
    ".py",
    ".md",
    ".html",
    ".htm",
    ".xml",
    ".yaml",
    ".yml",
    ".toml",
    ".db",
}
_LOG_NAMES = re.compile(r"(?i)(?:^(?:plog|device)-.*|\.(?:log|txt|out|err|stdout|stderr))$")


def _looks_binary(head: bytes) -> bool:
    sample = head[:65536]
    if not sample:
        return False
    ctrl = sum(sample.count(bytes([b])) for b in (*range(0, 9), 11, 12, *range(14, 27), *range(28, 32)))
    return ctrl > max(4, len(sample) // 100)


def detect(probe: Probe) -> bool:
    """Claims text with CANN / torch_npu log lines; a ``*.log``-like name lowers the bar to any log-ish line."""
    if probe.path.suffix.lower() in _NOT_LOGS or _looks_binary(probe.head):
        return False
    text = probe.text
    if _JSON_START.match(text):
        return False
    if _STRONG.search(text):
        return True
    return bool(_LOG_NAMES.search(probe.name) and _WEAK.search(text))


# -- one block of lines → one row per line with its fields ---------------------------------------------------
def _ts_ns(cols: set[str]) -> pl.Expr:
    """Local time as if UTC, ns, from the Y M D h m s (+ f | ms us) groups of a form; NULL without a year."""
    if "Y" not in cols:
        return pl.lit(None, pl.Int64)
    stamp = pl.concat_str(
        [pl.col("Y"), pl.lit("-"), pl.col("M"), pl.lit("-"), pl.col("D"), pl.lit(" "),
         pl.col("h"), pl.lit(":"), pl.col("m"), pl.lit(":"), pl.col("s")]
    )  # fmt: skip
    base = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="ns", strict=False, cache=True).cast(pl.Int64)
    if "ms" in cols:
        frac = (
            pl.col("ms").cast(pl.Int64, strict=False) * 1_000_000
            + pl.col("us").cast(pl.Int64, strict=False) * 1000
        )
    elif "f" in cols:
        frac = pl.col("f").str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64, strict=False)
    else:
        frac = pl.lit(0, pl.Int64)
    return base + frac.fill_null(0)


def _conform(df: pl.DataFrame) -> pl.DataFrame:
    """Keep the line columns and LINE_FIELDS (missing ones as NULL), typed."""
    have = set(df.columns)
    cols = {
        "ord": pl.UInt32,
        "line_no": pl.Int64,
        "l": pl.String,
        "c": pl.String,
        **PREFIX_FIELDS,
        **LINE_FIELDS,
    }
    return df.select(
        (pl.col(n).cast(t, strict=False) if n in have else pl.lit(None, t)).alias(n) for n, t in cols.items()
    )


def _plog_fast(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Plog headers by position (a third of the cost of a capturing regex), checked by what they parse to.

    Returns the parsed lines and those that did not parse (non-ASCII before the body, a missing field…)
    for the regex path.
    """
    line, p1, p2, pc, p3 = pl.col("l"), pl.col("p1"), pl.col("p2"), pl.col("pc"), pl.col("p3")
    df = df.with_columns(
        p1=line.str.find("]", literal=True), p2=line.str.find("(", literal=True),
        pc=line.str.find(",", literal=True), p3=line.str.find("):", literal=True),
    )  # fmt: skip
    stamp = line.str.slice(p3 + 2, 19)
    frac = (
        line.str.slice(p3 + 22, 3).cast(pl.Int64, strict=False) * 1_000_000
        + line.str.slice(p3 + 26, 3).cast(pl.Int64, strict=False) * 1000
    )
    df = df.with_columns(
        level=line.str.slice(1, 2).replace_strict(LEVEL_TAGS, default=None),
        module=line.str.slice(p1 + 1, p2 - p1 - 1).str.strip_chars_start(" "),
        pid=line.str.slice(p2 + 1, pc - p2 - 1).cast(pl.Int64, strict=False),
        pname=line.str.slice(pc + 1, p3 - pc - 1),
        ts_ns=stamp.str.to_datetime("%Y-%m-%d-%H:%M:%S", time_unit="ns", strict=False, cache=True).cast(
            pl.Int64
        )
        + frac,
        rest=line.str.slice(p3 + 29).str.strip_chars_start(" "),
    )
    if df["ts_ns"].null_count():  # TorchAir writes a space between date and time
        spaced = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="ns", strict=False, cache=True)
        df = df.with_columns(ts_ns=pl.coalesce(pl.col("ts_ns"), spaced.cast(pl.Int64) + frac))
    if df["rest"].str.starts_with("[status:").any():
        df = df.with_columns(rest=pl.col("rest").str.replace(r"^\[status:\w+\] *", ""))
    p5 = pl.col("rest").str.find("]", literal=True)
    df = df.with_columns(src=pl.col("rest").str.slice(1, p5 - 1), body=pl.col("rest").str.slice(p5 + 1))
    ok = (
        pl.col("ts_ns").is_not_null() & pl.col("level").is_not_null() & pl.col("pid").is_not_null()
        & (pl.col("p3") > pl.col("pc")) & pl.col("rest").str.starts_with("[") & pl.col("src").str.contains(r":\d+$")
    )  # fmt: skip
    good = df.filter(ok)
    return _split_body(good.with_columns(c=line)), df.filter(~ok).select(["ord", "line_no", "l"])


def _split_body(df: pl.DataFrame) -> pl.DataFrame:
    """The thread id from the module-specific start of a plog body; the rest is the message."""
    x = pl.col("body").str.extract_groups(TID_RX)
    df = df.with_columns(x=x)
    tid = pl.coalesce([pl.col("x").struct.field(f"t{i}") for i in range(1, 6)]).cast(pl.Int64, strict=False)
    msg = pl.col("body").str.slice(pl.col("x").struct.field("pre").str.len_chars().fill_null(0))
    dl = pl.col("x").struct.field("dl")
    return _conform(
        df.with_columns(
            tid=tid, msg=pl.when(dl.is_not_null()).then(dl + msg).otherwise(msg), form=pl.lit("plog")
        )
    )


def _strip_prefixes(df: pl.DataFrame) -> pl.DataFrame:
    """vLLM / Ray actor, torchrun rank, vLLM logger and grep file prefixes → p_* columns and the content c."""
    prefixed = df["l"].str.contains(_PREFIXED)
    plain = df.filter(~prefixed).with_columns(c=pl.col("l"))
    if not prefixed.any():
        return _conform(plain)
    x = df.filter(prefixed).with_columns(x=pl.col("l").str.extract_groups(PREFIX_RX)).unnest("x")
    cols = set(x.columns)
    x = x.with_columns(
        c=pl.col("rest"),
        p_level=pl.col("vlevel"),
        p_ts=_ts_ns(cols),
        p_rank=pl.coalesce(pl.col("trank"), pl.col("actor").str.extract(r"rank=(\d+)", 1)).cast(
            pl.Int32, strict=False
        ),
        p_pid=pl.coalesce(pl.col("apid"), pl.col("pfile").str.extract(r"(?:plog|device)-(\d+)_", 1)).cast(
            pl.Int64, strict=False
        ),
    )
    return pl.concat([_conform(plain), _conform(x)])


def _forms(df: pl.DataFrame) -> list[pl.DataFrame]:
    """Each line by the first console form (or a prefixed plog header) its content matches."""
    c = pl.col("c")
    which = pl.when(c.str.contains(PLOG_RX)).then(pl.lit("plog"))
    for name, rx in FORMS:
        which = which.when(c.str.contains(rx)).then(pl.lit(name))
    df = df.select("ord", "line_no", "l", "c", *PREFIX_FIELDS).with_columns(
        form=which.otherwise(pl.lit(None, pl.String))
    )
    parts = [_conform(df.filter(pl.col("form").is_null()).with_columns(msg=c).drop("form"))]
    for name, rx in (("plog", PLOG_RX), *FORMS):
        sub = df.filter(pl.col("form") == name)
        if sub.is_empty():
            continue
        sub = sub.drop("form").with_columns(x=c.str.extract_groups(rx)).unnest("x")
        if name == "plog":
            parts.append(_split_body(sub.with_columns(ts_ns=_ts_ns(set(sub.columns)))))
            continue
        parts.append(_conform(_console_fields(sub, name)))
    return parts


def _console_fields(sub: pl.DataFrame, name: str) -> pl.DataFrame:
    cols = set(sub.columns)
    level = pl.col("level").str.to_uppercase() if "level" in cols else pl.lit(FORM_LEVEL.get(name), pl.String)
    level = level.replace(LEVEL_NAMES)
    pid = pl.coalesce([pl.col(p) for p in ("pid", "pid2") if p in cols]) if "pid" in cols else pl.lit(None)
    msg = pl.col("c") if name == "pyexc" or "msg" not in cols else pl.coalesce(pl.col("msg"), pl.col("c"))
    sub = sub.with_columns(level=level, pid=pid, msg=msg, ts_ns=_ts_ns(cols), form=pl.lit(name))
    if "dev" in cols:
        sub = sub.with_columns(
            dev=pl.col("dev").cast(pl.Int32, strict=False), rank=pl.col("rank").cast(pl.Int32, strict=False)
        )
        sub = sub.with_columns(
            dev=pl.when(pl.col("dev") >= 0).then(pl.col("dev")),
            rank=pl.when(pl.col("rank") >= 0).then(pl.col("rank")),
        )
    if "module" in cols and name == "pyexc":
        sub = sub.with_columns(module=pl.lit(None, pl.String))
    return sub


def split_lines(text: str) -> list[str]:
    """The lines of a decoded block: CR LF and LF ends, no trailing empty line (faster than a Polars split)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [x.rstrip("\r") for x in lines] if "\r" in text else lines


def parse_lines(lines: list[str], line0: int) -> pl.DataFrame:
    """One row per non-blank line (glued records split): its fields, and whether it can start a record."""
    df = pl.DataFrame({"line_no": np.arange(line0, line0 + len(lines), dtype=np.int64), "l": lines})
    if (df["l"].str.count_matches(_LEVEL_TAG) > 1).any():
        df = df.with_columns(l=pl.col("l").str.replace_all(GLUED, "${1}\n${2}").str.split("\n")).explode("l")
    df = df.with_row_index("ord").filter(pl.col("l").str.contains(r"\S"))
    fast = df["l"].str.contains(PLOG_START)
    parts, other = [], df.filter(~fast)
    if fast.any():
        parsed, failed = _plog_fast(df.filter(fast))
        parts, other = [parsed], pl.concat([other, failed]) if failed.height else other
    if not other.is_empty():
        parts += _forms(_strip_prefixes(other))
    if not parts:
        return _conform(df.with_columns(c=pl.col("l"))).drop(*PREFIX_FIELDS)
    out = pl.concat(parts).sort("ord")
    return out.with_columns(
        level=pl.coalesce(pl.col("level"), pl.col("p_level")).replace(LEVEL_NAMES),
        ts_ns=pl.coalesce(pl.col("ts_ns"), pl.col("p_ts")),
        rank=pl.coalesce(pl.col("rank"), pl.col("p_rank")),
        pid=pl.coalesce(pl.col("pid"), pl.col("p_pid")),
    ).drop("p_level", "p_ts", "p_rank", "p_pid")


# -- lines → records -----------------------------------------------------------------------------------------
CODE_ANY = "|".join(rx.replace("(?P<x>", "(") for _, rx in CODES)


def mark_starts(lines: pl.DataFrame, plog_mode: bool) -> pl.DataFrame:
    """A recognised header starts a record; in a console capture so does any line that is not a continuation."""
    start = pl.col("form").is_not_null()
    if not plog_mode:
        start = start | ~pl.col("c").str.contains(CONT)
    return lines.with_columns(start=start)


def group_records(lines: pl.DataFrame) -> pl.DataFrame:
    """Records from lines with a ``start`` flag: the first line's fields, the raw text, continuation in msg.

    ``rec`` numbers the records from 0 in file order; only the lines of multi-line records are grouped.
    """
    start = pl.col("start") | (pl.int_range(pl.len()) == 0)
    lines = lines.with_columns(start=start).with_columns(rec=pl.col("start").cum_sum().cast(pl.Int64) - 1)
    single = pl.col("start") & pl.col("start").shift(-1, fill_value=True)
    one = lines.filter(single).with_columns(raw=pl.col("l"), last_line=pl.col("line_no"))
    if one.height == lines.height:
        return one
    firsts = [pl.col(c).first() for c in ("line_no", *LINE_FIELDS)]
    multi = (
        lines.filter(~single)
        .group_by("rec", maintain_order=True)
        .agg(
            *firsts,
            raw=pl.col("l").str.join("\n"),
            more=pl.col("c").slice(1).str.join("\n"),
            last_line=pl.col("line_no").last(),
        )
    )
    more = pl.col("more")
    multi = multi.with_columns(
        msg=pl.when(more != "").then(pl.col("msg") + "\n" + more).otherwise(pl.col("msg"))
    )
    keep = ["rec", "line_no", *LINE_FIELDS, "raw", "last_line"]
    return pl.concat([one.select(keep), multi.select(keep)])


def enrich(rec: pl.DataFrame, file_pid: int | None, file_device: int | None) -> pl.DataFrame:
    """Error code (first found of CODES), rank and device named in the message; file-name pid / device."""
    msg = pl.col("msg")
    code = rec["code"]
    hits = np.flatnonzero(rec["msg"].str.contains(CODE_ANY).fill_null(False).to_numpy())
    if len(hits):
        found = rec[hits].select(pl.coalesce(pl.col("code"), *[msg.str.extract(rx, 1) for _, rx in CODES]))
        code = code.scatter(hits, found.to_series())
    letter = code.str.extract(r"^([EWI])[0-9A-Z]\d{4}$", 1).replace(
        {"E": "ERROR", "W": "WARNING", "I": "INFO"}
    )
    return rec.with_columns(
        code=code,
        level=pl.coalesce(pl.col("level"), letter),
        rank=pl.coalesce(pl.col("rank"), msg.str.extract(RANK_RX, 1).cast(pl.Int32, strict=False)),
        dev=pl.coalesce(
            pl.col("dev"),
            msg.str.extract(DEVICE_RX, 1).cast(pl.Int32, strict=False),
            pl.lit(file_device, pl.Int32),
        ),
        pid=pl.coalesce(pl.col("pid"), pl.lit(file_pid, pl.Int64)),
        pname=pl.when(pl.col("pname") != "").then(pl.col("pname")),
    )


def to_table(rec: pl.DataFrame, run_id: int | None, file_id: int, record0: int) -> pa.Table:
    out = rec.with_columns(
        run_id=pl.lit(run_id, pl.Int64),
        file_id=pl.lit(file_id, pl.Int64),
        record_no=pl.col("rec") + (record0 + 1),  # the insert adds the records of the blocks before
        line_count=(pl.col("last_line") - pl.col("line_no") + 1).cast(pl.Int32),
        process_name=pl.col("pname"),
        device_id=pl.col("dev"),
        source_loc=pl.col("src"),
        message=pl.col("msg"),
    )
    return out.select(pl.col(c).cast(t) for c, t in COLUMNS.items()).to_arrow()


# -- reading -------------------------------------------------------------------------------------------------
@dataclass
class _Text:
    """What decoding saw: notes for the ingest summary."""

    encoding: str = "utf-8"
    nul_bytes: int = 0
    replaced: bool = False
    truncated_last_line: bool = False


def _decode(raw: bytes, seen: _Text) -> str:
    if b"\x00" in raw:  # a writer killed mid-block leaves NUL padding: drop it, keep the text
        seen.nul_bytes += raw.count(b"\x00")
        raw = raw.replace(b"\x00", b"")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:  # logs on Chinese systems are often GBK (a subset of GB18030)
        text = raw.decode("gb18030")
        seen.encoding = "gb18030"
        return text
    except UnicodeDecodeError:
        seen.replaced = True
        return raw.decode("utf-8", errors="replace")


_RECORD_CUT = re.compile(rf"\n(?=\[(?:{LEVELS})\] ?[A-Z][A-Z0-9_]*\(\d+,)".encode())
_LINE_CUT = re.compile(rb"\n(?=\S)")


def _cut(data: bytes) -> int:
    """Where the last record of a block surely starts (before a plog header, else before an unindented
    line); 0 when the block holds no such place, and then, past MAX_LINE_BYTES, the last line end."""
    tail = max(0, len(data) - (1 << 20))
    for rx in (_RECORD_CUT, _LINE_CUT):
        last = None
        for last in rx.finditer(data, tail):  # noqa: B007 - the last match is the one wanted
            pass
        if last is not None and last.start() > 0:
            return last.start() + 1
    return data.rfind(b"\n") + 1 if len(data) >= MAX_LINE_BYTES else 0


def read_chunks(path: Path, display: str, seen: _Text) -> Iterator[bytes]:
    """Blocks of whole records (a block ends just before a line that starts a record), BOM removed."""
    pending = b""
    with open(path, "rb") as fh:
        first = True
        while True:
            chunk = fh.read(BLOCK_BYTES)
            data = pending + chunk
            if first:
                if _looks_binary(data[:65536]):
                    raise BadInputError(display, "binary content (control bytes), not a text log")
                data, first = data.removeprefix(b"\xef\xbb\xbf"), False
            if len(chunk) < BLOCK_BYTES:  # the end of the file
                if data:
                    seen.truncated_last_line = not data.endswith(b"\n")
                    yield data
                return
            cut = _cut(data)
            if cut <= 0 and len(data) < MAX_LINE_BYTES:  # the record goes on: read on
                pending = data
                continue
            cut = cut if cut > 0 else len(data)
            pending = data[cut:]
            yield data[:cut]


# -- the parser ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _File:
    """What every block of a file is parsed with."""

    run_id: int | None
    file_id: int
    pid: int | None  # from plog-<pid>_<ts>.log / device-<pid>_<ts>.log
    device: int | None  # from a device-<id> folder
    plog_mode: bool  # a plog: a line that is no header continues the record above


def _file_of(ctx: ParseContext, first: bytes) -> _File:
    m = _PLOG_NAME.match(ctx.path.name)
    d = _DEVICE_DIR.match(ctx.path.parent.name)
    head = first[: 1 << 20]
    headers = len(_RECORD_CUT.findall(head)) + bool(re.match(rf"\[(?:{LEVELS})\]".encode(), head))
    plog = m is not None or headers >= 0.5 * max(1, head.count(b"\n"))
    return _File(
        ctx.run_id, ctx.file_id, int(m.group(1)) if m else None, int(d.group(1)) if d else None, plog
    )


def parse_block(data: bytes, line0: int, f: _File) -> tuple[pa.Table, _Text]:
    """One block of whole records → its rows (record_no from 1 within the block) and what decoding saw."""
    seen = _Text()
    parsed = mark_starts(parse_lines(split_lines(_decode(data, seen)), line0), f.plog_mode)
    if parsed.is_empty():  # only blank lines
        return pl.DataFrame(schema=COLUMNS).to_arrow(), seen
    rec = classify(enrich(group_records(parsed), f.pid, f.device), load_rules())
    return to_table(rec, f.run_id, f.file_id, 0), seen


def _tables(ctx: ParseContext, seen: _Text) -> Iterator[pa.Table]:
    """Blocks parsed on WORKERS threads (Polars releases the GIL), yielded in file order."""
    chunks = read_chunks(ctx.path, ctx.display, seen)
    first = next(chunks, b"")
    if not first:
        return
    f, line0 = _file_of(ctx, first), 1
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="cann_log") as pool:
        pending: deque[Future[tuple[pa.Table, _Text]]] = deque()
        for data in itertools.chain([first], chunks):
            pending.append(pool.submit(parse_block, data, line0, f))
            line0 += data.count(b"\n") + (not data.endswith(b"\n"))
            while len(pending) > WORKERS:
                yield _noted(pending.popleft().result(), seen)
        while pending:
            yield _noted(pending.popleft().result(), seen)


def _noted(result: tuple[pa.Table, _Text], seen: _Text) -> pa.Table:
    table, block = result
    if block.encoding != "utf-8":
        seen.encoding = block.encoding
    seen.nul_bytes += block.nul_bytes
    seen.replaced |= block.replaced
    return table


class CannLogParser:
    name = "cann_log"
    version = 1
    platform = "ascend"
    creates_run = False  # a log joins the run of its folder when there is one

    def detect(self, probe: Probe) -> bool:
        return detect(probe)

    def parse(self, ctx: ParseContext) -> ParseResult:
        result, seen = ParseResult(), _Text()
        rows = 0
        for table in _tables(ctx, seen):
            ctx.con.register("_log_batch", table)
            try:  # record numbers run on across blocks
                ctx.con.execute(
                    "INSERT INTO log_records BY NAME SELECT * REPLACE (record_no + ? AS record_no) FROM _log_batch",
                    [rows],
                ).fetchall()
            finally:
                ctx.con.unregister("_log_batch")
            rows += table.num_rows
        if rows == 0:
            raise BadInputError(ctx.display, "no log lines found")
        result.add("log_records", rows)
        if seen.encoding != "utf-8":
            result.notes.append(f"decoded as {seen.encoding}")
        if seen.nul_bytes:
            result.notes.append(f"dropped {seen.nul_bytes} NUL bytes")
        if seen.replaced:
            result.notes.append("bytes that are neither UTF-8 nor GB18030 replaced by U+FFFD")
        if seen.truncated_last_line:
            result.notes.append("last line has no newline (file cut mid-write?)")
        return result


PARSER = CannLogParser()
