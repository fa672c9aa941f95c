"""kernel_details.csv cells past the timing columns: shapes/dtypes/formats and PipeUtilization PMU values.

Shapes carry a literal pair of quotes inside the CSV quoting (``\"\"\"16,3584\"\"\"`` in the raw file).  Cycle
counts follow ``time × 1800 MHz × blocks`` and ``cube_utilization(%)`` ``cycles / (1800 MHz × 24 cores ×
duration)``, which is how the real Level1 sample's numbers relate.  AI_CPU rows have every PMU cell ``N/A``.
"""

from __future__ import annotations

import random

from sample_traces._catalog import KernelSpec

FREQ_MHZ, AI_CORES = 1800, 24
PMU_NA = ",".join(["N/A"] * 25)
AIC_ZERO = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
AIV_ZERO = "0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0"
# ratio ranges (mac|vec, scalar, mte1|mte2, mte2|mte3, fixpipe) by role; decode GEMMs are MTE2 (HBM) bound.
_CUBE = ((0.16, 0.32), (0.04, 0.12), (0.25, 0.45), (0.85, 0.96), (0.02, 0.07))
_ATTN_AIC = ((0.08, 0.2), (0.1, 0.25), (0.1, 0.3), (0.6, 0.85), (0.05, 0.2))
_VEC = ((0.05, 0.35), (0.1, 0.45), (0.3, 0.75), (0.1, 0.5))
HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
    "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
    "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),"
    "aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)


def _f3(x: float) -> str:
    return repr(round(x, 3))


def quoted_shapes(shapes: str) -> str:
    return '"""' + shapes + '"""'


def kernel_static(sp: KernelSpec) -> str:
    """Block Dim … Context ID for one kernel spec (constant across its calls)."""
    context = "0" if sp.core.startswith("MIX") else "N/A"
    return (
        f"{sp.block_dim},{sp.mix_block_dim},NO,{quoted_shapes(sp.in_shapes)},{sp.in_dtypes},{sp.in_formats},"
        f"{quoted_shapes(sp.out_shapes)},{sp.out_dtypes},{sp.out_formats},{context}"
    )


def pmu_text(sp: KernelSpec, dur_ns: int, rng: random.Random) -> str:
    if sp.core == "AI_CPU":
        return PMU_NA
    d = dur_ns / 1000
    u = rng.uniform
    aic, aiv, cube = AIC_ZERO, AIV_ZERO, "0"
    if sp.core in ("AI_CORE", "MIX_AIC"):
        t = d * u(0.9, 0.98)
        cycles = round(t * FREQ_MHZ * sp.block_dim)
        ranges = _CUBE if sp.core == "AI_CORE" else _ATTN_AIC
        r = [u(lo, hi) for lo, hi in ranges]
        aic = (
            f"{_f3(t)},{cycles},{_f3(t * r[0])},{_f3(r[0])},{_f3(t * r[1])},{_f3(r[1])},{_f3(t * r[2])},{_f3(r[2])},"
            f"{_f3(t * r[3])},{_f3(r[3])},{_f3(t * r[4])},{_f3(r[4])},{_f3(u(0.001, 0.02))}"
        )
        cube = _f3(cycles / (FREQ_MHZ * AI_CORES * d) * 100)
    if sp.core in ("AI_VECTOR_CORE", "MIX_AIC"):
        blocks = sp.mix_block_dim if sp.core == "MIX_AIC" else sp.block_dim
        t = d * u(0.82, 0.96)
        cycles = round(t * FREQ_MHZ * blocks)
        r = [u(lo, hi) for lo, hi in _VEC]
        aiv = (
            f"{_f3(t)},{cycles},{_f3(t * r[0])},{_f3(r[0])},{_f3(t * r[1])},{_f3(r[1])},{_f3(t * r[2])},{_f3(r[2])},"
            f"{_f3(t * r[3])},{_f3(r[3])},{_f3(u(0.01, 0.15))}"
        )
    return f"{aic},{aiv},{cube}"
