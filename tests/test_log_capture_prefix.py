"""Capture-tool prefixes (issue #16, session 14): kubectl / docker stamps, docker compose's container bar and a log
viewer's clock time are stripped before a line is read, so the diagnosis of a log does not depend on how it was
captured (bench/log_accuracy.py --wrap measures the same on the wild corpus)."""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

import pytest

from bench.log_accuracy import WILD, diagnose, half_of, index_rows
from parsers._log_grammar import parse_lines

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from log_wrappers import WRAPPERS, wrapped_copy  # noqa: E402

BARE = "[rank2]:[F205 18:19:06.383067836 ProcessGroupNCCL.cpp:1614] Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang."


@pytest.mark.parametrize(
    "prefix",
    ["18:19:06.687 ", "2026-02-05T18:19:06.687123456Z ", "2026-02-05T18:19:06+08:00 ", "vllm-server-1  | ",
     "vllm-1  | 2026-02-05T18:19:06.687Z "],
)  # fmt: skip
def test_capture_prefix_is_stripped_from_the_line_kept(prefix: str) -> None:
    df = parse_lines([prefix + BARE], 1)
    row = df.row(0, named=True)
    assert row["l"] == BARE  # the raw text the record keeps is the process's line
    assert row["level"] == "ERROR"  # c10's [F…] (LOG(FATAL)) is an error record
    assert row["rank"] == 2
    assert row["ts_ns"] is None  # the capture host's clock is not the process's stamp


def test_one_container_is_plain_output_several_are_sources() -> None:
    one = parse_lines(["api-1  | ERROR boom", "api-1  | INFO ok"], 1)
    assert one["origin"].to_list() == [None, None]
    two = parse_lines(["api-1  | ERROR boom", "router-1  | INFO ok"], 1)
    assert two["origin"].to_list() == ["api-1", "router-1"]


def test_empty_captured_line_is_a_blank_line() -> None:
    df = parse_lines(["api-1  | first", "api-1  | ", "api-1  | second"], 1)
    assert df["line_no"].to_list() == [1, 3]


@functools.cache
def _bare(name: str) -> tuple[str | None, str | None, str]:
    """The bare file's diagnosis, once per worker for every wrapper it is compared with."""
    return diagnose(WILD / name)


TRAIN = [r["file"] for r in index_rows() if half_of(r["file"]) == "train"][::9]  # a spread of 30 train files


@pytest.mark.skipif(not WILD.exists(), reason="no wild corpus")
@pytest.mark.parametrize("wrapper", sorted(set(WRAPPERS) - {"none"}))
def test_diagnosis_does_not_depend_on_the_capture(wrapper: str) -> None:
    changed = []
    for name in TRAIN:
        with tempfile.TemporaryDirectory() as tmp:
            wrapped = diagnose(wrapped_copy(WILD / name, wrapper, Path(tmp)))
        bare = _bare(name)
        # the evidence is the same line too; where the file already holds a compose bar (nested twice: one bar is
        # read), the inner bar stays on it
        first = wrapped[2].split("\n")[0], bare[2].split("\n")[0]
        # (a line that starts with one blank, a cut excerpt's, loses it behind a stamp: read as aligned)
        same_line = wrapped[2].lstrip() == bare[2].lstrip() or (
            first[0].endswith(first[1].lstrip()) and "  | " in first[0]
        )
        # a paste's hard-wrapped pieces get a stamp each here (a real capture stamps the process's lines, before a
        # paste wraps them), so a piece of the same record may lead on its own
        same_line = same_line or (bool(first[0].strip()) and first[0].strip() in bare[2])
        if wrapped[:2] != bare[:2] or not same_line:
            changed.append(name)
    assert len(TRAIN) >= 25 and not changed, changed


