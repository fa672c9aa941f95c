"""How close each op runs to the hardware: FLOPs and bytes from its shapes, achieved TFLOPS and GB/s, MFU,
bandwidth utilization and a roofline bound class, cross-checked with the Ascend PMU pipe ratios.

Per call, FLOPs and bytes come from the shapes and dtypes by the op's class in ``diag/rules/op_cost.toml``
(formulas as DuckDB SQL, with sources); the op's figures are sums over the calls that have them:
``achieved_tflops`` = FLOPs ÷ their time, ``achieved_gbps`` = bytes ÷ their time, ``mfu_pct`` = achieved ÷ the
device's dense peak for the op's first input dtype (``diag/rules/devices.toml``), ``bw_pct`` = achieved GB/s ÷
``hbm_gbps``, ``arithmetic_intensity`` = FLOPs ÷ bytes.

``unit``: the compute unit the op ran on, from its calls' core type (kernel_details "Accelerator Core", the GE
task type): ``vector`` for AI_VECTOR_CORE and MIX_AIV (a mixed kernel led by its vector part), else ``cube``
(AI_CORE, MIX_AIC, and GPU kernels: the tensor-core peak). A vector op is judged against the vector unit's
peak (``vector_tflops_<dtype>`` in the device table): its ``mfu_pct`` and ridge point are the vector unit's,
since a norm or a SwiGlu cannot reach the cube's peak whatever it does.

``bound``: ``latency`` when a call lasts under ``[utilization] latency_max_mean_us`` on average (launch and ramp
dominate: neither roof can be reached); else ``compute`` when the intensity is at least the ridge point of the
op's unit (its peak FLOP/s ÷ bytes/s), else ``memory``. Without a known device (or peak for the dtype on that
unit) there is no ridge: the bound is left out, never guessed from another device or unit, and ``peak_from``
says why.

``pmu_bound`` reads the PMU columns of kernel_details (duration-weighted over the op's calls): ``compute`` when
the busiest compute pipe (``aic_mac_ratio`` cube, ``aiv_vec_ratio`` vector) is busy at least ``pmu_busy_ratio``
of the cycles, else ``memory`` when a data-move pipe from/to global memory (``aic_mte2_ratio``,
``aiv_mte2_ratio``, ``aiv_mte3_ratio``) is, else ``latency`` (scalar, sync, waits). A busy MTE2 beside a busy
cube is a fed cube (double buffering), so the compute pipes are read first.

All row work is SQL over the ``kernels`` table (Ascend kernel_details / op_summary), or for a CUDA run over its
kernels with the shapes of the aten op that launched each (``diag.analyses.op_util_cuda``: Kineto ``record_shapes``;
a capture without them, or nsys, gets calls and time but no figures). A CUDA op is grouped by kernel name, as the
op table groups a CUDA run.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses.counts import OP_TYPE_SQL, UNIQUE_KERNELS
from diag.analyses.finding import thresholds
from diag.analyses.op_util_cuda import cuda_kernel_rows_sql, has_cuda_kernels_only
from diag.devices import Device, device_for_run, dtype_key
from diag.i18n import t
from diag.sql_text import SqlFragment
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "op_cost.toml"
BY = ("op", "kernel")
PMU_COMPUTE = ("aic_mac_ratio", "aiv_vec_ratio")
PMU_MEMORY = ("aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
UTIL_KEYS = (
    "cost_class", "costed_calls", "flops", "bytes", "achieved_tflops", "achieved_gbps", "mfu_pct", "bw_pct",
    "bound_pct", "arithmetic_intensity", "ridge_flops_per_byte", "bound", "pmu_bound", "peak_from", "m_min", "m_max",
    "peak_tflops", "hbm_gbps", "unit",
)  # fmt: skip
VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")

__all__ = [
    "BY",
    "UTIL_KEYS",
    "cost_sql",
    "ncu_bounds",
    "op_cost_rules",
    "op_utilization",
    "utilization_settings",
]


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


def cost_sql(source: SqlFragment) -> str:
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


MATMUL_CLASSES = ("matmul", "grouped_matmul")
# What a call's cost is computed from (cost_sql): the op type (else, when it has none, the kernel name), shapes, dtypes
COST_INPUTS = ("op", "name", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
COST_OUTPUTS = ("dtype0", "o0", "cost_class", "flops", "bytes")  # what the per-op sums read of cost_sql


# A sum of DOUBLEs depends on the order of its terms in the last digits, and the order rows reach an aggregate
# depends on the plan and the threads. Each term is made an exact decimal (9 places: FLOP and byte counts are whole,
# a PMU ratio times ns loses < 1e-9 ns) and summed exactly, so a figure is the same on any plan or thread count.
# (An ordered aggregate, sum(x ORDER BY name, start_ns), gave the same guarantee but sorted every group: 7 s of a
# 10 s op_utilization on a 3.45M-kernel run.)
# A group holding a term past 1e20 (a size from corrupted shapes, inf, NaN) sums as DOUBLEs instead: a decimal would
# overflow, and an overflow must not fail the whole table.
def exact_sum(expr: SqlFragment, where: SqlFragment | None = None) -> str:
    only = f" FILTER (WHERE {where})" if where else ""
    exact = f"CAST(sum(TRY_CAST({expr} AS DECIMAL(38, 9))){only} AS DOUBLE)"
    return f"CASE WHEN bool_or(NOT (abs({expr}) < 1e20)){only} THEN sum({expr}){only} ELSE {exact} END"


def _pmu_sql(metric: str) -> str:
    """The duration-weighted mean of one PMU column over a group's calls (NULL where no call has it)."""
    v = f"pmu_values[list_position(names, '{metric}')]"
    return (
        f"{exact_sum(SqlFragment(f'{v} * dur_ns'))} / nullif(sum(dur_ns) FILTER (WHERE {v} IS NOT NULL), 0)"
    )


