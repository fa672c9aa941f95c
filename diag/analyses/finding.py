"""A finding — one conclusion about a run with its evidence, suggestion and owner — and the thresholds file.

Its own module so that every analysis that makes findings (memory, environment, utilization, MoE, cluster…)
imports it without importing ``findings``, which gathers them all: no import cycle, no late imports.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses import owners

THRESHOLDS = Path(__file__).resolve().parent.parent / "rules" / "thresholds.toml"
FINDING_CODES = THRESHOLDS.with_name("finding_codes.toml")


def thresholds() -> dict[str, Any]:
    with open(THRESHOLDS, "rb") as fh:
        return tomllib.load(fh)


@dataclass
class Finding:
    run_id: int
    category: str  # cpu_fallback | communication | data_movement | idle | recompile | top_ops | host_fallback
    # | data_quality | host_sync
    severity: str  # high | medium | low | info
    title: str
    impact_pct: float
    impact_ns: int
    evidence: dict[str, Any] = field(default_factory=dict)  # op names, counts, time ranges (ns)
    suggestion: str = ""
    start_ns: int | None = None  # where to look on the timeline
    end_ns: int | None = None
    owner: str | None = None  # code | config | stack | vendor | hardware; None: from rules/owners.toml
    owner_reason: str = ""
    owner_steps: list[dict[str, str]] = field(default_factory=list)  # [{owner, step}] in the order to try
    code: str = ""  # the stable kind of finding (rules/finding_codes.toml): scripts match on it

    def to_json(self) -> dict[str, Any]:
        return owners.attach(asdict(self), lambda: owners.for_finding(self.category, self.evidence))

    def resolved_owner(self) -> str | None:
        """Its own owner, else the rules' (what the pages group by)."""
        return owners.of_finding(self).owner


@cache
def finding_codes() -> dict[str, dict[str, str]]:
    """Every finding code with its category, English meaning and module (rules/finding_codes.toml)."""
    with open(FINDING_CODES, "rb") as fh:
        return tomllib.load(fh)["code"]


def severity(pct: float, t: dict[str, Any]) -> str:
    """high / medium / low from a share of device time ([severity] of the thresholds)."""
    if pct >= t["severity"]["high_pct"]:
        return "high"
    if pct >= t["severity"]["medium_pct"]:
        return "medium"
    return "low"


def pct(ns: int, e2e: int) -> float:
    return 100.0 * ns / e2e if e2e else 0.0
