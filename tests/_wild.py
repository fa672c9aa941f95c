"""Shared checks of the log-rule rounds (tests/test_log_rules_round*.py, test_log_rules_train.py) on the wild corpus
(tests/fixtures/logs_wild/, issue #16): one place for "this excerpt's top root cause and the line that leads it" and
"this documented wording gets this rule", instead of the same body in every round's file."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.log_accuracy import WILD, diagnose, half_of
from diag.analyses.log_diagnosis import LAST_RESORT_RULE
from tests.test_cann_logs import classify_lines


def assert_top_cause(file: str, category: str, severity: str, key: str, *, train_only: bool = True) -> None:
    """``file`` ingested alone (as bench/log_accuracy.py and ``diag logs`` do): its top root cause has this category and
    severity, and ``key`` is part of the raw text of the record that leads its evidence.  Rules are written against the
    train half only, so a held-half file is refused unless ``train_only`` is off (round 4 read all of w1–w3)."""
    if train_only:
        assert half_of(file) == "train", f"{file} is in the held half: rules are written against train only"
    got_category, got_severity, raw = diagnose(WILD / file)
    assert (got_category, got_severity) == (category, severity), raw
    assert key in raw, raw


def assert_line_gets_rule(line: str, rule_id: str | None, category: str | None = None) -> None:
    """One line, as its source prints it, is one record classified by ``rule_id`` (None: by no rule that names
    anything — the last resort, an unlevelled line's failure words at low severity, says only "unplaced") and, when
    given, into ``category``."""
    (rec,) = classify_lines([line])
    if rule_id is None:
        assert rec["rule_id"] in (None, LAST_RESORT_RULE), rec
    else:
        assert rec["rule_id"] == rule_id, rec
    if category is not None:
        assert rec["category"] == category, rec


def round_checks(
    train_cases: list[tuple[str, str, str, str]],
    wordings: list[tuple[str, str, str]],
    neighbours: list[tuple[str, str | None]],
) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None]]:
    """The three parametrized checks of a rule round's tables (tests/test_log_rules_round*.py): each train excerpt's
    top cause and lead line, each documented wording's rule, each neighbour line's rule.  Bound to module-level
    ``test_*`` names by the round file, so pytest collects them there."""

    @pytest.mark.parametrize(
        ("file", "category", "severity", "key"), train_cases, ids=[c[0][:7] for c in train_cases]
    )
    def train_excerpt(file: str, category: str, severity: str, key: str) -> None:
        assert_top_cause(file, category, severity, key)

    @pytest.mark.parametrize(("line", "rule_id", "category"), wordings, ids=[f"{w[1]}{i}" for i, w in enumerate(wordings)])  # fmt: skip
    def wording(line: str, rule_id: str, category: str) -> None:
        assert_line_gets_rule(line, rule_id, category)

    @pytest.mark.parametrize(("line", "rule_id"), neighbours, ids=[str(i) for i in range(len(neighbours))])
    def neighbour(line: str, rule_id: str | None) -> None:
        assert_line_gets_rule(line, rule_id)

    return train_excerpt, wording, neighbour