# One row per call (name, start): a call listed twice (two exports of one run) counts once, as first stored.
KERNEL_ROWS = SqlFragment(f"""SELECT name, op_type AS op, dur_ns, input_shapes, input_dtypes, output_shapes,
                   output_dtypes, file_id, pmu_values, upper(accelerator_core) AS core, start_ns
            FROM ({UNIQUE_KERNELS})""")


def _util_sql(by: str, cuda: bool = False) -> str:
    """The per-op SQL over the run's kernels rows, or (``cuda``) its CUDA kernels with their aten op's shapes,
    grouped by kernel name as the op table groups a CUDA run (diag.analyses.op_util_cuda)."""
    key = "name" if cuda or by != "op" else OP_TYPE_SQL
    source = cuda_kernel_rows_sql() if cuda else KERNEL_ROWS
    costed = "flops IS NOT NULL AND bytes IS NOT NULL AND dur_ns > 0"
    matmul = f"cost_class IN {MATMUL_CLASSES}"
    pmu = ", ".join(_pmu_sql(m) for m in PMU_COMPUTE + PMU_MEMORY)
    shape = ", ".join(["op", "CASE WHEN op IS NULL THEN name END", *COST_INPUTS[2:]])
    costs = ", ".join(f"{c} := {c}" for c in COST_OUTPUTS)
    # The shapes are costed once per distinct (op, shapes, dtypes), not per call: a run repeats a few of them over
    # every layer and step (17 among 81k calls of a 251 MB trace) and the list parsing was most of the query's
    # time.  Each call looks its cost up in one list (NULL-safe; a join on six strings cost more than it saved).
    # The kernels rows are read twice rather than held (a held copy of 81k calls cost ~35 MB of peak RSS); a CUDA
    # source, a join of its own, is computed once.
    inline = "" if cuda else "NOT MATERIALIZED"
    return f"""
        WITH k AS {inline} ({source}),
             sh AS (SELECT DISTINCT {shape.replace(" END", " END AS name")} FROM k),
             c AS ({cost_sql(SqlFragment("SELECT * FROM sh"))}),
             lookup AS (SELECT list(row({", ".join(COST_INPUTS)})) AS shapes, list(struct_pack({costs})) AS costs FROM c),
             f AS (SELECT k.*, costs[list_position(shapes, row({shape}))] AS cost FROM k, lookup),
             g AS (SELECT f.* EXCLUDE (cost), {", ".join(f"cost.{c} AS {c}" for c in COST_OUTPUTS)} FROM f),
             p AS (SELECT g.*, c.names FROM g LEFT JOIN pmu_columns c USING (file_id))
        SELECT {key} AS key, count(*), sum(dur_ns)::BIGINT,
               count(*) FILTER (WHERE {costed}), sum(dur_ns) FILTER (WHERE {costed}),
               {exact_sum(SqlFragment("flops"), SqlFragment(costed))}, {exact_sum(SqlFragment("bytes"), SqlFragment(costed))},
               mode(dtype0) FILTER (WHERE {costed}), mode(cost_class),
               min(o0[-2]) FILTER (WHERE {matmul} AND {costed}), max(o0[-2]) FILTER (WHERE {matmul} AND {costed}),
               mode(core), {pmu}
        FROM p GROUP BY 1 ORDER BY 3 DESC, 1"""


