"""Log classification rules (``diag/rules/log_patterns.toml``) applied to parsed records, with Polars.

Used by ``parsers/cann_log.py`` at ingest; the rules are data, one entry per rule, first match wins.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from diag.analyses.error_codes import CANN_CODES, NAMED_CODE_CATALOGS
from diag.analyses.log_rule_files import merged_rule_data
from parsers._log_literals import FOLDED_INTO_ASCII, required_literals
from parsers._log_regex import ascii_regex

RULES_PATH = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_patterns.toml"
# the header catalog: code → the category it implies on its own
ACL_CODES_PATH = RULES_PATH.parent / "error_codes_acl.csv"
HCCL_CODES_PATH = RULES_PATH.parent / "error_codes_hccl.csv"
CODES_PATH = RULES_PATH.parent / "error_codes.csv"  # the hand-written catalog (codes seen in logs)


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


@lru_cache(maxsize=2)
def catalog_codes(*paths: Path) -> dict[str, tuple[str, ...]]:
    """Category → the catalogued codes that imply it on their own (``codes_from`` of a rule names one)."""
    out: dict[str, list[str]] = {}
    for path in paths or (CODES_PATH, CANN_CODES, ACL_CODES_PATH, HCCL_CODES_PATH, *NAMED_CODE_CATALOGS):
        with open(path, encoding="utf-8") as fh:
            for row in csv.DictReader(line for line in fh if not line.startswith("#")):
                listed = out.setdefault(row["category"], []) if row["category"] else []
                if row["category"] and row["code"] not in listed:
                    listed.append(row["code"])
    return {cat: tuple(codes) for cat, codes in out.items()}


def _rule_codes(rule: dict) -> tuple[str, ...]:
    """A rule's own ``codes`` and, with ``codes_from = "<category>"``, every catalogued code of that category."""
    own = tuple(str(c) for c in rule.get("codes", ()))
    if "codes_from" not in rule:
        return own
    # codes_prefix: only CUDA:, NCCL: … codes (a CUDA rule never takes an Ascend code)
    prefixes = tuple(rule.get("codes_prefix", ()))
    listed = catalog_codes()[rule["codes_from"]]
    return own + tuple(c for c in listed if c not in own and (not prefixes or c.startswith(prefixes)))


@lru_cache(maxsize=4)
def load_rules(path: Path = RULES_PATH) -> tuple[Rule, ...]:
    data = merged_rule_data(path)  # with the CUDA rules (rules/log_patterns_cuda.toml) in their places
    return tuple(
        Rule(
            r["id"],
            r["category"],
            r["severity"],
            r.get("role", "cause"),
            r.get("pattern", ""),
            _rule_codes(r),
            tuple(r.get("levels", ())),
            r["explanation"],
            r["fix"],
        )
        for r in data["rule"]
    )


_CODES_KEY = "_codes_key"  # "|EZ9999|507048|": the record's codes as one string, matched by a regex per rule


def _names_any(codes: list[str]) -> pl.Expr:
    """The record's ``codes`` (every code its text names) include one of ``codes``."""
    alternatives = "|".join(re.escape(c) for c in codes)
    hit = pl.col(_CODES_KEY).str.contains(rf"\|(?:{alternatives})\|")
    return (hit | pl.col("code").is_in(codes)).fill_null(False)


def _rule_condition(rule: Rule) -> pl.Expr:
    cond = pl.lit(False)
    if rule.pattern:
        cond = pl.col("raw").str.contains(ascii_regex(rule.pattern))
    if rule.codes:  # any code the record names, not only its primary one (a wrapper's code comes first)
        cond = cond | _names_any(list(rule.codes))
    if not rule.pattern and not rule.codes:
        cond = pl.lit(True)
    if rule.levels:
        cond = cond & _of_levels(pl.col("level"), rule.levels)
    return cond


UNLEVELLED = "NONE"  # in a rule's levels: a record without a level (a pasted line with no logger prefix)


def _of_levels(level, levels: tuple[str, ...]):  # type: ignore[no-untyped-def]  # a Polars Expr or Series
    named = level.is_in([lv for lv in levels if lv != UNLEVELLED]).fill_null(False)
    return named | level.is_null() if UNLEVELLED in levels else named


@dataclass(frozen=True)
class _Plan:
    """How a rule set is tried: the literals of every rule (one Aho-Corasick pass per block) and each rule's
    literals; rules whose pattern has no known literal, or none at all, are tried on every record left."""

    literals: tuple[str, ...]
    rule_literals: tuple[tuple[int, ...], ...]  # rule i → indices into literals
    everywhere: tuple[bool, ...]  # rule i is tried on every record not yet matched (of its levels)
    folded: tuple[bool, ...]  # rule i folds case: also tried where a non-ASCII fold of k / s is


