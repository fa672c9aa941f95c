"""The log classification rules as one list: ``rules/log_patterns.toml`` (CANN / torch_npu / vLLM-Ascend) with
``rules/log_patterns_cuda.toml`` (PyTorch CUDA, NCCL, vLLM on NVIDIA) merged in.

First match wins, so where a CUDA rule goes matters: each one goes just before the base rule its ``before``
names (e.g. a generic ``UserWarning`` noise rule before ``unclassified_error``, so that every Ascend rule sees a
torch_npu warning first), else before the first base rule (its words are CUDA's own: no Ascend record has them).
Read by ``parsers/_log_rules.py`` (classification at ingest) and ``log_diagnosis`` (explanations, roles).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
PATTERNS = RULES_DIR / "log_patterns.toml"
CUDA_PATTERNS = RULES_DIR / "log_patterns_cuda.toml"


def merged_rule_data(path: Path = PATTERNS, extra: Path = CUDA_PATTERNS) -> dict[str, Any]:
    """``path``'s TOML with ``extra``'s rules placed in its ``rule`` list (only for the default rules file: a
    test's own rules file is read alone)."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    if path != PATTERNS or not extra.exists():
        return data
    with open(extra, "rb") as fh:
        added = tomllib.load(fh).get("rule", [])
    base = data["rule"]
    ids = {r["id"] for r in base}
    unknown = sorted({r["before"] for r in added if "before" in r} - ids)
    if unknown:
        raise ValueError(f"{extra.name}: `before` names no rule of {path.name}: {', '.join(unknown)}")
    merged: list[dict[str, Any]] = []
    for rule in base:
        merged += [r for r in added if r.get("before", base[0]["id"]) == rule["id"]]
        merged.append(rule)
    data["rule"] = merged
    return data
