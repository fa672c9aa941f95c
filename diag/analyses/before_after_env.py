"""Which owner's change was it: the recorded versions, settings and device of two runs, side by side.

Both runs' environments come from ``diag.analyses.postmortem_env.environment`` (profiler_info, profiler_metadata,
the runs table): versions (CANN, torch_npu, the metadata's version record) are the stack's; environment
variables, profiler level / AIC metrics, export type and the parallel layout are settings (config); the device
model is hardware.  Keys that differ between any two runs by design (the source folder, the rank, the device id)
and the version-matrix verdicts (judged per run, not compared) are left out.

When nothing recorded differs the change is in the code or the input: the owner is ``code``.
"""

from __future__ import annotations

import json
from typing import Any

from diag.analyses.postmortem_env import CHECK_KEYS, PER_RANK, environment
from diag.i18n import t
from diag.store import Store

STACK, CONFIG, HARDWARE, CODE = "stack", "config", "hardware", "code"
SKIPPED = {*PER_RANK, "source", "platform"}  # different for two runs by design; the platform is equal here
KIND_OF_KEY = {"cann_version": STACK, "torch_npu_version": STACK, "device_name": HARDWARE}
KIND_OF_GROUP = {"versions": STACK}  # every other group (env_variables, distributed_args) is a setting
LABELS = {
    "cann_version": "CANN",
    "torch_npu_version": "torch_npu",
    "profiler_level": "profiler level",
    "aic_metrics": "AIC metrics",
    "export_type": "export type",
    "device_name": "device",
}
# What to try for each owner, in this order: reverting a setting is one rerun, pinning a version an install.
STEP_ORDER = (CONFIG, STACK, HARDWARE)
STEP_TEXT = {
    CONFIG: "before_after.step.config",
    STACK: "before_after.step.stack",
    HARDWARE: "before_after.step.hardware",
}


def _flat(env: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in env.items():
        if key in CHECK_KEYS or key in SKIPPED:
            continue
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items() if f"{key}.{k}" not in SKIPPED})
        else:
            out[key] = value
    return out


def _kind(key: str) -> str:
    group, _, _ = key.partition(".")
    return KIND_OF_KEY.get(key) or KIND_OF_GROUP.get(group) or CONFIG


def _label(key: str) -> str:
    group, _, name = key.partition(".")
    return LABELS.get(key) or (name if name else group)


def _text(value: Any) -> str:  # noqa: ANN401
    if value in (None, ""):
        return "—"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def environment_changes(store: Store, run_a: int, run_b: int) -> list[dict[str, str]]:
    """Every recorded version or setting whose value differs: key, label, before, after, kind (stack | config |
    hardware); versions first, then settings, then the device."""
    before, after = _flat(environment(store, run_a)), _flat(environment(store, run_b))
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = _text(before.get(key)), _text(after.get(key))
        if a != b:
            out.append({"key": key, "label": _label(key), "before": a, "after": b, "kind": _kind(key)})
    out.sort(key=lambda c: (STACK, CONFIG, HARDWARE).index(c["kind"]))  # stable: keys stay sorted within
    return out


def sentence(changes: list[dict[str, str]]) -> str:
    """'between these runs CANN changed 8.0.RC3 → 8.1.RC1 (stack) and HCCL_BUFFSIZE 200 → 400 (config)'."""
    if not changes:
        return t("before_after.env.none")
    parts = [
        t(
            "before_after.env.first" if i == 0 else "before_after.env.next",
            **c,
            kind_text=t(f"before_after.kind.{c['kind']}"),
        )
        for i, c in enumerate(changes)
    ]
    listed = (
        parts[0]
        if len(parts) == 1
        else t("before_after.env.list", head=t("before_after.env.sep").join(parts[:-1]), last=parts[-1])
    )
    return t("before_after.env.between", listed=listed)


def owner_of(changes: list[dict[str, str]]) -> dict[str, Any]:
    """owner (stack if only versions differ, config if only settings, the first to try when several, code when
    nothing recorded differs), its reason and the steps in the order to try them."""
    kinds = [k for k in STEP_ORDER if any(c["kind"] == k for c in changes)]
    if not kinds:
        return {
            "owner": CODE,
            "owner_reason": t("before_after.owner_none"),
            "owner_steps": [{"owner": CODE, "step": t("before_after.step.code")}],
        }
    steps = []
    for kind in kinds:
        names = ", ".join(
            f"{c['label']} {t('before_after.unset') if c['before'] == '—' else c['before']}"
            for c in changes
            if c["kind"] == kind
        )
        steps.append({"owner": kind, "step": t(STEP_TEXT[kind], names=names)})
    return {"owner": kinds[0], "owner_reason": sentence(changes), "owner_steps": steps}
