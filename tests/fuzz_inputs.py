"""Seeds and mutations for the parser fuzz tests and bench/reliability.py.

One small valid seed per parser in ``parsers.PARSERS`` (from tests/fixtures and sample_traces), and the ways
a broken run or a careless export damages a file: truncation, byte flips, NUL bytes, CSV columns shuffled,
dropped, added or duplicated, ragged rows, huge lines, GBK/GB18030 text, deep or enormous JSON values,
out-of-range numbers, timestamps going backwards.  Every mutation is a pure function of its parameters.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from tests.conftest import CORPUS, FIXTURES, SAMPLES

REAL_RUN = SAMPLES / "real" / "msinsight_level2_rank0_ascend_pt"
GEN_RUN = SAMPLES / "generated" / "llm_decode_tp2" / "rank0_1716292_20250115093320983_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"
MSPROF = FIXTURES / "msprof" / "PROF_000001_20250110120000123_ABCDEFGHIJKLMNOP" / "mindstudio_profiler_output"
# torch_npu's analysis.db: no fixture of its own, a 28 KB one from ../shared/corpus (absent in a user's clone)
ANALYSIS_DB = CORPUS / "ascend/msinsight/test/st/level2/rank_0_ascend_pt" / OUT / "analysis.db"
BAD_NUMBERS = (
    b"1e400", b"-1e400", b"NaN", b"inf", b"-1", b"-9223372036854775809", b"18446744073709551616",
    b"1" + b"0" * 400, b"0x1F", b"1.7976931348623157e309", b"", b"--5", b"1.2.3", b"4294967296",
)  # fmt: skip
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")
_TS = re.compile(rb'("ts"\s*:\s*"?)(-?\d+(?:\.\d+)?)')


@dataclass(frozen=True)
class Seed:
    parser: str
    path: Path  # the valid file
    relpath: str  # where a case is written under its own folder (keeps the run layout)

    @property
    def kind(self) -> str:
        name = self.path.name.lower()
        if name.endswith(".gz"):
            return "gz"
        if name.endswith((".sqlite", ".db")):
            return "binary"
        if name.endswith(".csv"):
            return "csv"
        if name.endswith(".json"):
            return "json"
        return "text"


def _trace_prefix(src: Path, dest: Path, events: int = 400) -> Path:
    data = json.loads(src.read_bytes())
    keep = [e for e in data if e.get("ph") == "M"] + [e for e in data if e.get("ph") != "M"][:events]
    dest.write_text(json.dumps(keep, indent=0), encoding="utf-8")
    return dest


def _msprof_db(dest: Path) -> Path:
    con = sqlite3.connect(dest)
    con.executescript((FIXTURES / "msprof" / "msprof_db.sql").read_text(encoding="utf-8"))
    con.commit()
    con.close()
    return dest


def build_seeds(work: Path) -> dict[str, Seed]:
    """One seed per parser; the built ones (a trace prefix, an nsys and an msprof export) go under ``work``.

    (The analysis.db seed comes from ../shared/corpus: without it that parser has no seed.)"""
    from tests.test_cuda_parsers import build_nsys  # the nsys export builder of the CUDA parser tests

    work.mkdir(parents=True, exist_ok=True)
    kd, cl = FIXTURES / "ascend_kernel_details", FIXTURES / "cann_log"
    run = "fuzz_rank0_ascend_pt"
    files = {
        "ascend_trace_view": (
            _trace_prefix(REAL_RUN / OUT / "trace_view.json", work / "trace_view.json"),
            OUT,
        ),
        "ascend_communication": (REAL_RUN / OUT / "communication.json", OUT),
        "ascend_communication_matrix": (REAL_RUN / OUT / "communication_matrix.json", OUT),
        "ascend_profiler_info": (GEN_RUN / "profiler_info_0.json", ""),
        "ascend_profiler_metadata": (REAL_RUN / "profiler_metadata.json", ""),
        "ascend_operator_details": (
            FIXTURES / "real/msinsight_test_rank_0" / OUT / "operator_details.csv",
            OUT,
        ),
        "ascend_kernel_details": (kd / "ok_crlf_tab_na.csv", OUT),
        "ascend_step_trace_time": (REAL_RUN / OUT / "step_trace_time.csv", OUT),
        "ascend_memory_record": (FIXTURES / "real/msinsight_test_rank_0" / OUT / "memory_record.csv", OUT),
        "ascend_npu_module_mem": (FIXTURES / "real/msinsight_test_rank_0" / OUT / "npu_module_mem.csv", OUT),
        "ascend_operator_memory": (
            FIXTURES / "real/msinsight_test_rank_0" / OUT / "operator_memory.csv",
            OUT,
        ),
        "ascend_static_op_mem": (FIXTURES / "static_op_mem/ok" / OUT / "static_op_mem.csv", OUT),
        "ascend_op_statistic": (GEN_RUN / OUT / "op_statistic.csv", OUT),
        "ascend_api_statistic": (REAL_RUN / OUT / "api_statistic.csv", OUT),
        "ascend_l2_cache": (REAL_RUN / OUT / "l2_cache.csv", OUT),
        "nsys_sqlite": (build_nsys(work / "report1.sqlite"), ""),
        "kineto_trace": (FIXTURES / "kineto" / "ok_rank2.pt.trace.json.gz", ""),
        "nsys_stats_csv": (FIXTURES / "nsys_stats_csv" / "ok_concatenated_reports.csv", ""),
        "ncu_csv": (FIXTURES / "ncu_csv" / "ok_raw_wide.csv", ""),
        "nsight_report": (FIXTURES / "ncu_csv" / "bad_profile.ncu-rep", ""),
        "cann_log": (cl / "ok_gb18030_crlf" / "plog-4242_20250625104523123.log", "debug/plog"),
        "msprof_task_time": (MSPROF / "task_time_20250110120005.csv", "PROF_1/mindstudio_profiler_output"),
        "msprof_communication_statistic": (
            MSPROF / "communication_statistic_20250110120005.csv",
            "PROF_1/mindstudio_profiler_output",
        ),
        "msprof_step_trace": (MSPROF / "step_trace_20250110120005.csv", "PROF_1/mindstudio_profiler_output"),
        "ascend_profiler_db": (_msprof_db(work / "msprof_20250110130005.db"), "PROF_2"),
        "serving_bench": (FIXTURES / "serving" / "ok_vllm_sweep_ascend_910b3.txt", ""),
        "moe_hotspot": (FIXTURES / "moe" / "msinsight" / "decode_0.csv", "expert_hotspot"),  # #22
        "moe_deployment": (
            FIXTURES / "moe" / "msinsight" / "prefill_global_deployment.json",
            "expert_hotspot",
        ),
    }
    if ANALYSIS_DB.is_file():
        files["ascend_analysis_db"] = (ANALYSIS_DB, OUT)
    seeds = {}
    for name, (path, sub) in files.items():
        parts = (
            ([run] if name.startswith("ascend") and sub in (OUT, "") else [])
            + ([sub] if sub else [])
            + [path.name]
        )
        seeds[name] = Seed(name, path, "/".join(parts))
    return seeds


def default_seeds() -> dict[str, Seed]:
    return build_seeds(Path(tempfile.mkdtemp(prefix="diag-fuzz-seeds-")))


# -- mutations -----------------------------------------------------------------------------------------------
def truncate(data: bytes, frac: float) -> bytes:
    return data[: int(len(data) * frac)]


def flip(data: bytes, flips: list[tuple[float, int]]) -> bytes:
    b = bytearray(data)
    for frac, value in flips:
        if b:
            b[min(int(frac * len(b)), len(b) - 1)] = value
    return bytes(b)


def insert(data: bytes, frac: float, blob: bytes) -> bytes:
    i = int(len(data) * frac)
    return data[:i] + blob + data[i:]


def at_line_start(data: bytes, frac: float, blob: bytes) -> bytes:
    """Insert ``blob`` as a line of its own, at the line boundary nearest ``frac`` (a huge single line)."""
    i = data.find(b"\n", int(len(data) * frac))
    i = len(data) if i < 0 else i + 1
    return data[:i] + blob + b"\n" + data[i:]


def bad_number(data: bytes, k: int, value: bytes) -> bytes:
    hits = list(_NUMBER.finditer(data))
    if not hits:
        return data + value
    m = hits[k % len(hits)]
    return data[: m.start()] + value + data[m.end() :]


def backwards(data: bytes, kind: str) -> bytes:
    """Timestamps going backwards: JSON ``ts`` values reversed; CSV/log data lines reversed."""
    if kind == "json":
        hits = list(_TS.finditer(data))
        values = [m.group(2) for m in reversed(hits)]
        out, last = [], 0
        for m, v in zip(hits, values, strict=True):
            out += [data[last : m.start(2)], v]
            last = m.end(2)
        return b"".join(out) + data[last:]
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:1] + lines[1:][::-1])


def to_gb18030(data: bytes) -> bytes:
    """Chinese text added to the first data line, the whole file re-saved as GB18030 (Excel on zh-CN)."""
    text = data.decode("utf-8", errors="replace")
    i = text.find("\n") + 1
    m = re.compile(r"[A-Za-z]{3,}").search(text, i)
    j = m.start() if m else len(text) // 2
    return (text[:j] + "算子名称" + text[j:]).encode("gb18030", errors="replace")


def json_member(data: bytes, member: bytes) -> bytes:
    """Add ``member`` (``"key": value``) as the first key of the first object that has keys."""
    i = data.find(b'{"', 1)
    if i < 0:
        i = data.find(b"{")
    if i < 0:
        return member + data
    return data[: i + 1] + member + b", " + data[i + 1 :]


def deep(depth: int) -> bytes:
    return b'"deep": ' + b"[" * depth + b"]" * depth


def huge_string(n: int) -> bytes:
    return b'"huge": "' + b"A" * n + b'"'


def csv_columns(data: bytes, op: str, seed: int) -> bytes:
    """Shuffle, drop, add or duplicate columns (header and rows alike), or make rows ragged."""
    text = data.decode("utf-8", errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return data
    rnd = random.Random(seed)
    width = max(len(r) for r in rows)
    order = list(range(width))
    if op == "shuffle":
        rnd.shuffle(order)
    elif op == "drop" and width > 1:
        del order[rnd.randrange(width)]
    elif op == "dup":
        order.insert(rnd.randrange(width + 1), rnd.randrange(width))
    out_rows = [[r[i] if i < len(r) else "" for i in order] for r in rows]
    if op == "extra":
        out_rows = [r + (["Extra Column"] if n == 0 else [str(n)]) for n, r in enumerate(out_rows)]
    if op == "ragged":
        out_rows = [
            r[: rnd.randrange(len(r) + 1)] if n and rnd.random() < 0.3 else r for n, r in enumerate(out_rows)
        ]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if "\r\n" in text else "\n").writerows(out_rows)
    return buf.getvalue().encode("utf-8")


# -- applying a mutation -------------------------------------------------------------------------------------
Mutation = tuple  # ("name", *params): hypothesis shows it as is when a case fails


def apply(seed: Seed, data: bytes, mutation: Mutation, huge_bytes: int) -> bytes:
    """The seed's bytes after ``mutation``; a gzip seed is mutated inside (then re-compressed) or outside."""
    name, *params = mutation
    if seed.kind == "gz" and name != "raw":
        inner = gzip.decompress(data)
        return gzip.compress(_apply_plain(seed, "json", inner, name, params, huge_bytes), mtime=0)
    if name == "raw":  # the compressed bytes themselves
        name, *params = params[0]
    return _apply_plain(seed, seed.kind, data, name, params, huge_bytes)


