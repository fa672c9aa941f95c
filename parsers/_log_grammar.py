"""The grammar of CANN / torch_npu log lines, parsed a block of lines at a time with Polars (see cann_log.py).

Lines → one row per line with its fields (level, module, pid, tid, time, code, rank…) → records (a header line
and the lines that continue it) → an Arrow table in the schema of ``log_records``.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

# defined there: cann_log's detection reads them without Polars
from parsers._log_literals import CAPTURE_BAR, CAPTURE_STAMP, LEVELS

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
# What a capture tool puts before every line it saved, outermost first: "docker compose logs" the container's name and
# a bar ("vllm-server-1  | "), "kubectl logs --timestamps" / "docker logs -t" an RFC 3339 stamp ("2026-02-05T18:00:
# 31.711947123Z "), a web log viewer or CI console a clock time ("18:19:06.687 "), outside or inside the bar. The
# stamps are dropped, not used: they are the capture host's clock (UTC for kubectl), not the process's own stamps, and
# mixing the two would split or merge incident episodes by the zone offset; the container's name is the process when
# nothing inner names one. The line a record keeps (its raw text, what later rules and the evidence read) is the process's.
CAPTURE_PREFIX = rf"(?P<capture>{CAPTURE_STAMP}?(?:(?P<ccontainer>[\w.-]{{1,64}}) +\| )?{CAPTURE_STAMP}?)"
PREFIX_RX = (
    rf"^{CAPTURE_PREFIX}"
    r"(?:(?P<pfile>[^\s:\[\]()]+\.log):)?"
    r"(?:\((?P<porigin>(?P<actor>[^()]{1,80}?) pid=(?P<apid>\d+)(?:, ip=[^)]*)?)\)\s)?"
    r"(?:\[?rank(?P<trank>\d+)\]: ?)?(?:(?P<vlevel>ERROR|WARNING|INFO|DEBUG|CRITICAL) (?:(?P<Y>\d{4})-)?"
    r"(?P<M>\d\d)-(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))? \[?[\w./-]+:\d+\] ?)?"
    r"(?P<rest>.*)$"
)
_PREFIXED = (
    rf"^(?:{CAPTURE_BAR}|{CAPTURE_STAMP}"
    r"|[^\s:\[\]()]+\.log:|\([^()]{1,80}? pid=\d+|\[?rank\d+\]:|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d)"
)
_EM_TS = rf"{_TS}-{_HMS}\.(?P<ms>\d{{3}})\.(?P<us>\d{{3}})"
# glog / c10 stamps carry no year: W1101 02:43:40.706000 (month not zero-padded in c10: W904 = 9/04)
_MD_HMS = r"(?P<M>\d{1,2}?)(?P<D>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<f>\d+)"
_LOGGER_LEVEL = "(?i:debug|info|warning|warn|error|critical|fatal)"
# Console record forms, tried in order on the prefix-stripped line; the groups they may have are the columns.
FORMS: tuple[tuple[str, str], ...] = (
    ("pta", rf"^\[(?P<level>ERROR|WARNING|INFO)\] {_TS}-{_HMS} \(PID:(?P<pid>\d+), Device:(?P<dev>-?\d+), "
            r"RankID:(?P<rank>-?\d+)\) (?P<code>ERR\d{5}) ?(?P<msg>.*)$"),
    ("em", rf"^(?P<code>[EWI][0-9A-Z]\d{{4}})(?:[:\s]\s*(?:\[PID: ?(?P<pid>\d+)\]\s*)?|\[PID: ?(?P<pid2>\d+)\]\s*)"
           rf"(?:{_EM_TS}\s*)?(?P<msg>.*)$"),
    ("em_title", rf"^\[PID: ?(?P<pid>\d+)\] {_EM_TS} (?P<msg>.*)$"),
    ("c10", rf"^\[(?P<level>[WEIF])(?:{_MD_HMS})? ?(?P<src>[\w./-]+:\d+)\] (?:Warning: )?(?P<msg>.*)$"),
    # glog ≥ 0.7 prints the year too ("E20260106 06:43:02.966156  5793 ascend_direct_transport.cpp:820] …", Mooncake)
    ("glog_year", rf"^(?P<level>[IWEF])(?P<Y>\d{{4}})(?P<M>\d\d)(?P<D>\d\d) {_HMS}\.(?P<f>\d+)\s+(?P<tid>\d+) "
                  r"(?P<src>[^\s\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("glog", rf"^(?P<level>[IWEF]){_MD_HMS}\s+(?P<tid>\d+) (?P<src>[^\s\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("mindie", rf"^\[{_TS} {_HMS}[.,](?P<f>\d+)\] \[(?P<level>[A-Za-z]+)\] \[(?P<tid>\d+)\] \[(?P<src>[^\]]+:\d+)\] ?(?P<msg>.*)$"),
    # MindIE service / LLM default layout ("[yyyy-mm-dd hh:mm:ss.uuuuuu][processid] [threadid] [llm] [loglevel][file:line]
    # [error code] msg", as mindie_llm prints it on its first line): "[2025-12-15 15:19:22.681+08:00] [38] [452] [server]
    # [ERROR] [http_server.cpp:163] : [MIE04E02041C] …"; the Python side writes "[logging.py-348]"
    ("mindie_service", rf"^\[{_TS} {_HMS}[.,](?P<f>\d+)(?:[+-]\d\d:?\d\d)?\] ?\[(?P<pid>\d+)\] ?\[(?P<tid>\d+)\] ?"
                       r"\[(?P<module>\w+)\] ?\[(?P<level>(?i:error|warning|warn|info|debug|critical|fatal))\] ?"
                       r"\[(?P<src>[^\]\s]+[:-]\d+)\] ?:? ?(?P<msg>.*)$"),
    # MindIE Service 1.0's mindservice.log, whose first lines state it: "Log default format: yyyy-mm-dd
    # hh:mm:ss.uuuuuu threadid loglevel msg" — "2024-07-01 10:59:22.535626 460279 error infer_engine_inner.cc:257]
    # Engine init config manager falied."
    ("mindie_tid", rf"^{_TS} {_HMS}\.(?P<f>\d{{6}}) (?P<tid>\d+) (?P<level>(?i:trace|debug|info|warning|warn|error|critical|fatal)) "
                   r"(?:(?P<src>[^\s\]]+:\d+)\] ?)?(?P<msg>.*)$"),
    ("pylog", rf"^\[{_TS} {_HMS}[.,](?P<f>\d+)\] (?P<module>[\w.]+): \[(?P<level>[A-Z]+)\] ?(?P<msg>.*)$"),
    # Python logging "%(asctime)s - %(levelname)s - %(name)s - %(message)s" (vLLM-Ascend 0.7's model runner)
    ("pylog3", rf"^{_TS} {_HMS}(?:[.,](?P<f>\d+))? - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?P<module>\S+) - "
               r"(?P<msg>.*)$"),
    # "%(asctime)s - %(name)s - %(levelname)s - %(message)s", with or without the milliseconds and a zone offset
    # (GPUStack: "2025-07-18 09:55:21.916582+00:00 - gpustack.worker.backends.base - INFO - …")
    ("pylog2", rf"^{_TS} {_HMS}(?:[.,](?P<f>\d+))?(?:[+-]\d\d:?\d\d)? - (?P<module>\S+) - (?P<level>[A-Z]+) - "
               r"(?P<msg>.*)$"),
    ("paddle", r"^\[(?P<level>[WEIF]) +\d+/ ?\d+ \d\d:\d\d:\d\d\.\d+ (?P<src>\S+:\d+)[^\]]*\] ?(?P<msg>.*)$"),
    ("pybracket", rf"^\[{_TS}[ T]{_HMS}(?:[.,](?P<f>\d+))?\]\s*\[(?P<level>{_LOGGER_LEVEL})\]:?\s*(?P<msg>.*)$"),
    ("tsfirst", rf"^{_TS}[ T]{_HMS}(?:[.,](?P<f>\d+))?\s+(?:\|\s*|\[)?(?P<level>{_LOGGER_LEVEL})(?:\]|\b)\s*[|:-]?\s*"
                r"(?P<msg>.*)$"),
    # SGLang's own layout ("[%(asctime)s%(prefix)s] %(message)s": "[2025-11-30 11:18:01] …", the worker's parallel
    # ranks in the prefix "[2025-07-02 07:41:58 DP0 TP0] …"): its time, and the level where the line prints one.
    # (Not Ray's C++ layout "[… E pid tid] file:line:": its E level is also on every line of a native stack dump,
    # which would then outrank the crash it belongs to.)
    ("sglang", rf"^\[{_TS} {_HMS}(?:[.,](?P<f>\d+))?(?: (?:DP|TP|PP|EP|CP|MTP)\d+)*\] "
               r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: (?P<src>[\w./-]+\.py:\d+))?:\s+)?(?P<msg>.*)$"),
    ("pyroot", rf"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<module>[\w.-]*):\s?(?:{_EM_TS}\s*)?(?P<msg>.*)$"),
    ("vllm", rf"^(?P<level>ERROR|WARNING|INFO|DEBUG) {_TS} {_HMS}[.,](?P<f>\d+) \[(?P<src>[^\]]+:\d+)\] ?(?P<msg>.*)$"),
    ("recent", rf"^\[(?P<level>ERROR|WARNING)\] RecentErrMsg: (?:\[PID: ?(?P<pid>\d+)\]\s*)?(?:{_EM_TS}\s*)?(?P<msg>.*)$"),
    ("bracket", r"^\[(?P<level>(?i:error|warning|warn|info|debug))\]:? ?(?P<msg>.*)$"),
    ("colon", r"^(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+(?P<msg>.*)$"),
    ("pyexc", r"^(?P<module>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?:: (?P<msg>.*))?$"),
    ("pywarn", r"^(?P<src>\S+\.py:\d+): (?P<module>\w*Warning): (?P<msg>.*)$"),
    ("traceback", r"^(?P<msg>Traceback \(most recent call last\):.*)$"),
)  # fmt: skip
FORM_LEVEL = {"pyexc": "ERROR", "pywarn": "WARNING"}
CONT = r"^(?:\s|TraceBack \(most recent call last\)|Possible Cause|Solution:|\^)|\[FUNC:\w+\]\[FILE:"
TID_RX = r"^(?P<pre>\s*(?:\[(?P<t1>\d+)\]|(?P<t2>\d+) ?|>>> \(tid:(?P<t3>\d+)\)\s*|tid:(?P<t4>\d+),|(?P<dl>\[\w+\])\[tid:(?P<t5>\d+)\]))"
RANK_RX = r"(?:RankID:|rankId\[|(?:^|[^\w])rank\[)(?P<x>\d+)"
DEVICE_RX = r"(?:Device:|device_id=|dev_id=|deviceLogicId\[|deviceId\[|\(NPU |device\()(?P<x>\d+)[,;)\]\s]"
LEVEL_TAGS = {"ER": "ERROR", "WA": "WARNING", "IN": "INFO", "DE": "DEBUG", "EV": "EVENT", "TR": "TRACE"}
LEVEL_NAMES = {"W": "WARNING", "E": "ERROR", "I": "INFO", "F": "ERROR", "D": "DEBUG", "WARN": "WARNING",
               "CRITICAL": "ERROR", "FATAL": "ERROR"}  # fmt: skip
PREFIX_FIELDS = {"p_level": pl.String, "p_ts": pl.Int64, "p_rank": pl.Int32, "p_pid": pl.Int64,
                 "p_origin": pl.String, "p_ny": pl.String, "p_nyf": pl.Int64, "p_container": pl.String}  # fmt: skip
COLUMNS = {
    "run_id": pl.Int64, "file_id": pl.Int64, "record_no": pl.Int64, "line_no": pl.Int64, "line_count": pl.Int32,
    "ts_ns": pl.Int64, "level": pl.String, "module": pl.String, "pid": pl.Int64, "tid": pl.Int64,
    "process_name": pl.String, "device_id": pl.Int32, "rank": pl.Int32, "source_loc": pl.String, "code": pl.String,
    "origin": pl.String, "codes": pl.List(pl.String), "figures": pl.String, "message": pl.String, "raw": pl.String, "category": pl.String, "rule_id": pl.String, "severity": pl.String,
}  # fmt: skip
LINE_FIELDS = {"level": pl.String, "module": pl.String, "pid": pl.Int64, "tid": pl.Int64, "pname": pl.String,
               "src": pl.String, "ts_ns": pl.Int64, "msg": pl.String, "code": pl.String, "dev": pl.Int32,
               "rank": pl.Int32, "form": pl.String, "origin": pl.String, "line_src": pl.String,
               "ny": pl.String, "nyf": pl.Int64}  # fmt: skip


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


def _yearless(cols: set[str]) -> tuple[pl.Expr, pl.Expr]:
    """A stamp without a year (vLLM, glog, c10) as 'MM-DD hh:mm:ss' and its fraction in ns; the record gets its
    year later, from a dated record of the same origin (see _log_records.with_years)."""
    if "M" not in cols or "h" not in cols:
        return pl.lit(None, pl.String), pl.lit(None, pl.Int64)
    month = pl.col("M").str.pad_start(2, "0")
    stamp = pl.concat_str([month, pl.lit("-"), pl.col("D"), pl.lit(" "), pl.col("h"), pl.lit(":"), pl.col("m"),
                           pl.lit(":"), pl.col("s")])  # fmt: skip
    if "Y" in cols:
        stamp = pl.when(pl.col("Y").is_null()).then(stamp)
    frac = (
        pl.col("f").str.pad_end(9, "0").str.slice(0, 9).cast(pl.Int64, strict=False) if "f" in cols else None
    )
    return stamp, (frac if frac is not None else pl.lit(0, pl.Int64)).fill_null(0)


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
    ny, nyf = _yearless(cols)
    x = x.with_columns(
        l=pl.col("l").str.slice(pl.col("capture").str.len_chars()),
        c=pl.col("rest"),
        p_level=pl.col("vlevel"),
        p_ts=_ts_ns(cols),
        p_ny=ny,
        p_nyf=nyf,
        p_origin=pl.coalesce(  # the outermost prefix names the process (ORIGINS in _log_records)
            pl.col("porigin").str.replace_all(r"\s+", " "),
            pl.lit("rank") + pl.col("trank"),
            pl.col("pfile"),
        ),
        p_container=pl.col("ccontainer"),
        p_rank=pl.coalesce(pl.col("trank"), pl.col("actor").str.extract(r"rank=(\d+)", 1)).cast(
            pl.Int32, strict=False
        ),
        p_pid=pl.coalesce(pl.col("apid"), pl.col("pfile").str.extract(r"(?:plog|device)-(\d+)_", 1)).cast(
            pl.Int64, strict=False
        ),
    )
    # a line the capture tool saved empty ("vllm-server-1  | ") is a blank line of the process: dropped, so that
    # it breaks a block of lines as the bare blank line does; a line whose inner prefix is left (vLLM's logger
    # prints "ERROR … engine.py:389]" for an empty line of the traceback it logs) is a line of that message, kept
    inner = ("pfile", "porigin", "trank", "vlevel")
    only_capture = pl.all_horizontal(pl.col(c).is_null() | (pl.col(c) == "") for c in inner if c in cols)
    x = x.filter(pl.col("rest").str.contains(r"\S") | ~only_capture)
    # a stamp aligned by two spaces ("11:05:31.652  PrintTaskErrorMsg: …") leaves one: not an indented
    # continuation line (those are indented by tabs or several spaces, Python's frames by two)
    aligned = only_capture & (pl.col("capture") != "") & pl.col("rest").str.contains(r"^ \S")
    x = x.with_columns(
        l=pl.when(aligned).then(pl.col("l").str.slice(1)).otherwise(pl.col("l")),
        c=pl.when(aligned).then(pl.col("c").str.slice(1)).otherwise(pl.col("c")),
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
    ny, nyf = _yearless(cols)
    sub = sub.with_columns(
        level=level, pid=pid, msg=msg, ts_ns=_ts_ns(cols), ny=ny, nyf=nyf, form=pl.lit(name)
    )
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


# A tqdm progress bar ("Processed prompts:   0%|   | 0/4 [00:00<?, ?it/s, …]") that a log line was glued to when
# the bar's carriage return was lost (a copied console, a captured stream): the bar is dropped, the line kept.
_GLUED_PROGRESS = re.compile(r"^[^\n]*?\|\s*\d+/\d+ \[[^\]\n]*?(?:it/s|s/it)[^\]\n]*\](?=\S)")


def split_lines(text: str) -> list[str]:
    """The lines of a decoded block: CR LF and LF ends, no trailing empty line (faster than a Polars split);
    a progress bar glued before a log line is cut off it."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [x.rstrip("\r") for x in lines]
    if "it/s" in text or "s/it" in text:
        lines = [_GLUED_PROGRESS.sub("", x, count=1) if "/s" in x or "s/it" in x else x for x in lines]
    return lines


