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

from diag.analyses.log_rule_files import merged_rule_data
from parsers._log_regex import ascii_regex

RULES_PATH = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_patterns.toml"
# the header catalog: code → the category it implies on its own
ACL_CODES_PATH = RULES_PATH.parent / "error_codes_acl.csv"
HCCL_CODES_PATH = RULES_PATH.parent / "error_codes_hccl.csv"
CODES_PATH = RULES_PATH.parent / "error_codes.csv"  # the hand-written catalog (codes seen in logs)
# CUDA / NCCL / cuBLAS / cuDNN header catalogs (CUDA:<name> …), for the CUDA rules' codes_from
CUDA_CODES_PATHS = tuple(RULES_PATH.parent / f"error_codes_{k}.csv" for k in ("cuda", "nccl", "cublas", "cudnn"))  # fmt: skip


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
    for path in paths or (CODES_PATH, ACL_CODES_PATH, HCCL_CODES_PATH, *CUDA_CODES_PATHS):
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
        cond = cond & pl.col("level").is_in(list(rule.levels)).fill_null(False)
    return cond


def classify(records: pl.DataFrame, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """Add rule_id / category / severity: the first matching rule, tried only where any rule can match."""
    records = records.with_columns(
        pl.concat_str(pl.lit("|"), pl.col("codes").list.join("|"), pl.lit("|")).alias(_CODES_KEY)
    )
    patterns = [ascii_regex(r.pattern) for r in rules if r.pattern]
    # two regexes, case-sensitive and (?i) patterns apart: one alternation of both kinds outgrows the regex
    # engine's lazy-DFA cache on console text and falls back to a ~10x slower engine (measured on a 4 MB corpus
    # block: 0.57 s as one regex, 0.013 s + 0.051 s as two)
    combined = [
        "|".join(f"(?:{p})" for p in patterns if p.startswith("(?i)") == folded)
        for folded in (False, True)
        if any(p.startswith("(?i)") == folded for p in patterns)
    ]
    codes = sorted({c for r in rules for c in r.codes})
    levels = sorted({lv for r in rules if not r.pattern and not r.codes for lv in r.levels})
    maybe = records.select(
        pl.any_horizontal(pl.col("raw").str.contains(rx) for rx in combined) | _names_any(codes)
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

    return records.drop(_CODES_KEY).with_columns(
        rule_id=column([r.id for r in rules]),
        category=column([r.category for r in rules]),
        severity=column([r.severity for r in rules]),
    )