@lru_cache(maxsize=8)
def _plan(rules: tuple[Rule, ...]) -> _Plan:
    index: dict[str, int] = {}
    per_rule, everywhere = [], []
    for rule in rules:
        lits = required_literals(rule.pattern) if rule.pattern else None
        per_rule.append(tuple(index.setdefault(lit, len(index)) for lit in lits or ()))
        everywhere.append(lits is None and not (rule.codes and not rule.pattern))
    folded = tuple("(?i" in rule.pattern for rule in rules)
    return _Plan(tuple(index), tuple(per_rule), tuple(everywhere), folded)


def _candidates(records: pl.DataFrame, plan: _Plan) -> list[np.ndarray]:
    """Per rule, the records whose text holds one of its literals (ASCII case aside), in record order."""
    none = np.empty(0, np.int64)
    if not plan.literals or records.is_empty():
        return [none] * len(plan.rule_literals)
    found = (
        records.select(
            row=pl.int_range(pl.len(), dtype=pl.Int64),
            lit=pl.col("raw").str.extract_many(
                list(plan.literals), ascii_case_insensitive=True, overlapping=True
            ),
        )
        .explode("lit")
        .drop_nulls("lit")
    )
    # the text as found is ASCII, as the literals are: its lower case names the literal
    number = {lit: i for i, lit in enumerate(plan.literals)}
    lit = found["lit"].str.to_lowercase().replace_strict(number, return_dtype=pl.Int64).to_numpy()
    order = np.argsort(lit, kind="stable")
    lit, row = lit[order], found["row"].to_numpy()[order]
    bounds = np.searchsorted(lit, np.arange(len(plan.literals) + 1))
    out = []
    for mine in plan.rule_literals:
        parts = [row[bounds[i] : bounds[i + 1]] for i in mine if bounds[i + 1] > bounds[i]]
        out.append(np.unique(np.concatenate(parts)) if parts else none)
    return out


def classify(records: pl.DataFrame, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """Add rule_id / category / severity: the first matching rule, each rule tried only on its candidates —
    the records holding one of its literals (``parsers/_log_literals``) or, for a rule with codes, naming any
    code — so that most rules meet no record of a block at all."""
    records = records.with_columns(
        pl.concat_str(pl.lit("|"), pl.col("codes").list.join("|"), pl.lit("|")).alias(_CODES_KEY)
    )
    plan = _plan(rules)
    by_literal = _candidates(records, plan)
    coded = np.flatnonzero(
        records.select((pl.col("codes").list.len() > 0) | pl.col("code").is_not_null())
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
    everyone = np.arange(records.height, dtype=np.int64)
    odd_folds = np.flatnonzero(
        records["raw"].str.contains_any(list(FOLDED_INTO_ASCII)).fill_null(False).to_numpy()
    )
    level = records["level"]
    of_levels: dict[tuple[str, ...], np.ndarray] = {}  # a rule's levels → the records of those levels
    slim = records.select("raw", "level", "code", _CODES_KEY)  # what a rule reads: gathered per rule
    idx = np.zeros(records.height, dtype=np.int64)  # 0 = no rule, i + 1 = rules[i]
    for i, rule in enumerate(rules):  # first match wins: a rule sees only records no rule above matched
        if plan.everywhere[i] and rule.levels:
            if rule.levels not in of_levels:
                of_levels[rule.levels] = np.flatnonzero(_of_levels(level, rule.levels).to_numpy())
            cand = of_levels[rule.levels]
        elif plan.everywhere[i]:
            cand = everyone
        else:
            cand = np.union1d(by_literal[i], coded) if rule.codes else by_literal[i]
            if plan.folded[i] and len(odd_folds):
                cand = np.union1d(cand, odd_folds)
        cand = cand[idx[cand] == 0]
        if not len(cand):
            continue
        hit = slim[cand].select(_rule_condition(rule)).to_series().fill_null(False).to_numpy()
        idx[cand[hit]] = i + 1
    take = pl.Series(idx)

    def column(values: list[str]) -> pl.Series:
        return pl.Series([None, *values], dtype=pl.String).gather(take)

    return records.drop(_CODES_KEY).with_columns(
        rule_id=column([r.id for r in rules]),
        category=column([r.category for r in rules]),
        severity=column([r.severity for r in rules]),
    )
