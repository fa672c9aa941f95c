"""The literals classification pre-filters on (issue #25): every match of a rule's regex contains one of them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from parsers._log_literals import required_literals  # noqa: E402
from parsers._log_rules import load_rules  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("Wait links establish", ("wait links establish",)),  # (?i) below: lower case
        (r"foo\d+barbaz", ("barbaz",)),  # the longest needed run
        (r"(?:alpha|beta)\d", ("alpha", "beta")),  # an alternation: one of its branches
        (r"alpha|x", None),  # a branch without a usable literal: nothing certain
        (r"(?:abcdef)?\d+", None),  # optional: not needed
        (r"(?:abcd)+", ("abcd",)),  # repeated at least once: needed
        (r"内存不足 EL0004", (" el0004",)),  # only ASCII survives
        (r"\p{L}+", None),  # Rust syntax Python's parser cannot read
    ],
)
def test_required_literals(pattern, expected):
    folded = pattern.startswith("Wait")
    got = required_literals(f"(?i){pattern}" if folded else pattern)
    assert got == (tuple(sorted(expected)) if expected else None)


def test_a_folded_rule_is_tried_where_a_non_ascii_fold_of_k_or_s_is():
    """Rust's (?i) matches the Kelvin sign for k and the long s for s, which the ASCII pre-filter cannot see."""
    import polars as pl

    from parsers._log_rules import Rule, classify

    rule = Rule("t", "cat", "high", "cause", "(?i)task failed", (), (), "", "")
    records = pl.DataFrame(
        {"raw": ["ta\u017fk failed", "TASK FAILED", "tas failed"], "level": [None] * 3, "code": [None] * 3,
         "codes": [[], [], []]},
        schema={"raw": pl.String, "level": pl.String, "code": pl.String, "codes": pl.List(pl.String)},
    )  # fmt: skip
    assert classify(records, (rule,))["rule_id"].to_list() == ["t", "t", None]


def _lines() -> list[str]:
    out: list[str] = []
    for folder in ("cann_log", "logs_wild"):
        for path in sorted((FIXTURES / folder).rglob("*")):
            if path.is_file():
                out += path.read_bytes().decode("utf-8", errors="replace").splitlines()
    return out


def test_every_rule_match_holds_one_of_its_literals():
    """Over every line of the log fixtures: where a rule's regex matches, one of its literals is there; and the
    pre-filter covers nearly every rule (a rule without literals is tried on every record)."""
    lines = _lines()
    rules = [r for r in load_rules() if r.pattern]
    checked = missed = 0
    for rule in rules:
        lits = required_literals(rule.pattern)
        if lits is None:
            continue
        rx = re.compile(rule.pattern)
        for line in lines:
            if rx.search(line):
                checked += 1
                missed += not any(lit in line.lower() for lit in lits)
    without = sum(required_literals(r.pattern) is None for r in rules)
    assert (missed, checked > 200, without <= 3) == (0, True, True)