@pytest.mark.parametrize(
    ("text", "category", "severity"),
    [
        (BARE, "hccl_timeout", "high"),
        ("[F205 18:19:06.383067836 ProcessGroupNCCL.cpp:1614] [PG ID 0 PG GUID 0(default_pg) Rank 0] Terminating the"
         " process after attempting to dump debug info, due to collective timeout or exception.", "hccl_timeout", "high"),
        ("[2025-07-02 07:41:59 TP0] max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled"
         " value instead.", "oom", "low"),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "oom", "high"),
        # a positive profiled value is a cap that did not bind, not a failure
        ("[2025-07-02 07:41:59 TP0] max_total_tokens=131072 is larger than the profiled value 50756. Use the profiled"
         " value instead.", None, None),
    ],
)  # fmt: skip
def test_round12_wordings(text: str, category: str | None, severity: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "console.log"
        path.write_text(text + "\n")
        got = diagnose(path)
    assert (got[0], got[1]) == (category, severity) or (
        category is None and got[1] not in ("high", "medium", "low")
    )


def test_stamp_aligned_by_two_spaces_starts_a_line_of_its_own() -> None:
    df = parse_lines(["11:05:31.652  PrintTaskErrorMsg: Task run failed", "11:05:31.653  ProcessStarsAicpuErrorInfo: x",
                      "11:05:31.654    File \"a.py\", line 3, in f"], 1)  # fmt: skip
    # the aligned lines start records (no leading blank); a frame indented past the alignment keeps its indent
    assert df["l"].to_list() == [
        "PrintTaskErrorMsg: Task run failed",
        "ProcessStarsAicpuErrorInfo: x",
        '   File "a.py", line 3, in f',
    ]


def test_empty_line_of_a_logged_message_is_kept() -> None:
    """vLLM's logger prints its prefix alone for an empty line of the message it logs: that is a line of the
    message, not a blank line, so it does not cut the block (the untimed record above still borrows the time of the
    next one) — unlike an empty line a capture tool saved."""
    lines = ["ERROR 02-11 11:32:58 engine.py:389] call aclnnX failed, detail:EZ1001: x", "ERROR 02-11 11:32:58 engine.py:389]",
             "ERROR 02-11 11:32:58 engine.py:389] [ERROR] 2025-02-11-11:32:58 (PID:1, Device:0, RankID:-1) ERR01100 OPS"]  # fmt: skip
    assert parse_lines(lines, 1)["line_no"].to_list() == [1, 2, 3]


CUT = [
    "ERROR 11-08 11:01:29 [multiproc_executor.py:135] Worker proc VllmWorker-3 died unexpectedly, shutting down executor.",
    "ERROR 11-08 11:01:30 [core.py:502] Traceback (most recent call last):",
    'ERROR 11-08 11:01:30 [core.py:502]   File "/usr/lib/vllm/v1/engine/core.py", line 493, in run_engine_core',
    "ERROR 11-08 11:01:30 [core.py:502]     engine_core.run_busy_loop()",
]


@pytest.mark.parametrize(
    ("lines", "category", "severity", "lead"),
    [
        # a traceback cut before its exception line names nothing: beside the worker's death it is that death's detail
        (CUT, "abort", "low", "Worker proc VllmWorker-3 died unexpectedly"),
        # alone it is still an unclassified error
        (CUT[1:], "unclassified_error", "medium", "Traceback (most recent call last):"),
        # with its exception line it is no longer cut: the exception is read (here unplaced, so unclassified beside
        # the consequence, as before), led by the exception line
        ([*CUT, "ERROR 11-08 11:01:30 [core.py:502] KeyError: 'x'"], "unclassified_error", "medium", "KeyError: 'x'"),
    ],
)  # fmt: skip
def test_cut_traceback_yields_to_a_placed_record(
    lines: list[str], category: str, severity: str, lead: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "console.log"
        path.write_text("\n".join(lines) + "\n")
        got = diagnose(path)
    assert (got[0], got[1]) == (category, severity) and lead in got[2], got
