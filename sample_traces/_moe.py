"""An EP=8 MoE job with one hot expert, for ``generate_cluster.py --moe`` (issue #22).

Eight ranks, one EP group of all eight (HCCL group ``ep``, RDMA all-to-all), ``layers`` MoE layers per step and
``experts_per_rank`` experts on each rank.  Per step, layer and rank: a ``GroupedMatmul`` whose time is
``GMM_NS_PER_TOKEN`` × the tokens routed to the rank's experts, then the combine all-to-all; the all-to-all of a
layer ends when its slowest member arrives, so every rank waits there for the rank that holds the hot expert.
Each rank folder gets (besides the cluster generator's profiler_info / metadata / step_trace_time /
communication*.json) ``ASCEND_PROFILER_OUTPUT/kernel_details.csv`` with the GroupedMatmul and all-to-all rows, and
``prefill_<rank>.csv``: the expert hotspot file of MindStudio Insight (``parsers/moe_hotspot.py``), the tokens
of each of the rank's experts per layer summed over the steps.  The truth goes to ``ground_truth.json``:
the hot expert, its rank, its ratio to the layer's mean, per rank the GroupedMatmul and all-to-all wait per step.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
from pathlib import Path

from sample_traces import generate_cluster as gc

GMM_NS_PER_TOKEN = 40  # GroupedMatmul time per routed token (ns)
GMM_FIXED_NS = 30_000
OTHER_COMPUTE_NS = 2_000_000  # attention etc. per layer, the same on every rank
TOKENS_PER_EXPERT = 400  # mean tokens per expert, layer and step
KERNEL_HEADER = (
    "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim,Input Shapes"
)
HIDDEN, INTER = 7168, 2048  # x is tokens × hidden; the weight experts × hidden × inter; then the group list


def _tokens(rng: random.Random, layers: int, experts: int, hot: tuple[int, int], factor: float) -> list:
    """tokens[layer][expert] for one step; the hot (layer, expert) gets ``factor`` × the others' mean."""
    out = [
        [max(1, round(TOKENS_PER_EXPERT * rng.uniform(0.9, 1.1))) for _ in range(experts)]
        for _ in range(layers)
    ]
    out[hot[0]][hot[1]] = round(TOKENS_PER_EXPERT * factor)
    return out


def _layer_ops(rng, members, gmm: list[int], gid: str, seq: int) -> list[gc.OpRec]:
    """The combine all-to-all of one layer on every rank: each waits for the slowest GroupedMatmul."""
    ops = []
    for r in members:
        op = gc._op_links("alltoallv", members, r, rng, {"src": -1, "dst": -1, "gbps": 1.0})
        op.kind, op.group, op.seq, op.idle_ns = "alltoallv", gid, seq, rng.randrange(8_000, 20_000)
        ops.append(op)
    slowest = max(g + o.transit_ns for g, o in zip(gmm, ops, strict=True))
    for g, op in zip(gmm, ops, strict=True):
        op.wait_ns = slowest - g - op.transit_ns
    return ops


def _kernel_rows(
    step: int, t0: int, layer_gmm: list[int], ops: list[gc.OpRec], rows_x: list[int], experts: int
):
    """One rank's kernel_details rows of one step (GroupedMatmul, then its all-to-all, per layer)."""
    rows, t = [], t0 + gc.PREP_NS
    for gmm, op, x in zip(layer_gmm, ops, rows_x, strict=True):
        t += OTHER_COMPUTE_NS
        shapes = f'"{x},{HIDDEN};{experts},{HIDDEN},{INTER};{experts}"'
        rows.append(f"{step},aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul,GroupedMatmul,AI_CORE,"
                    f"{t / 1000:.3f},{gmm / 1000:.3f},0,24,{shapes}")  # fmt: skip
        t += gmm
        op.start_ns = t - t % 500
        dur = op.transit_ns + op.wait_ns + op.idle_ns
        rows.append(f"{step},{op.name},hcom_alltoallv_,COMMUNICATION,{op.start_ns / 1000:.3f},"
                    f"{dur / 1000:.3f},{op.wait_ns / 1000:.3f},N/A,")  # fmt: skip
        t = op.start_ns + dur
    return rows, t