def split_lines_fast(text: str) -> pl.Series:
    """``split_lines`` by Polars over the whole text, for a text without progress bars (the caller checks): no
    Python string per line, and the GIL released (measured on a shared 2-core machine, CPU time of a 4 MB plog
    block: 9-12 ms against 14 ms; a 12 MB plog's whole parse, 1 thread: 0.85 s against 0.87-0.95 s CPU, 1.1-2.1 s
    against 1.5-2.4 s wall). Arrow's compute kernels split as fast, but their first call costs 44 MB of RSS.
    The same lines: split on LF
    only, the trailing empty line dropped, and — when the text holds a CR — every line's trailing CRs stripped
    (what replacing CR LF and ``rstrip("\\r")`` leave)."""
    lines = pl.Series("l", [text], pl.String).str.split("\n").explode()
    if text == "" or text.endswith("\n"):  # the empty line after the last LF
        lines = lines.head(-1)
    if "\r" in text:
        lines = lines.str.strip_chars_end("\r")
    return lines


def parse_lines(lines: list[str] | pl.Series, line0: int) -> pl.DataFrame:
    """One row per non-blank line (glued records split): its fields, and whether it can start a record."""
    df = pl.DataFrame({"line_no": np.arange(line0, line0 + len(lines), dtype=np.int64), "l": lines})
    glued = df["l"].str.count_matches(_LEVEL_TAG) > 1
    if glued.any():  # split only those lines: a regex replace over the whole block costs a third of the parse
        df = df.with_row_index("_i")
        cut = df.filter(glued).with_columns(
            l=pl.col("l").str.replace_all(GLUED, "${1}\n${2}").str.split("\n")
        )
        df = pl.concat([df.filter(~glued), cut.explode("l")]).sort("_i", maintain_order=True).drop("_i")
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
    own_pid = pl.lit("pid ") + pl.col("pid").cast(pl.String)
    # A capture of one container is that process's plain output (the same diagnosis as without the prefix); only a
    # capture that interleaves several containers has the container as the source of a line nothing inner names.
    several = out["p_container"].drop_nulls().n_unique() > 1
    container = pl.col("p_container") if several else pl.lit(None, pl.String)
    return out.with_columns(
        level=pl.coalesce(pl.col("level"), pl.col("p_level")).replace(LEVEL_NAMES),
        ts_ns=pl.coalesce(pl.col("ts_ns"), pl.col("p_ts")),
        ny=pl.coalesce(pl.col("ny"), pl.col("p_ny")),
        nyf=pl.coalesce(pl.col("nyf"), pl.col("p_nyf")),
        rank=pl.coalesce(pl.col("rank"), pl.col("p_rank")),
        pid=pl.coalesce(pl.col("pid"), pl.col("p_pid")),
        # the prefix, else the line's own pid field, else the container a capture tool named
        origin=pl.coalesce(pl.col("p_origin"), own_pid, container),
        line_src=pl.coalesce(pl.col("p_origin"), container),
    ).drop(*PREFIX_FIELDS)
