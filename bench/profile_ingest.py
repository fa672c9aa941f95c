"""Where an ingest's time goes: every SQL statement a parser runs that takes ≥ 50 ms, the JSON split, the
sha256 and the whole ingest, in one process.

Wraps ``diag.store.q`` (the one call every parser's SQL goes through), ``parsers._json_split.split_array``
and ``diag.discover.sha256_of``, then runs ``diag ingest FILE --db FRESH --json`` in-process.  Figures only:
for the speed of record use bench_ingest.py, which runs diag in a process of its own.

For a trace_view.json or a CSV it then times, in the same process, DuckDB's own floor for the same file: the
reader alone (``count(*)``) and the reader storing every field unconverted (``CREATE TABLE AS`` into a fresh
database file, checkpointed), so the profile shows how far each diag step is from what DuckDB itself needs.

    python bench/profile_ingest.py FILE [--min-ms 50] [--no-floor]
    python bench/profile_ingest.py --logs FOLDER_OR_FILES…   # a log set: seconds per parser stage, DuckDB's per step
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import diag.ingest as ingest_mod  # noqa: E402
import diag.store as store_mod  # noqa: E402
import parsers._io as io_mod  # noqa: E402
import parsers._json_split as split_mod  # noqa: E402
from diag.cli import main as diag_main  # noqa: E402
from parsers import PARSERS  # noqa: E402


def _timed(label_of, fn, min_s: float, out: list[tuple[float, float, str]]):
    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t
            if dt >= min_s:
                out.append((dt, time.process_time() - c, label_of(*args)))

    return wrapper


def profile(path: Path, min_ms: float) -> list[tuple[float, float, str]]:
    """(wall s, CPU s of the whole process: every DuckDB thread and the sha256's, label) per step."""
    spent: list[tuple[float, float, str]] = []
    min_s = min_ms / 1000

    def sql_label(con, sql, *rest):  # noqa: ANN001, ARG001
        return " ".join(str(sql).split())[:100]

    patches = {
        (store_mod, "q"): sql_label,
        (split_mod, "split_array"): lambda *a: "split the JSON array into parts",
        (io_mod, "run_csv"): lambda *a: "CSV read and insert into its table (parsers._io.run_csv)",
        (ingest_mod, "sha256_of"): lambda *a: "sha256 (on its own thread for files over 16 MB)",
    }
    originals = {key: getattr(*key) for key in patches}
    for (mod, name), label in patches.items():
        setattr(mod, name, _timed(label, originals[(mod, name)], min_s, spent))
    # Parsers import q and split_array by name: patch their bindings too.
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("parsers.") and mod not in (split_mod, io_mod):
            for (src, name), _ in patches.items():
                if getattr(mod, name, None) is originals[(src, name)]:
                    setattr(mod, name, getattr(src, name))
    for parser in PARSERS:  # a CSV parser's follow-up step (kernel_details: the stand-in device tasks)
        after = getattr(parser, "_after", None)
        if after is not None:
            parser._after = _timed(lambda *a, f=after: f"after the CSV: {f.__name__}", after, min_s, spent)
    with tempfile.TemporaryDirectory(prefix="diag-profile-") as tmp:
        t, c = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            diag_main(["ingest", str(path), "--db", str(Path(tmp) / "p.duckdb"), "--json"])
        spent.append((time.perf_counter() - t, time.process_time() - c, "TOTAL diag ingest (in-process)"))
    return spent


# -- logs: where a log set's seconds go, stage by stage --------------------------------------------------------
# The log parser's stages are module functions that cann_log calls by name: each is wrapped to add its seconds
# (summed over the parse threads, so run with WORKERS=1 for wall = sum), then DuckDB's own cost of each step
# (lines read, header regex, record grouping by a window, one regexp over every record, the store) is timed on
# the same files for the floor of each step.
_LOG_STAGES = (
    ("parsers.cann_log", "capped_blocks", "read + cap lines + CR fix (capped_blocks)"),
    ("parsers.cann_log", "_cut", "find block cuts (_cut)"),
    ("parsers.cann_log", "_decode", "decode UTF-8 / GB18030 (_decode)"),
    ("parsers.cann_log", "split_lines", "split lines, Python (split_lines: blocks with progress bars)"),
    ("parsers.cann_log", "split_lines_fast", "split lines (split_lines_fast)"),
    ("parsers.cann_log", "parse_lines", "header / console regexes (parse_lines)"),
    ("parsers.cann_log", "mark_starts", "record starts (mark_starts)"),
    ("parsers.cann_log", "group_records", "multi-line grouping (group_records)"),
    ("parsers._log_records", "with_codes", "codes (with_codes)"),
    ("parsers._log_records", "with_figures", "figures (with_figures)"),
    ("parsers._log_records", "with_years", "yearless stamps (with_years)"),
    ("parsers.cann_log", "classify", "rule matching (classify)"),
    ("parsers.cann_log", "to_table", "to Arrow (to_table)"),
)


def _log_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return out


def profile_logs(paths: list[Path], db: Path) -> list[tuple[float, str]]:
    """Seconds per stage of the log parser over ``paths`` (one thread), the commits, and the whole ingest into
    ``db``."""
    import importlib

    import parsers.cann_log as cann_log

    spent: dict[str, float] = {}
    originals = []
    for mod_name, fn_name, label in _LOG_STAGES:
        mod = importlib.import_module(mod_name)
        fn = getattr(mod, fn_name)
        originals.append((mod, fn_name, fn))
        setattr(mod, fn_name, _adding(fn, label, spent))
    real_q = store_mod.q
    timed_q = _adding(real_q, "store: COMMIT (WAL write, automatic checkpoints)", spent)
    store_mod.q = lambda con, sql, *a: (timed_q if sql == "COMMIT" else real_q)(con, sql, *a)
    cann_log.WORKERS, workers = 1, cann_log.WORKERS
    try:
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            diag_main(["ingest", *map(str, paths), "--db", str(db), "--json"])
        total = time.perf_counter() - t
    finally:
        for mod, fn_name, fn in originals:
            setattr(mod, fn_name, fn)
        cann_log.WORKERS, store_mod.q = workers, real_q
    rows = [(s, label) for label, s in spent.items()]
    rows.append((total - sum(spent.values()), "the rest: inserts, detection, ledger, sha256, waits"))
    rows.append((total, "TOTAL diag ingest (in-process, 1 parse thread)"))
    return rows


def _adding(fn, label: str, spent: dict[str, float]):  # noqa: ANN001, ANN202
    """``fn`` adding its seconds to spent[label]; a generator's seconds are those of each step it takes."""
    import inspect

    if inspect.isgeneratorfunction(fn):

        def gen_wrapper(*args, **kwargs):  # noqa: ANN202
            it = fn(*args, **kwargs)
            while True:
                t = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
                    return
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
                yield item

        return gen_wrapper

    def wrapper(*args, **kwargs):  # noqa: ANN202
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t

    return wrapper


def duckdb_log_steps(paths: list[Path], stored: Path) -> list[tuple[float, str]]:
    """What DuckDB itself needs for each step of a log ingest on the same files, each statement timed alone:
    the lines read and stored (the floor), the plog header regex, records grouped by a running sum, one regexp
    over every record's text (the rules' case-sensitive alternation), and the rows diag stored (``stored``'s
    log_records, every column) stored again in one statement: the floor of storing what diag stores."""
    import duckdb

    from parsers._log_grammar import PLOG_RX
    from parsers._log_rules import load_rules

    files = [str(f) for f in _log_files(paths)]
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    src = (f"read_csv([{listed}], columns={{'line': 'VARCHAR'}}, header=false, delim='\\x01', quote='', "
           "escape='', auto_detect=false, max_line_size=4194304, filename=true)")  # fmt: skip
    rules = "|".join(
        f"(?:{r.pattern})" for r in load_rules() if r.pattern and not r.pattern.startswith("(?i)")
    )
    # the groups by position (DuckDB's names are case-blind: M and m would clash)
    names = [
        "level",
        "module",
        "pid",
        "pname",
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "sec",
        "ms",
        "us",
        "src",
        "body",
    ]
    steps = (
        ("DuckDB: lines read and stored (the floor)",
         f"CREATE TABLE raw AS SELECT filename, line, row_number() OVER () AS n FROM {src}"),
        ("DuckDB: plog header regex (regexp_extract of 14 groups)",
         f"CREATE TABLE hdr AS SELECT n, line, regexp_extract(line, ?, {names!r}) AS h FROM raw"),
        ("DuckDB: plog header by position (instr / substr / strptime, as _plog_fast does it)",
         "CREATE TABLE pos AS SELECT n, substr(line, 2, 2) AS lv, substr(line, b + 1, p - b - 1) AS module, "
         "TRY_CAST(substr(line, p + 1, c - p - 1) AS BIGINT) AS pid, substr(line, c + 1, e - c - 1) AS pname, "
         "try_strptime(substr(line, e + 2, 19), '%Y-%m-%d-%H:%M:%S') AS ts, substr(line, e + 29) AS rest FROM "
         "(SELECT n, line, instr(line, ']') AS b, instr(line, '(') AS p, instr(line, ',') AS c, "
         "instr(line, '):') AS e FROM raw)"),
        ("DuckDB: records by a running sum of starts, grouped",
         "CREATE TABLE rec AS SELECT filename, g, string_agg(line, chr(10) ORDER BY n) AS raw FROM "
         "(SELECT filename, n, line, sum(CASE WHEN regexp_matches(line, ?) THEN 1 ELSE 0 END) "
         "OVER (PARTITION BY filename ORDER BY n) AS g FROM raw) GROUP BY filename, g"),
        ("DuckDB: one regexp over every record (the rules' alternation)",
         "CREATE TABLE hit AS SELECT g, regexp_matches(raw, ?) AS hit FROM rec"),
        ("DuckDB: diag's log_records rows stored in one statement (+ CHECKPOINT)",
         "CREATE TABLE again AS SELECT * FROM diag.log_records; CHECKPOINT"),
    )  # fmt: skip
    params = (
        None,
        [re.sub(r"\(\?P<\w+>", "(", PLOG_RX)],
        None,
        [r"^\[(?:ERROR|WARNING|INFO|DEBUG|EVENT|TRACE)\]"],
        [rules],
        None,
    )
    out = []
    with tempfile.TemporaryDirectory(prefix="diag-profile-") as tmp:
        con = duckdb.connect(str(Path(tmp) / "steps.duckdb"))
        con.execute(f"ATTACH '{stored}' AS diag (READ_ONLY)").fetchall()
        for setting in ("memory_limit='1GB'", "preserve_insertion_order=false"):  # as bench_logs' floor
            con.execute(f"SET {setting}").fetchall()
        for (label, sql), args in zip(steps, params, strict=True):
            t = time.perf_counter()
            try:
                con.execute(sql, args or []).fetchall()
                out.append((time.perf_counter() - t, label))
            except duckdb.Error as exc:
                out.append((float("nan"), f"{label}: {str(exc).splitlines()[0][:80]}"))
        con.close()
    return out


def duckdb_floor(path: Path) -> list[tuple[float, float, str]]:
    """DuckDB reading ``path`` with diag's reader and nothing else: scan, then store unconverted (CSV, JSON)."""
    import duckdb

    from diag.store import ingest_memory_limit
    from parsers._io import csv_header, csv_source
    from parsers.ascend_trace_view import read_json_sql

    if path.suffix == ".json":
        source = read_json_sql(path)
    elif path.suffix == ".csv":
        source = csv_source(path, csv_header(path, path.name))
    else:
        return []
    out: list[tuple[float, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="diag-floor-") as tmp:
        con = duckdb.connect(str(Path(tmp) / "floor.duckdb"))
        for setting in (f"memory_limit='{ingest_memory_limit()}'", "preserve_insertion_order=false"):
            con.execute(f"SET {setting}").fetchall()
        for label, sql in (
            ("FLOOR DuckDB reader alone: count(*)", f"SELECT count(*) FROM {source}"),
            (
                "FLOOR DuckDB storing it unconverted: CREATE TABLE AS + CHECKPOINT",
                f"CREATE TABLE s AS FROM {source}",
            ),
        ):
            t, c = time.perf_counter(), time.process_time()
            con.execute(sql).fetchall()
            if sql.startswith("CREATE"):
                con.execute("CHECKPOINT").fetchall()
            out.append((time.perf_counter() - t, time.process_time() - c, label))
        con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", type=Path, nargs="+")
    p.add_argument("--min-ms", type=float, default=50.0)
    p.add_argument(
        "--logs", action="store_true", help="a log set: seconds per parser stage and DuckDB's per step"
    )
    p.add_argument(
        "--no-floor", action="store_true", help="skip timing DuckDB's own read / store of the file"
    )
    a = p.parse_args(argv)
    if a.logs:
        size = sum(f.stat().st_size for f in _log_files(a.file))
        print(f"{len(_log_files(a.file))} log files ({size / 1e6:,.1f} MB)")
        with tempfile.TemporaryDirectory(prefix="diag-profile-") as tmp:
            db = Path(tmp) / "p.duckdb"
            for seconds, label in [*profile_logs(a.file, db), *duckdb_log_steps(a.file, db)]:
                print(f"{seconds:8.3f} s  {label}")
        return 0
    a.file = a.file[0]
    print(f"{a.file} ({a.file.stat().st_size / 1e6:,.1f} MB)")
    spent = profile(a.file, a.min_ms) + ([] if a.no_floor else duckdb_floor(a.file))
    # CPU seconds do not depend on what else the machine runs: compare steps by them on a busy machine
    print(f"{'wall':>8}    {'CPU':>8}")
    for seconds, cpu, label in spent:
        print(f"{seconds:8.3f} s  {cpu:8.3f} s  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