def _apply_plain(seed: Seed, kind: str, data: bytes, name: str, p: list, huge_bytes: int) -> bytes:
    if name == "truncate":
        return truncate(data, p[0])
    if name == "flip":
        return flip(data, p[0])
    if name == "nul":
        return insert(data, p[0], b"\x00" * p[1])
    if name == "splice":  # a block of the file repeated or moved (an interleaved writer)
        a, b = sorted((int(p[0] * len(data)), int(p[1] * len(data))))
        return insert(data, p[2], data[a:b])
    if name == "huge_line":
        return at_line_start(data, p[0], b"x" * huge_bytes)
    if name == "huge_value":
        if kind == "json":
            return json_member(data, huge_string(huge_bytes))
        return at_line_start(data, p[0], b'"' + b"y" * huge_bytes + b'",1,2')
    if name == "deep":
        return json_member(data, deep(p[0])) if kind == "json" else insert(data, 0.5, b"[" * p[0])
    if name == "big_int":
        return (
            json_member(data, b'"bignum": 1' + b"0" * p[0])
            if kind == "json"
            else bad_number(data, 3, b"9" * p[0])
        )
    if name == "number":
        return bad_number(data, p[0], p[1])
    if name == "backwards":
        return backwards(data, kind)
    if name == "gb18030":
        return to_gb18030(data)
    if name == "columns":
        return csv_columns(data, p[0], p[1]) if kind == "csv" else data
    if name == "empty":
        return b""
    raise ValueError(f"unknown mutation {name}")


