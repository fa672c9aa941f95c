"""The wild log corpus (tests/fixtures/logs_wild/, issue #16): real excerpts from public threads, each with the
answer an expert gives it; its index is sound, and the held-aside half does not get worse (a ratchet)."""

from __future__ import annotations

import csv
import math

import pytest

from bench.log_accuracy import WILD, _category_matches, half_of, index_rows, measure

HEADER = ["file", "expected_category", "key_line", "source_url", "project", "licence", "date", "notes"]
EXTRA_CATEGORIES = {"unclassified", "noise"}

# Per index: the held half's figures measured when its excerpts were gathered
# (bench/log_accuracy.py --half held --index w1): category accuracy and key-line accuracy floors (rounded down to
# the %), false-positive ceiling.  A rule change may raise them, never lower them; raise these when it does.
# Per index, so that a merged index of new excerpts does not move another's ratchet; add its own entry.
# Round 4 (rules written against all of w1–w3, #16): raised to the figures measured after it. w4: its unseen
# first measurement was 73 / 65 / 1 (held), unchanged by round 4; round 5 (rules from the w4 train half only) 92 / 69 / 1.
# Round 6 (session 7; rules from w1–w3, w4 train, w5 train): w2 held 97, w3 held 89; w4 held unchanged. w5: gathered
# unseen, first measured 87.8 / 70.7 / 2 over all 53 files, held half 88 / 70 / 0 before and after round 6.
HELD_RATCHET = {
    "w1": (1.00, 0.89, 0),
    "w2": (1.00, 0.97, 0),
    "w3": (1.00, 0.89, 0),
    "w4": (0.92, 0.69, 1),
    "w5": (0.88, 0.88, 0),  # round 7 (session 8): 70.6 → 76.5 % key line; session 11: 88.2
    # w6: unseen measurement 82.6 / 82.6 / 1 (session 8); round 7 (w6 train rules): 87.0 % category
    "w6": (0.86, 0.86, 1),  # session 11: key line 87.0
    # w7 / w8 (session 9): measured after round 8 (rules from the w7 / w8 train halves, labels after the second annotator),
    # round 8 left both held halves where the unseen round-7 rules had them: w7 17 / 21, 17 / 21, 1 FP; w8 8 / 17, 8 / 17, 0
    "w7": (0.80, 0.80, 1),
    "w8": (0.58, 0.94, 0),  # round 9 (session 10): key line 8 → 9 of 17; session 11: 10 / 17, 16 / 17
    # w9 / w10 (session 10): first contact (rules of round 8 + the ROCm / XPU code catalogs) held 8 / 11, 7 / 11, 0 and
    # 6 / 10, 5 / 10, 0; after round 9 (rules from their 35 train files) 8 / 11, 7 / 11, 0 and 7 / 10, 5 / 10, 0
    # Session 11 (two format-level changes, see README #16): a *.log / *.out / *.err file is read as a log whatever
    # its line format, and an unlevelled line with failure words is a LOW unclassified error when nothing is placed.
    "w9": (0.72, 0.72, 0),  # session 11: key line 8 / 11
    "w10": (0.80, 0.70, 0),  # session 11: 8 / 10, 7 / 10
    # w11 / w12 (session 12): first contact (rules of session 11) held 8 / 8, 8 / 8, 0 and 10 / 12, 11 / 12, 1;
    # round 10 (rules from their 33 train files) left both where they were
    "w11": (1.00, 1.00, 0),
    "w12": (0.83, 0.91, 1),
    # w13 / w14 (session 14): first contact (rules of round 11) held 8 / 10, 8 / 10, 0 and 0 / 3, 0 / 3, 0
    "w13": (0.80, 0.80, 0),
    "w14": (0.00, 0.00, 0),
    # w15 / w16 (session 15): first contact (rules of round 12) held 5 / 8, 6 / 8, 1 and 7 / 9, 7 / 9, 1 (w16_012 was
    # relabelled version_mismatch after it, to the folder's convention for a missing GPU architecture: 8 / 9, 0);
    # round 13 (rules from their 31 train files) left both where they were
    "w15": (0.62, 0.75, 1),
    "w16": (0.88, 0.77, 0),
    # w17 / w18 (session 16): first contact (rules of round 13) held 5 / 9, 4 / 9, 1 and 4 / 8, 5 / 8, 0
    "w17": (0.55, 0.44, 1),
    "w18": (0.50, 0.62, 0),
    # w19 (session 16, Ascend forum / vendor pages): first contact (rules of round 14) held 8 / 9, 6 / 9, 0
    "w19": (0.88, 0.66, 0),
}