def generate_moe(
    out: Path,
    steps: int = 4,
    layers: int = 4,
    experts_per_rank: int = 8,
    hot_layer: int = 2,
    hot_expert: int = 45,
    hot_factor: float = 32.0,
    seed: int = 0,
) -> dict:
    """Write the EP=8 job under ``out`` (replaced); return its ground truth (also ``out/ground_truth.json``)."""
    ranks = 8
    rng = random.Random(seed)
    ids = gc._group_ids(rng, 2)
    groups = {ids[0]: {"group_name": "default_group", "global_ranks": list(range(ranks))},
              ids[1]: {"group_name": "ep", "global_ranks": list(range(ranks))}}  # fmt: skip
    members, experts = list(range(ranks)), ranks * experts_per_rank
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    load = [[0] * experts for _ in range(layers)]
    per_rank: list[list] = [[] for _ in range(ranks)]
    kernels: list[list[str]] = [[KERNEL_HEADER] for _ in range(ranks)]
    gmm_total, wait_total = [0] * ranks, [0] * ranks
    for s in range(steps):
        tokens = _tokens(rng, layers, experts, (hot_layer, hot_expert), hot_factor)
        for layer in range(layers):
            for e in range(experts):
                load[layer][e] += tokens[layer][e]
        gmm = [[GMM_FIXED_NS + GMM_NS_PER_TOKEN * sum(tokens[layer][r * experts_per_rank:(r + 1) * experts_per_rank])
                for layer in range(layers)] for r in range(ranks)]  # fmt: skip
        by_layer = [
            _layer_ops(rng, members, [gmm[r][layer] for r in members], ids[1], layer)
            for layer in range(layers)
        ]
        t0 = gc.T0_NS + s * 60_000_000
        for r in range(ranks):
            ops = [by_layer[layer][r] for layer in range(layers)]
            mine = [
                sum(tokens[layer][r * experts_per_rank : (r + 1) * experts_per_rank])
                for layer in range(layers)
            ]
            rows, _ = _kernel_rows(s + 1, t0, gmm[r], ops, mine, experts_per_rank)
            kernels[r].extend(rows)
            compute = sum(gmm[r]) + layers * OTHER_COMPUTE_NS
            line, _rec = gc._step_row(r, ranks, s + 1, compute, ops, gc.FREE_NS)
            per_rank[r].append((s + 1, line, ops))
            gmm_total[r] += sum(gmm[r])
            wait_total[r] += sum(o.wait_ns for o in ops)
    pids = [rng.randrange(100_000, 4_000_000) for _ in range(ranks)]
    dirs = [gc._write_rank(out, r, ranks, ranks, groups, per_rank[r], pids[r]) for r in range(ranks)]
    for r, run in enumerate(dirs):
        _finish_rank(run, r, kernels[r], load, experts_per_rank)
    truth = _truth(load, layers, hot_layer, hot_expert, experts_per_rank, steps, gmm_total, wait_total, dirs)
    text = json.dumps(truth, indent=2)
    (out / "ground_truth.json").write_text(text, encoding="utf-8")
    return json.loads(text)


def _finish_rank(run: Path, rank: int, kernel_rows: list[str], load: list, per_rank: int) -> None:
    """EP=8 in the metadata, the kernel_details rows, and the rank's expert hotspot file."""
    meta_path = run / "profiler_metadata.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["distributed_args"].update(tensor_model_parallel_size=1, expert_model_parallel_size=8)
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    (run / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").write_text("\n".join(kernel_rows) + "\n", "utf-8")
    mine = [row[rank * per_rank:(rank + 1) * per_rank] for row in load]  # fmt: skip
    (run / f"prefill_{rank}.csv").write_text("\n".join(",".join(map(str, r)) for r in mine) + "\n", "utf-8")


def _truth(load, layers, hot_layer, hot_expert, per_rank, steps, gmm_total, wait_total, dirs) -> dict:
    row = load[hot_layer]
    mean = sum(row) / len(row)
    hot_rank = hot_expert // per_rank
    gmm = [g / steps for g in gmm_total]
    wait = [w / steps for w in wait_total]
    median_gmm = statistics.median(gmm)
    return {
        "ranks": 8,
        "steps": steps,
        "layers": layers,
        "experts": len(row),
        "phase": "prefill",
        "run_dirs": {r: d.name for r, d in enumerate(dirs)},
        "hot": {
            "layer": hot_layer,
            "expert": hot_expert,
            "rank": hot_rank,
            "tokens": row[hot_expert],
            "mean_tokens": mean,
            "ratio": row[hot_expert] / mean,
        },
        "grouped_matmul_ns_per_step": gmm,
        "median_grouped_matmul_ns_per_step": median_gmm,
        "gain_ns_per_step": gmm[hot_rank] - median_gmm,
        "alltoall_wait_ns_per_step": wait,
        "peers_median_wait_ns_per_step": statistics.median(w for r, w in enumerate(wait) if r != hot_rank),
    }