def mutations(seed: Seed, huge: bool = False) -> st.SearchStrategy[Mutation]:
    """The mutations that make sense for ``seed``'s kind of file."""
    frac = st.floats(0, 1, allow_nan=False)
    byte_level = [
        st.tuples(st.just("truncate"), frac),
        st.tuples(st.just("flip"), st.lists(st.tuples(frac, st.integers(0, 255)), min_size=1, max_size=12)),
        st.tuples(st.just("nul"), frac, st.integers(1, 64)),
        st.tuples(st.just("splice"), frac, frac, frac),
    ]
    if seed.kind == "binary":
        return st.one_of(*byte_level)
    text_level = [
        st.tuples(st.just("number"), st.integers(0, 200), st.sampled_from(BAD_NUMBERS)),
        st.tuples(st.just("backwards")),
        st.tuples(st.just("gb18030")),
        st.tuples(st.just("big_int"), st.sampled_from([30, 400, 5000])),
        st.tuples(st.just("deep"), st.sampled_from([64, 2000, 100_000])),
    ]
    if seed.kind == "csv":
        ops = st.sampled_from(["shuffle", "drop", "extra", "dup", "ragged"])
        text_level.append(st.tuples(st.just("columns"), ops, st.integers(0, 1000)))
    if huge:
        text_level += [st.tuples(st.just("huge_line"), frac), st.tuples(st.just("huge_value"), frac)]
    plain = byte_level + text_level
    if seed.kind == "gz":  # also damage the compressed stream itself
        return st.one_of(*plain, st.tuples(st.just("raw"), st.one_of(*byte_level)))
    return st.one_of(*plain)


TARGETED: tuple[Mutation, ...] = (
    ("truncate", 0.5),
    ("empty",),
    ("nul", 0.3, 16),
    ("gb18030",),
    ("backwards",),
    ("number", 5, b"1e400"),
    ("number", 7, b"-9223372036854775809"),
    ("big_int", 5000),
    ("deep", 100_000),
    ("huge_line", 0.5),
    ("huge_value", 0.5),
    ("columns", "shuffle", 1),
    ("columns", "drop", 2),
    ("columns", "extra", 3),
    ("columns", "dup", 4),
)