def _categories() -> set[str]:
    from diag.analyses.log_diagnosis import log_rules

    return set(log_rules()["category"]) | EXTRA_CATEGORIES


def test_every_index_has_the_header() -> None:
    indexes = sorted(WILD.glob("INDEX_*.csv"))
    assert indexes, "no INDEX_*.csv in tests/fixtures/logs_wild"
    for index in indexes:
        with index.open(encoding="utf-8", newline="") as fh:
            assert next(csv.reader(fh)) == HEADER, index.name


def test_every_row_points_to_a_file_holding_its_key_line() -> None:
    rows = index_rows()
    assert len({r["file"] for r in rows}) == len(rows), "a file is listed twice"
    for row in rows:
        path = WILD / row["file"]
        assert path.is_file(), row["file"]
        assert path.stat().st_size <= 16 * 1024, row["file"]
        key = row["key_line"]
        if row["expected_category"] == "noise":
            assert key == "", f"{row['file']}: a noise file names no key line"
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        lines = text.splitlines()
        # 20-80 characters inside one line (w1-w6, w8), or one whole line however long (w7): a longer key only
        # makes the key-line check stricter, since diag's evidence must then hold the entire line
        whole_line = len(key) >= 20 and key.strip() in (line.strip() for line in lines)
        assert whole_line or 20 <= len(key) <= 80, f"{row['file']}: key line of {len(key)} characters"
        assert any(key in line for line in lines), f"{row['file']}: key line not in one line"


def test_every_row_has_provenance_and_a_valid_category() -> None:
    categories = _categories()
    for row in index_rows():
        assert row["expected_category"] in categories, (row["file"], row["expected_category"])
        assert row["source_url"].startswith("https://"), row["file"]
        assert row["project"] and row["licence"] and row["date"][:2] == "20", row["file"]


def test_every_log_file_is_indexed() -> None:
    listed = {r["file"] for r in index_rows()}
    on_disk = {p.name for p in WILD.iterdir() if p.suffix != ".md" and not p.name.startswith("INDEX_")}
    assert on_disk == listed


def test_half_is_fixed_by_the_name() -> None:
    assert half_of("w1_001_no_memory_cache_blocks.log") == half_of("w1_001_no_memory_cache_blocks.log")
    assert {half_of(f"w1_{i:03d}.log") for i in range(20)} == {"train", "held"}


@pytest.mark.parametrize(
    ("expected", "got", "flagged", "right"),
    [
        ("oom", "oom", True, True),
        ("oom", "device_exception", True, False),
        ("cpu_fallback", "cpu_fallback", False, True),  # a low-severity answer still counts as an answer
        ("noise", "nothing", False, True),
        ("noise", "cpu_fallback", False, True),  # low severity: not a finding at medium or above
        ("noise", "version_mismatch", True, False),
        ("unclassified", "nothing", False, True),  # saying less is right
        ("unclassified", "unclassified_error", True, True),
        ("unclassified", "version_mismatch", True, False),  # a neighbouring category is wrong
    ],
)
def test_what_counts_as_the_right_answer(expected: str, got: str, flagged: bool, right: bool) -> None:
    assert _category_matches(expected, got, flagged) is right


def test_halves_are_balanced() -> None:
    rows = index_rows()
    held = sum(half_of(r["file"]) == "held" for r in rows)
    assert 0.3 <= held / len(rows) <= 0.7, f"{held} of {len(rows)} held aside"


@pytest.mark.slow  # ingests every held-aside file alone: ~5 s of CPU, 25 s wall on a loaded 2-core machine
@pytest.mark.parametrize("index", sorted(HELD_RATCHET))
def test_held_half_does_not_get_worse(index: str) -> None:
    category_floor, key_line_floor, false_positive_ceiling = HELD_RATCHET[index]
    held = measure("held", index=index)["held"]
    assert held["files"] > 0, f"INDEX_{index}.csv has no held-aside file"
    category, key_line = float(held["category_accuracy"]), float(held["key_line_accuracy"])  # type: ignore[arg-type]
    assert math.floor(100 * category) >= round(100 * category_floor), held["misses"]
    assert math.floor(100 * key_line) >= round(100 * key_line_floor), held["misses"]
    assert held["false_positives"] <= false_positive_ceiling, held["misses"]
