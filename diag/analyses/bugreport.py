"""The vendor bug report of a run: what an issue against CANN / torch_npu / the driver needs, and nothing private.

Sections: versions and device (the run's profiler_info / metadata), the root cause of its logs with its owner
(rules/owners.toml), the error codes with their catalog meaning (``error_codes``), the failing op (named by its
records: ``fault kernel_name=`` / ``fault op_name=`` / ``Op [X]`` …, rules/log_fields.toml) with the shapes, dtypes
and formats of its kernel rows in the profile, the minimal evidence lines (``file:line`` + text), the environment
that was set (ASCEND_* / HCCL_* / PYTORCH_NPU_* of profiler_metadata.json) and reproduction hints.

Privacy: every path is cut to its shortest unambiguous tail, and unless ``include_hosts``: IPv4 addresses, host
names the run records (HOSTNAME, hostname / host_name keys) and user names (``/home/<user>``, USER / LOGNAME) are
replaced by ``<ip>``, ``<host>`` and ``<user>`` in every text of the report.
"""

from __future__ import annotations

import json
import re
from typing import Any

from diag.analyses import owners
from diag.analyses.error_codes import describe_code
from diag.analyses.log_diagnosis import RootCause, root_causes
from diag.analyses.log_explain import read_fields
from diag.analyses.postmortem_env import environment
from diag.errors import DiagError
from diag.store import Store

ENV_PREFIXES = ("ASCEND_", "HCCL_", "PYTORCH_NPU_")  # the settings a vendor asks for
VERSION_KEYS = ("cann_version", "torch_npu_version", "torch_version", "pytorch_version", "driver_version",
                "firmware_version", "vllm_version", "vllm_ascend_version", "mindie_version", "python_version")  # fmt: skip
MAX_LINES = 8  # evidence lines: the root cause's lead records
MAX_SHAPES = 5  # distinct shape / dtype rows of the failing op
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_HOME = re.compile(r"(/home/|/Users/)([^/\s'\"]+)")
_HOST_KEYS = re.compile(r"^(hostname|host_name|host|node_name|HOSTNAME)$", re.I)
_USER_KEYS = ("USER", "LOGNAME", "USERNAME")


def _tails(paths: list[str]) -> dict[str, str]:
    """Each path's shortest tail of components that no other path of the set ends with (as ``diag findings``)."""
    parts = {p: [x for x in re.split(r"[\\/!]", p) if x] for p in set(paths)}
    out = {}
    for p, ps in parts.items():
        k = next((k for k in range(1, len(ps) + 1)
                  if not any(o != p and os[-k:] == ps[-k:] for o, os in parts.items())), len(ps))  # fmt: skip
        out[p] = "/".join(ps[-k:])
    return out


class Redactor:
    """Replaces the private strings of one run in any text: paths by their tails, hosts, IPs and user names."""

    def __init__(self, paths: list[str], hosts: set[str], users: set[str], keep_hosts: bool) -> None:
        self.tails = sorted(_tails(paths).items(), key=lambda kv: -len(kv[0]))  # longest first
        self.hosts = sorted((h for h in hosts if len(h) >= 3), key=len, reverse=True)
        self.users = sorted((u for u in users if len(u) >= 2), key=len, reverse=True)
        self.keep_hosts = keep_hosts

    def __call__(self, text: Any) -> Any:  # noqa: ANN401 - any JSON value
        if isinstance(text, dict):
            return {self(k): self(v) for k, v in text.items()}
        if isinstance(text, list):
            return [self(v) for v in text]
        if not isinstance(text, str):
            return text
        for path, tail in self.tails:
            text = text.replace(path, tail)
        if self.keep_hosts:
            return text
        text = _HOME.sub(lambda m: f"{m.group(1)}<user>", _IPV4.sub("<ip>", text))
        for h in self.hosts:
            text = re.sub(rf"(?<![\w.-]){re.escape(h)}(?![\w-])", "<host>", text)
        for u in self.users:
            text = re.sub(rf"(?<![\w.-]){re.escape(u)}(?![\w-])", "<user>", text)
        return text


