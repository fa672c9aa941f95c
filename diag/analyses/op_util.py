"""How close each op runs to the hardware: FLOPs and bytes from its shapes, achieved TFLOPS and GB/s, MFU,
bandwidth utilization and a roofline bound class, cross-checked with the Ascend PMU pipe ratios.

Per call, FLOPs and bytes come from the shapes and dtypes by the op's class in ``diag/rules/op_cost.toml``
(formulas as DuckDB SQL, with sources); the op's figures are sums over the calls that have them:
``achieved_tflops`` = FLOPs ÷ their time, ``achieved_gbps`` = bytes ÷ their time, ``mfu_pct`` = achieved ÷ the
device's dense peak for the op's first input dtype (``diag/rules/devices.toml``), ``bw_pct`` = achieved GB/s ÷
``hbm_gbps``, ``arithmetic_intensity`` = FLOPs ÷ bytes.

``bound``: ``latency`` when a call lasts under ``[utilization] latency_max_mean_us`` on average (launch and ramp
dominate: neither roof can be reached); else ``compute`` when the intensity is at least the device's ridge point
(peak FLOP/s ÷ bytes/s), else ``memory``. Without a known device (or peak for the dtype) there is no ridge: the
bound is left out, never guessed from another device, and ``peak_from`` says why.

``pmu_bound`` reads the PMU columns of kernel_details (duration-weighted over the op's calls): ``compute`` when
the busiest compute pipe (``aic_mac_ratio`` cube, ``aiv_vec_ratio`` vector) is busy at least ``pmu_busy_ratio``
of the cycles, else ``memory`` when a data-move pipe from/to global memory (``aic_mte2_ratio``,
``aiv_mte2_ratio``, ``aiv_mte3_ratio``) is, else ``latency`` (scalar, sync, waits). A busy MTE2 beside a busy
cube is a fed cube (double buffering), so the compute pipes are read first.

All row work is SQL over the ``kernels`` table (Ascend kernel_details / op_summary): CUDA kernel rows carry no
shapes, so a CUDA run gets calls and time but no figures.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses.counts import OP_TYPE_SQL
from diag.analyses.findings import thresholds
from diag.devices import Device, device_for_run, dtype_key
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "op_cost.toml"
BY = ("op", "kernel")
PMU_COMPUTE = ("aic_mac_ratio", "aiv_vec_ratio")
PMU_MEMORY = ("aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
UTIL_KEYS = (
    "cost_class", "costed_calls", "flops", "bytes", "achieved_tflops", "achieved_gbps", "mfu_pct", "bw_pct",
    "bound_pct", "arithmetic_intensity", "ridge_flops_per_byte", "bound", "pmu_bound", "peak_from", "m_rows",
)  # fmt: skip

__all__ = ["BY", "UTIL_KEYS", "cost_sql", "op_cost_rules", "op_utilization", "utilization_settings"]


@dataclass(frozen=True)
class CostClass:
    key: str
    label: str
    pattern: str
    when: str
    flops: str
    bytes: str
    formula: str
    source: str


@cache
def op_cost_rules() -> dict[str, Any]:
    with open(RULES, "rb") as fh:
        return tomllib.load(fh)


def _expand(expr: str, names: dict[str, str]) -> str:
    """``expr`` with each var name (as a whole word) replaced by its expression in parentheses."""
    for name, sub in names.items():
        expr = re.sub(rf"\b{re.escape(name)}\b", f"({sub})", expr)
    return expr


@cache
def cost_classes() -> tuple[CostClass, ...]:
    out = []
    for raw in op_cost_rules()["class"]:
        names = raw.get("vars", {})
        out.append(
            CostClass(raw["key"], raw["label"], raw["pattern"], _expand(raw.get("when", "true"), names),
                      _expand(raw["flops"], names), _expand(raw["bytes"], names), raw["formula"], raw["source"])
        )  # fmt: skip
    return tuple(out)


def utilization_settings() -> dict[str, Any]:
    return thresholds()["utilization"]


def _dims_sql(col: str) -> str:
    """A shape string → BIGINT[][] (an absent tensor: []; a non-integer dim: NULL)."""
    return (
        f"list_transform(string_split(coalesce({col}, ''), ';'), lambda t: list_transform("
        "list_filter(string_split(t, ','), lambda d: trim(d) <> ''), lambda d: TRY_CAST(trim(d) AS BIGINT)))"
    )


def _dtypes_sql(col: str) -> str:
    return (
        f"list_transform(string_split(coalesce({col}, ''), ';'), "
        "lambda t: regexp_replace(lower(trim(t)), '^(dt_|acl_|torch\\.)', ''))"
    )


def _sizes_map() -> str:
    pairs = ", ".join(f"'{k}': {int(v)}" for k, v in op_cost_rules()["dtype_bytes"].items())
    return f"MAP {{{pairs}}}"


def _numel(dims: str) -> str:
    return f"list_transform({dims}, lambda x: CASE WHEN len(x) = 0 THEN 0 ELSE list_reduce(x, lambda a, b: a * b) END)"


def _bytes(numel: str, dtypes: str) -> str:
    return f"list_transform({numel}, lambda n, i: CASE WHEN n = 0 THEN 0 ELSE n * {_sizes_map()}[{dtypes}[i]] END)"


def _all_known(col: str) -> str:
    return f"CASE WHEN list_count({col}) = len({col}) THEN list_sum({col}) END"


def cost_sql(source: str) -> str:
    """SELECT over ``source`` (columns op, name, input_shapes, input_dtypes, output_shapes, output_dtypes, …):
    every column of it plus cost_class, flops, bytes and dtype0 (the first input's dtype, the peak's key)."""
    classes = cost_classes()
    cls_case = " ".join(
        f"WHEN regexp_matches(opname, '{c.pattern}') AND ({c.when}) THEN {i}" for i, c in enumerate(classes)
    )
    keys = "[" + ", ".join(f"'{c.key}'" for c in classes) + "]"
    flops = " ".join(f"WHEN {i} THEN ({c.flops})::DOUBLE" for i, c in enumerate(classes))
    nbytes = " ".join(f"WHEN {i} THEN ({c.bytes})::DOUBLE" for i, c in enumerate(classes))
    return f"""
        WITH s0 AS (SELECT *, lower(coalesce(op, name, '')) AS opname,
                           {_dims_sql("input_shapes")} AS ins, {_dims_sql("output_shapes")} AS outs,
                           {_dtypes_sql("input_dtypes")} AS in_dt, {_dtypes_sql("output_dtypes")} AS out_dt,
                           split_part(input_dtypes, ';', 1) AS dtype0
                    FROM ({source})),
             s1 AS (SELECT *, {_numel("ins")} AS in_n, {_numel("outs")} AS out_n FROM s0),
             s2 AS (SELECT *, {_bytes("in_n", "in_dt")} AS in_b, {_bytes("out_n", "out_dt")} AS out_b FROM s1),
             s AS (SELECT *, {_all_known("in_b")} AS in_bytes, {_all_known("out_b")} AS out_bytes,
                          ins[1] AS q, ins[2] AS k, outs[1] AS o0, in_n[1] AS q_numel, in_n[2] AS k_numel,
                          out_n[1] AS out_numel, list_filter(ins, lambda x: len(x) >= 2)[1] AS x1
                   FROM s2),
             c AS (SELECT *, in_bytes + out_bytes AS io_bytes,
                          TRY(CASE {cls_case} END) AS cls FROM s)
        SELECT * EXCLUDE (cls), {keys}[cls + 1] AS cost_class,
               TRY(CASE cls {flops} END) AS flops, TRY(CASE cls {nbytes} END) AS bytes
        FROM c"""