def pmu_bound(ratios: dict[str, float | None], busy: float) -> str | None:
    """compute | memory | latency from the PMU pipe ratios (module doc); None without any."""
    known = {k: v for k, v in ratios.items() if v is not None}
    if not known:
        return None
    if max((known.get(m, 0.0) for m in PMU_COMPUTE), default=0.0) >= busy:
        return "compute"
    if max((known.get(m, 0.0) for m in PMU_MEMORY), default=0.0) >= busy:
        return "memory"
    return "latency"


def unit_of(core: str | None) -> str:
    """vector | cube: the unit whose peak an op with this core type (GE task type) is judged against."""
    return "vector" if (core or "").upper() in VECTOR_CORES else "cube"


def _peak_from(
    dev: Device | None, where: str, dtype: str | None, unit: str = "cube"
) -> tuple[float | None, float | None, str]:
    """(peak TFLOPS of the unit, HBM GB/s, what a reader is told about where they come from)."""
    if dev is None:
        return None, None, t("op_util.peak.unknown_device", where=where)
    peak = dev.vector_peak_tflops(dtype) if unit == "vector" else dev.peak_tflops(dtype)
    hbm = dev.hbm_gbps
    key = dtype_key(dtype) or dtype or "—"
    what = t("op_util.peak.vector", dtype=key) if unit == "vector" else key
    parts = [f"{dev.name} ({dev.key})"]
    parts.append(f"{what} {peak:g} TFLOPS" if peak else t("op_util.peak.no_peak", what=what))
    parts.append(f"HBM {hbm:g} GB/s" if hbm else t("op_util.peak.no_hbm"))
    return peak, hbm, t("op_util.peak.sep").join(parts)


def _bound(
    mean_ns: float | None, intensity: float | None, ridge: float | None, s: dict[str, Any]
) -> str | None:
    if mean_ns is None:
        return None
    if mean_ns < s["latency_max_mean_us"] * 1000:
        return "latency"
    if intensity is None or ridge is None:
        return None
    return "compute" if intensity >= ridge else "memory"


