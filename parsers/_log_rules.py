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
from parsers._log_literals import required_literals
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


@dataclass(frozen=True)
class _Plan:
    """How a rule set is tried: the literals of every rule (one Aho-Corasick pass per block) and each
    literal's rules; rules whose pattern has no known literal, or none at all, are tried on every record left."""

    literals: tuple[str, ...]
    literal_rules: pl.DataFrame  # literal → rule (0-based), one row per pair
    everywhere: tuple[bool, ...]  # rule i is tried on every record not yet matched


@lru_cache(maxsize=8)
def _plan(rules: tuple[Rule, ...]) -> _Plan:
    pairs: dict[str, list[int]] = {}
    everywhere = []
    for i, rule in enumerate(rules):
        lits = required_literals(rule.pattern) if rule.pattern else None
        for lit in lits or ():
            pairs.setdefault(lit, []).append(i)
        everywhere.append(lits is None and not (rule.codes and not rule.pattern))
    frame = pl.DataFrame(
        {"lit": [k for k, v in pairs.items() for _ in v], "rule": [i for v in pairs.values() for i in v]},
        schema={"lit": pl.String, "rule": pl.Int64},
    )
    return _Plan(tuple(pairs), frame, tuple(everywhere))


def _candidates(records: pl.DataFrame, plan: _Plan, n_rules: int) -> list[np.ndarray]:
    """Per rule, the records whose text holds one of its literals (ASCII case aside), in record order."""
    if not plan.literals or records.is_empty():
        return [np.empty(0, np.int64)] * n_rules
    found = (
        records.select(
            row=pl.int_range(pl.len(), dtype=pl.Int64),
            lit=pl.col("raw").str.extract_many(
                list(plan.literals), ascii_case_insensitive=True, overlapping=True
            ),
        )
        .explode("lit")
        .drop_nulls("lit")
        .with_columns(pl.col("lit").str.to_lowercase())  # the text as found: ASCII, as the literals are
        .join(plan.literal_rules, on="lit")
        .select("rule", "row")
        .unique()
        .sort("rule", "row")
    )
    rule, row = found["rule"].to_numpy(), found["row"].to_numpy()
    bounds = np.searchsorted(rule, np.arange(n_rules + 1))
    return [row[bounds[i] : bounds[i + 1]] for i in range(n_rules)]


def classify(records: pl.DataFrame, rules: tuple[Rule, ...]) -> pl.DataFrame:
    """Add rule_id / category / severity: the first matching rule, each rule tried only on its candidates —
    the records holding one of its literals (``parsers/_log_literals``) or, for a rule with codes, naming any
    code — so that most rules meet no record of a block at all."""
    records = records.with_columns(
        pl.concat_str(pl.lit("|"), pl.col("codes").list.join("|"), pl.lit("|")).alias(_CODES_KEY)
    )
    plan = _plan(rules)
    by_literal = _candidates(records, plan, len(rules))
    coded = np.flatnonzero(
        records.select((pl.col("codes").list.len() > 0) | pl.col("code").is_not_null())
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
    everyone = np.arange(records.height, dtype=np.int64)
    slim = records.select("raw", "level", "code", _CODES_KEY)  # what a rule reads: gathered per rule
    idx = np.zeros(records.height, dtype=np.int64)  # 0 = no rule, i + 1 = rules[i]
    for i, rule in enumerate(rules):  # first match wins: a rule sees only records no rule above matched
        if plan.everywhere[i]:
            cand = everyone
        elif rule.codes:
            cand = np.union1d(by_literal[i], coded)
        else:
            cand = by_literal[i]
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
