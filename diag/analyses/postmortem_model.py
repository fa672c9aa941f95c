"""The postmortem object and its statements: what diag.analyses.postmortem builds and diag.report renders."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Statement:
    text: str
    evidence: dict[str, Any] = field(default_factory=dict)  # log_lines, ops, time_range_ns, figures
    owner: str | None = None  # actions: code | config | stack | vendor | hardware (rules/owners.toml)
    owner_reason: str = ""
    owner_steps: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Postmortem:
    run_id: int | None
    baseline_run_id: int | None
    scope: str
    title: str
    summary: str
    what_happened: list[Statement] = field(default_factory=list)
    impact: list[Statement] = field(default_factory=list)
    root_cause: dict[str, Any] | None = None  # source, category, title, severity, statement
    contributing: list[Statement] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    actions: list[Statement] = field(default_factory=list)
    comparison: dict[str, Any] | None = None  # e2e per step both sides, ratio, top_losses
    chart: list[dict[str, Any]] = field(default_factory=list)  # device time per bucket, for the report's SVG
    notes: dict[str, str] = field(
        default_factory=dict
    )  # free text saved from the app: title, owner, follow-ups…
    job_id: int | None = None
    ranks: list[dict[str, Any]] = field(
        default_factory=list
    )  # per rank: step figures, failed steps, first error
    failed_steps: list[dict[str, Any]] = field(default_factory=list)  # see diag.analyses.postmortem_steps
    outlier_steps: list[dict[str, Any]] = field(default_factory=list)  # ≥ 3× the median step: not failed
    environment_diff: list[dict[str, Any]] = field(
        default_factory=list
    )  # job: keys that differ between ranks
    clock: dict[str, Any] = field(default_factory=dict)  # log_offset_ns (log clock − trace clock), basis
    serving: list[dict[str, Any]] = field(default_factory=list)  # judged serving runs of this deployment
    serving_comparison: dict[str, Any] | None = None  # serving figures against the baseline deployment's
    episode: int | None = None  # the log episode covered when no run / job was given (None: every log)
    episodes: list[dict[str, Any]] = field(default_factory=list)  # every log episode of the scope
    memory: list[Statement] = field(default_factory=list)  # diag.analyses.postmortem_memory
    memory_oom: bool = False  # the scope holds an OOM record: the memory section leads the report

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
