"""Operator classes shared by CUDA kernels and Ascend ops, from the rules file diag/rules/op_classes.csv.

The same rules run in Python (``classify``) and inside DuckDB (``sql_case``: one ``CASE`` compiled from the
rules, so millions of kernels are classified where they are stored).  Both search the lower-cased name; the
patterns are written in the subset of regular expressions that Python's ``re`` and DuckDB's RE2 read alike.
Ascend ops are matched on their op type against every rule first, then on their name.  Nothing is hidden:
a name no rule matches is class ``other``.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from diag.store import sql_literal

RULES = Path(__file__).resolve().parent.parent / "rules" / "op_classes.csv"
CLASSES = (
    "gemm", "moe_gemm", "moe_routing", "attention_prefill", "attention_decode", "kv_cache_write", "norm",
    "rope", "activation", "softmax", "sampling", "quantisation", "layout_cast", "elementwise", "reduce",
    "memcpy", "memset", "communication", "embedding", "other",
)  # fmt: skip
CLASSES = (*CLASSES[:-1], "moe_permute", "moe_dispatch_combine", "moe_alltoall", "other")  # MoE (#22)
PLATFORMS = ("cuda", "ascend")
OTHER = "other"


@dataclass(frozen=True)
class Rule:
    priority: int
    op_class: str
    platform: str  # cuda | ascend | *
    pattern: str
    example: str

    def applies_to(self, platform: str) -> bool:
        return self.platform in ("*", platform)


@cache
def rules() -> tuple[Rule, ...]:
    """The rules in priority order (the file is read once per process)."""
    with open(RULES, encoding="utf-8") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        out = [
            Rule(int(r["priority"]), r["class"].strip(), r["platform"].strip(), r["pattern"], r["example"])
            for r in reader
        ]
    for r in out:
        if r.op_class not in CLASSES or r.platform not in (*PLATFORMS, "*"):
            raise ValueError(f"{RULES}: bad rule {r}")
    return tuple(sorted(out, key=lambda r: r.priority))


@cache
def _compiled(platform: str) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(r.pattern), r.op_class) for r in rules() if r.applies_to(platform))


def _check_platform(platform: str) -> None:
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS}, not {platform!r}")


# aclnn kernel names end in their op type (aclnnCast_CastAiCore_Cast, aclnnInplaceCopy_TensorMove): a trace
# without kernel_details has no Type column, so the name's last part stands in for it.
ACLNN_TYPE = r"^aclnn[a-z0-9]*_(?:.*_)?([a-z0-9]+)$"
_ACLNN_TYPE = re.compile(ACLNN_TYPE)


def _texts(name: str | None, op_type: str | None, platform: str) -> list[str]:
    """What is matched, in order: the op type, (Ascend) the type an aclnn name ends in, the name."""
    texts = [t.lower() for t in (op_type, name) if t]
    if platform == "ascend" and not op_type and name and (m := _ACLNN_TYPE.match(name.lower())):
        texts.insert(0, m.group(1))
    return texts


def first_rule(name: str | None, op_type: str | None = None, platform: str = "cuda") -> Rule | None:
    """The rule that classifies this kernel / op (the first in priority order to match), or None."""
    _check_platform(platform)
    applicable = [r for r in rules() if r.applies_to(platform)]
    for low in _texts(name, op_type, platform):
        for rule, (pattern, _) in zip(applicable, _compiled(platform), strict=True):
            if pattern.search(low):
                return rule
    return None


def classify(name: str | None, op_type: str | None = None, platform: str = "cuda") -> str:
    """The op class of one kernel / op: the op type is tried against every rule first, then the name."""
    _check_platform(platform)
    for low in _texts(name, op_type, platform):
        for pattern, op_class in _compiled(platform):
            if pattern.search(low):
                return op_class
    return OTHER


def _whens(expr: str, platform: str) -> list[str]:
    low = f"lower({expr})"
    return [
        f"WHEN regexp_matches({low}, {sql_literal(r.pattern)}) THEN {sql_literal(r.op_class)}"
        for r in rules()
        if r.applies_to(platform)
    ]


def sql_case(name_expr: str, op_type_expr: str | None = None, platform: str = "cuda") -> str:
    """A DuckDB expression giving the op class of ``name_expr`` (and ``op_type_expr``), as ``classify`` does.

    For a table with many rows of few distinct names, classify the distinct names and join: a regex per rule
    per row is the cost of this expression.
    """
    _check_platform(platform)
    whens = _whens(op_type_expr, platform) if op_type_expr else []
    if platform == "ascend":
        no_type = f"{op_type_expr} IS NULL AND " if op_type_expr else ""
        aclnn = f"nullif(regexp_extract(lower({name_expr}), {sql_literal(ACLNN_TYPE)}, 1), '')"
        whens += [w.replace("WHEN ", f"WHEN {no_type}", 1) for w in _whens(aclnn, platform)]
    whens += _whens(name_expr, platform)
    return f"(CASE {' '.join(whens)} ELSE '{OTHER}' END)"


# Collective tasks keep the class `communication` unless the rules name them an MoE collective: expert parallelism's
# all-to-all and dispatch / combine are their own classes, so MoE time shows apart in the breakdown and compare.
MOE_COLLECTIVES = ("moe_alltoall", "moe_dispatch_combine")


def communication_class_sql(name_expr: str, op_type_expr: str | None, platform: str = "cuda") -> str:
    """The op class of a task whose kind is COMMUNICATION: an MoE collective's class, else 'communication'."""
    case = sql_case(name_expr, op_type_expr, platform)
    moe = ", ".join(f"'{c}'" for c in MOE_COLLECTIVES)
    return f"CASE WHEN ({case}) IN ({moe}) THEN ({case}) ELSE 'communication' END"


def sql_case_by_platform(name_expr: str, platform_expr: str, op_type_expr: str | None = None) -> str:
    """Like ``sql_case`` for rows of both platforms: ``platform_expr`` is 'cuda' or 'ascend' per row."""
    parts = " ".join(
        f"WHEN {platform_expr} = {sql_literal(p)} THEN {sql_case(name_expr, op_type_expr, p)}"
        for p in PLATFORMS
    )
    return f"(CASE {parts} ELSE '{OTHER}' END)"