def _walk_private(value: Any, hosts: set[str], users: set[str]) -> None:  # noqa: ANN401
    """Host and user names a run's metadata records, at any depth."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and v and _HOST_KEYS.match(str(k)):
                hosts.add(v)
            elif isinstance(v, str) and v and k in _USER_KEYS:
                users.add(v)
            else:
                _walk_private(v, hosts, users)
    elif isinstance(value, list):
        for v in value:
            _walk_private(v, hosts, users)


def _run_row(store: Store, run_id: int) -> dict[str, Any]:
    cur = store.cursor()
    rows = cur.execute(
        "SELECT source, metadata::VARCHAR, config::VARCHAR, versions::VARCHAR FROM runs WHERE run_id = ?",
        [run_id],
    ).fetchall()
    if not rows:
        raise DiagError(f"no run {run_id} in {store.path}")
    source, meta, config, versions = rows[0]
    files = [r[0] for r in cur.execute("SELECT source FROM files WHERE run_id = ?", [run_id]).fetchall()]
    return {"source": source, "files": files, **{k: json.loads(v) if v else None for k, v in
            (("metadata", meta), ("config", config), ("versions", versions))}}  # fmt: skip


def _redactor(run: dict[str, Any], causes: list[RootCause], keep_hosts: bool) -> Redactor:
    hosts: set[str] = set()
    users: set[str] = set()
    for part in (run["metadata"], run["config"], run["versions"]):
        _walk_private(part, hosts, users)
    paths = [p for p in [run["source"], *run["files"], *(f for rc in causes for f in rc.files)] if p]
    users |= {m.group(2) for p in paths for m in _HOME.finditer(p)}
    return Redactor(paths, hosts, users, keep_hosts)


def _versions(env: dict[str, Any]) -> dict[str, Any]:
    stored = {**(env.get("versions") or {}), **{k: env[k] for k in VERSION_KEYS if env.get(k)}}
    return {k: v for k, v in stored.items() if v not in (None, "")}


def _failing_op(store: Store, run_id: int, rc: RootCause | None) -> dict[str, Any] | None:
    """The op the root cause's records name, with its kernel rows' shapes / dtypes / formats in the profile."""
    if rc is None:
        return None
    fields = read_fields([e.raw for e in rc.evidence])
    kernel, op = fields.get("kernel"), fields.get("op") or fields.get("aclnn_op")
    if not kernel and not op:
        return {"name": None, "note": "the records name no kernel or op"}
    op_type = op or re.split(r"_", kernel or "", maxsplit=1)[0]  # RealDiv_<hash>_high_precision_… → RealDiv
    rows = (
        store.cursor()
        .execute(
            """SELECT op_type, input_shapes, input_dtypes, input_formats, output_shapes, output_dtypes,
                  any_value(op_state), any_value(block_dim), count(*) AS n, sum(dur_ns)
           FROM kernels WHERE run_id = $run AND (name = $kernel OR op_type = $op OR name = $op)
           GROUP BY ALL ORDER BY n DESC, 2 LIMIT $max""",
            {"run": run_id, "kernel": kernel or "", "op": op_type, "max": MAX_SHAPES},
        )
        .fetchall()
    )
    cols = ("op_type", "input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes",
            "op_state", "block_dim", "count", "total_ns")  # fmt: skip
    shapes = [dict(zip(cols, r, strict=True)) for r in rows]
    return {
        "name": kernel or op,
        "op_type": op_type,
        "named_by": "fault kernel_name" if kernel else "op",
        "error_str": fields.get("error_str"),
        "kernel_rows": shapes,
        "note": ""
        if shapes
        else f"no kernel of {op_type} in this run's profile: its shapes are not recorded",
    }


def _hints(env: dict[str, Any], rc: RootCause | None, op: dict[str, Any] | None) -> list[str]:
    variables = env.get("env_variables") or {}
    out = []
    if rc is not None and rc.category in ("device_exception", "task_timeout"):
        blocking = variables.get("ASCEND_LAUNCH_BLOCKING")
        out.append("Rerun with ASCEND_LAUNCH_BLOCKING=1 so that the error is raised at the failing op"
                   + (" (it was already set)" if blocking == "1" else ""))  # fmt: skip
    if op and op.get("kernel_rows"):
        k = op["kernel_rows"][0]
        out.append(f"Call {op['op_type']} alone with inputs of shapes {k['input_shapes'] or '—'} and dtypes "
                   f"{k['input_dtypes'] or '—'} (formats {k['input_formats'] or '—'})")  # fmt: skip
    if env.get("profiler_level"):
        out.append(f"The profile was taken at {env['profiler_level']}; attach the plog / device log directory "
                   "(ASCEND_PROCESS_LOG_PATH, default ~/ascend/log) of the failing process")  # fmt: skip
    return out


def bug_report(store: Store, run_id: int, include_hosts: bool = False) -> dict[str, Any]:
    """The report of ``run_id`` as one JSON-ready dict (the sections in order); private strings redacted."""
    run = _run_row(store, run_id)
    env = environment(store, run_id)
    causes = root_causes(store, run_id)
    lead = causes[0] if causes else None
    codes = sorted({c["code"] for rc in causes[:1] for c in rc.codes if c.get("code")})
    op = _failing_op(store, run_id, lead)
    report = {
        "run_id": run_id,
        "versions": _versions(env),
        "device": {k: env.get(k) for k in ("platform", "device_name", "device", "rank")},
        "root_cause": None if lead is None else {
            "category": lead.category, "title": lead.title, "severity": lead.severity,
            "explanation": lead.explanation, "fix": lead.fix, **owners.for_log(lead.category, lead.codes).fields(),
        },
        "error_codes": [{k: describe_code(c).get(k, "") for k in ("code", "name", "component", "meaning", "typical_fix")}
                        | {"code": c} for c in codes],
        "failing_op": op,
        "evidence": [] if lead is None else [
            {"where": f"{e.file}:{e.line_no}", "text": e.raw.splitlines()[0] if e.raw else ""}
            for e in lead.evidence[:MAX_LINES]],
        "environment": {k: v for k, v in (env.get("env_variables") or {}).items() if k.startswith(ENV_PREFIXES)},
        "profiler": {k: env[k] for k in ("profiler_level", "aic_metrics", "export_type") if env.get(k)},
        "reproduction": _hints(env, lead, op),
        "redacted": not include_hosts,
    }  # fmt: skip
    versions = report.pop("versions")  # version strings like 24.1.0.3 are not addresses: never redacted
    return {"run_id": run_id, "versions": versions, **_redactor(run, causes, include_hosts)(report)}
