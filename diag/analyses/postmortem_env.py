"""The environment of a postmortem: versions, device, profiler settings and relevant environment variables.

For a job, one environment per rank: what every rank shares is reported once, and every key whose values
differ between ranks (a CANN or torch_npu version, a profiler setting, an HCCL variable…) is flagged.
"""

from __future__ import annotations

import json
from typing import Any

from diag.analyses.runs import list_runs
from diag.errors import DiagError
from diag.grouping import rank_or_run
from diag.i18n import t
from diag.store import Store

ENV_PREFIXES = ("ASCEND_", "HCCL_", "ACL", "PYTORCH_", "TASK_QUEUE", "NPU_", "CUDA_", "NCCL_", "TORCH", "HOST_CACHE",
                "INF_NAN", "COMBINED_ENABLE", "MULTI_STREAM", "OMP_")  # fmt: skip
RUN_KEYS = ("platform", "device_name", "device", "rank", "cann_version", "torch_npu_version", "profiler_level",
            "aic_metrics", "export_type", "source")  # fmt: skip
PER_RANK = {"device", "rank", "source", "distributed_args.rank"}  # differ between ranks by design


def json_value(value: Any) -> Any:  # noqa: ANN401
    """A JSON column read back: the decoded value of a JSON string (None if it does not parse), else as is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def environment(store: Store, run_id: int | None) -> dict[str, Any]:
    if run_id is None:
        return {}
    rows = list_runs(store, run_id)
    if not rows:
        return {}
    r = rows[0]
    env: dict[str, Any] = {k: r.get(k) for k in RUN_KEYS if r.get(k) not in (None, "")}
    versions = json_value(r.get("versions"))
    if versions:
        env["versions"] = versions
    meta_rows = store.cursor().execute("SELECT metadata FROM runs WHERE run_id = ?", [run_id]).fetchall()
    meta = json_value(meta_rows[0][0]) if meta_rows else None
    if isinstance(meta, dict):
        variables = meta.get("ENV_VARIABLES") or {}
        env["env_variables"] = {
            k: v
            for k, v in sorted(variables.items())
            if v not in (None, "") and k.upper().startswith(ENV_PREFIXES)
        }
        if meta.get("distributed_args"):
            env["distributed_args"] = meta["distributed_args"]
    env.update(environment_checks(store, run_id=run_id))
    return env


CHECK_KEYS = ("version check", "setting advice")  # judged once per run or job, not compared rank by rank


def environment_checks(store: Store, run_id: int | None = None, job_id: int | None = None) -> dict[str, Any]:
    """The version-matrix answer and the settings that cost time or have advice (diag.analyses.env_check)."""
    from diag.analyses.env_check import environment_check  # it imports findings, which the postmortem imports

    try:
        check = environment_check(store, run_id, job_id)
    except DiagError:
        return {}
    out: dict[str, Any] = {"version check": check["answer"]}
    advice = {
        s["name"]: t(
            "pm.env.setting", value=s["value"] or t("pm.env.unset"), status=s["status"], advice=s["advice"]
        )
        for s in check["settings"]
        if s["status"] in ("bad", "advice")
    }
    if advice:
        out["setting advice"] = advice
    return out


def _flat(env: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in env.items():
        if isinstance(v, dict):
            out.update({f"{k}.{a}": b for a, b in v.items()})
        else:
            out[k] = v
    return out


def job_environment(
    store: Store, runs: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(what all ranks share, one environment per rank, the keys whose values differ between ranks)."""
    per_rank = [
        {"run_id": r["run_id"], "rank": r.get("rank"), "env": environment(store, r["run_id"])} for r in runs
    ]
    flats = [(p, _flat(p["env"])) for p in per_rank]
    keys = sorted({k for _, f in flats for k in f if k.partition(".")[0] not in CHECK_KEYS} - PER_RANK)
    common: dict[str, Any] = {"ranks": len(runs)}
    diffs: list[dict[str, Any]] = []
    for key in keys:
        present = {_label(p): f[key] for p, f in flats if f.get(key) not in (None, "")}
        distinct = {json.dumps(v, sort_keys=True, default=str) for v in present.values()}
        if len(distinct) > 1:
            diffs.append(
                {
                    "key": key,
                    "values": present,
                    "ranks_missing": [_label(p) for p, f in flats if key not in f],
                }
            )
        elif present:
            head, _, tail = key.partition(".")
            value = next(iter(present.values()))
            if tail:
                common.setdefault(head, {})[tail] = value
            else:
                common[key] = value
    job_ids = {r.get("job_id") for r in runs}
    if len(job_ids) == 1 and None not in job_ids:
        common.update(environment_checks(store, job_id=job_ids.pop()))
    return common, per_rank, diffs


def _label(p: dict[str, Any]) -> str:
    return rank_or_run(p["rank"], p["run_id"])
