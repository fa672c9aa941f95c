"""The device side of a postmortem: the run's device-time story and the comparison with a GPU baseline."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from diag.analyses.compare import compare
from diag.analyses.counts import kernel_counts
from diag.analyses.findings import Finding, device_findings
from diag.analyses.postmortem_model import Postmortem, Statement
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, breakdown, bucket_label
from diag.i18n import t
from diag.store import Store


def device_story(
    store: Store, run: dict[str, Any]
) -> tuple[list[Finding], list[dict[str, Any]], Statement | None]:
    """The run's device findings, its chart (device time per bucket) and the statement that sums it up."""
    if run.get("start_ns") is None:
        return [], [], None
    bd = breakdown(store, run["run_id"])
    total = bd.total
    if not total or not total.e2e_ns:
        return [], [], None
    findings = device_findings(store, run["run_id"], bd)
    e2e = total.e2e_ns
    chart = [
        {"bucket": b, "label": BUCKET_LABELS[b], "ns": total.buckets[b], "pct": 100 * total.buckets[b] / e2e}
        for b in BUCKETS
        if total.buckets[b]
    ]
    top = sorted(chart, key=lambda c: -c["ns"])[:3]
    counts = kernel_counts(store, run["run_id"], bd)  # the one definition of device kernels per step
    per_step = t("pm.device.per_step", n=f"{counts.kernels_per_step:,.1f}") if counts.kernels_per_step else ""
    st = Statement(
        t(
            "pm.device.story",
            steps=len(bd.steps),
            source=bd.step_source,
            ms=f"{e2e / 1e6:,.3f}",
            kernels=f"{counts.device_kernels:,}",
            per_step=per_step,
            shares=", ".join(f"{bucket_label(c['bucket'])} {c['pct']:.1f}%" for c in top),
            quality=t("pm.device.quality", note=counts.note()) if counts.note() else "",
        ),
        {
            "time_range_ns": [total.start_ns, total.end_ns],
            "figures": {"e2e_ns": e2e, "steps": len(bd.steps), "buckets_ns": total.buckets},
            "counts": counts.to_json(),
        },
    )
    return findings, chart, st


def baseline_story(pm: Postmortem, store: Store, run_id: int, baseline_run_id: int) -> Statement:
    """The comparison with a CUDA baseline: end-to-end per step and the three op classes losing most.

    Returns the end-to-end statement (a job's report names the rank it was measured on)."""
    cmp = compare(store, run_id, baseline_run_id)
    e2e = next(o for o in cmp.overall if o["bucket"] == "e2e")
    losses = [asdict(c) for c in cmp.top_losses(3)]
    pm.comparison = {
        "run_a": cmp.run_a,
        "run_b": cmp.run_b,
        "steps_a": cmp.steps_a,
        "steps_b": cmp.steps_b,
        "e2e": e2e,
        "top_losses": losses,
        "warnings": cmp.warnings,
        "biggest_loss": cmp.biggest_loss(),  # over every bucket: idle, AI CPU, exposed communication too
        "source_b": cmp.source_b,  # timeline | kernel_summary (nsys stats: no steps, no buckets)
    }
    ratio = f"{e2e['ratio']:.2f}×" if e2e["ratio"] else t("pm.device.na")
    base_ms = (
        t("pm.device.kernel_summary") if e2e["per_step_b_ms"] is None else f"{e2e['per_step_b_ms']:.3f} ms"
    )
    overall = Statement(
        t("pm.device.e2e", a=f"{e2e['per_step_a_ms']:.3f}", b=base_ms, run=baseline_run_id, ratio=ratio),
        {"figures": e2e, "warnings": cmp.warnings},
    )
    pm.impact.append(overall)
    if loss := cmp.biggest_loss():
        pm.impact.append(
            Statement(
                t(
                    "pm.device.biggest_loss",
                    label=loss["label"],
                    delta=f"{loss['delta_per_step_ms']:.3f}",
                    a=f"{loss['per_step_a_ms']:.3f}",
                    b=f"{loss['per_step_b_ms']:.3f}",
                ),
                {"figures": loss},
            )
        )
    for c in losses:
        r = f"{c['ratio']:.2f}×" if c["ratio"] else t("pm.device.baseline_none")
        pm.impact.append(
            Statement(
                t(
                    "pm.device.op_class_loss",
                    op_class=c["op_class"],
                    delta=f"{c['delta_per_step_ms']:.3f}",
                    a=f"{c['per_step_a_ns'] / 1e6:.3f}",
                    b=f"{c['per_step_b_ns'] / 1e6:.3f}",
                    ratio=r,
                ),
                {"figures": c},
            )
        )
    return overall