def _figures(row: tuple, dev: Device | None, where: str, s: dict[str, Any]) -> dict[str, Any]:
    _key, _calls, _total, costed, costed_ns, flops, nbytes, dtype, cls, m_min, m_max, core, *pmu = row
    unit = unit_of(core)
    peak, hbm, peak_from = _peak_from(dev, where, dtype, unit)
    tflops = flops / costed_ns / 1e3 if costed_ns else None  # FLOP/ns = GFLOP/s
    gbps = nbytes / costed_ns if costed_ns else None  # byte/ns = GB/s
    mfu = 100.0 * tflops / peak if tflops is not None and peak else None
    bw = 100.0 * gbps / hbm if gbps is not None and hbm else None
    intensity = flops / nbytes if costed and nbytes else None
    ridge = peak * 1e3 / hbm if peak and hbm else None  # (TFLOP/s × 1e12) ÷ (GB/s × 1e9)
    bound = _bound(costed_ns / costed if costed else None, intensity, ridge, s)
    ratios = dict(zip(PMU_COMPUTE + PMU_MEMORY, pmu, strict=True))
    return {
        "cost_class": cls,
        "costed_calls": int(costed),
        "flops": flops,
        "bytes": nbytes,
        "achieved_tflops": tflops,
        "achieved_gbps": gbps,
        "mfu_pct": mfu,
        "bw_pct": bw,
        "bound_pct": {"compute": mfu, "memory": bw}.get(bound or ""),
        "arithmetic_intensity": intensity,
        "ridge_flops_per_byte": ridge,
        "bound": bound,
        "pmu_bound": pmu_bound(ratios, s["pmu_busy_ratio"]),
        "peak_from": peak_from if costed else None,
        "m_min": None if m_min is None else int(m_min),
        "m_max": None if m_max is None else int(m_max),
        "peak_tflops": peak,
        "hbm_gbps": hbm,
        "unit": unit,
        "dtype": dtype_key(dtype) or dtype,
        **ratios,
    }


def op_utilization(store: Store, run_id: int, by: str = "op") -> list[dict[str, Any]]:
    """Per op type (or kernel name): calls, time, share, and the UTIL_KEYS figures (module doc); largest first."""
    if by not in BY:
        raise ValueError(f"utilization is per op or per kernel, not by {by!r}")
    dev, where = device_for_run(store.cursor(), run_id)
    settings = utilization_settings()
    cuda = has_cuda_kernels_only(store.cursor(), run_id)
    got = store.cursor().execute(_util_sql(by, cuda), {"run": run_id}).fetchall()
    whole = sum(r[2] for r in got)
    out = []
    for row in got:
        base = {"name": row[0], "calls": int(row[1]), "total_ns": int(row[2])}
        base["share_pct"] = 100.0 * row[2] / whole if whole else None
        out.append(base | _figures(row, dev, where, settings))
    return out


SOL_SECTION = "GPU Speed Of Light Throughput"
SOL_COMPUTE, SOL_MEMORY = "Compute (SM) Throughput", "Memory Throughput"


def ncu_bounds(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Per kernel name of an Nsight Compute capture: the SpeedOfLight compute (SM) and memory throughput, % of
    peak (mean over the profiled launches), and the bound they name as ncu's SOLBottleneck rule reads them: both
    under ``[utilization] ncu_busy_pct`` (60 %, the rule's "below 60.0% of peak typically indicate latency
    issues") → latency, else the higher of the two."""
    busy = utilization_settings()["ncu_busy_pct"]
    got = (
        store.cursor()
        .execute(
            """SELECT kernel_name, count(DISTINCT launch_id),
                      avg(value) FILTER (WHERE metric = $sm), avg(value) FILTER (WHERE metric = $mem)
               FROM kernel_metrics WHERE run_id = $run AND section = $section AND metric IN ($sm, $mem)
               GROUP BY 1 ORDER BY 1""",
            {"run": run_id, "section": SOL_SECTION, "sm": SOL_COMPUTE, "mem": SOL_MEMORY},
        )
        .fetchall()
    )
    out = []
    for name, launches, sm, mem in got:
        bound = None
        if sm is not None and mem is not None:
            bound = "latency" if max(sm, mem) < busy else ("compute" if sm >= mem else "memory")
        out.append(
            {"name": name, "launches": int(launches), "sm_pct": sm, "memory_pct": mem, "ncu_bound": bound}
        )
    return out
