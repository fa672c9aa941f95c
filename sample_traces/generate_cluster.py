"""Generate a multi-rank torch_npu job (LLM decode, TP within a node, EP across nodes) with a known slow rank and link.

    python sample_traces/generate_cluster.py OUT_DIR [--ranks 64] [--steps 8] [--tp 8] [--seed 0]
                                                     [--slow-rank R] [--slow-factor F] [--slow-link SRC DST]

For each rank r this writes ``OUT_DIR/rank{r}_{pid}_{stamp}_ascend_pt/`` in the shapes of a real 4-rank job
(msinsight ``test/st/level2``, torch_npu 2.7.1 + CANN 8.3.RC1): ``profiler_info_{r}.json``,
``profiler_metadata.json`` (``parallel_group_info`` keyed by the HCCL group ids that suffix the op names:
``tp`` = consecutive ranks of a node over HCCS, ``ep`` = the same local rank of every node over RDMA, and
``default_group``), ``ASCEND_PROFILER_OUTPUT/{step_trace_time.csv, communication.json,
communication_matrix.json, analyse.done}``; and ``OUT_DIR/ground_truth.json``.

Per decode step every rank computes ~26 ms, runs four TP all-reduces (16 MiB, full mesh over HCCS at ~19.5
GB/s per link, 2·S/tp bytes per link) and two EP all-to-alls (4 MiB per peer over RDMA at ~22 GB/s), and the
whole job is in lock-step: every rank waits at its collectives for the slowest.  Injected:

* a **slow rank**: its computing is ``slow_factor`` × its normal time, so every other rank's collective
  *wait* grows by about that much;
* a **slow link**: one RDMA link src→dst of an EP group runs at ``slow_link_gbps``, raising the transit time
  of that group's all-to-alls on src (the peers wait for it).

Times are written with ns precision (µs to 3 decimals in the CSV, ms to 6 in JSON, start timestamps on 0.5 µs)
so the ground truth (int ns, int bytes, as a reader converts them) is exact.  Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

T0_NS = 1_764_246_877_000_000_000
TORCH_NPU_VERSION, CANN_VERSION = "2.7.1", "8.3.RC1"
HCCS_GBPS, RDMA_GBPS, LOCAL_GBPS = 19.5, 22.0, 330.0  # GB/s = bytes per ns
AR_BYTES, A2A_PEER_BYTES = 16 * 1024 * 1024, 4 * 1024 * 1024
COMPUTE_NS, FREE_NS, PREP_NS = 26_000_000, 600_000, 250_000
PLAN = ("allreduce", "allreduce", "alltoallv", "allreduce", "allreduce", "alltoallv")
OP_NAME = {"allreduce": "hcom_allReduce_", "alltoallv": "hcom_alltoallv_"}
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
STEP_TRACE_HEADER = (
    "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing"
)


@dataclass
class OpRec:
    kind: str  # allreduce | alltoallv
    group: str
    seq: int
    start_ns: int = 0
    transit_ns: int = 0
    wait_ns: int = 0
    idle_ns: int = 0
    links: dict[tuple[int, int], tuple[str, int, int]] = field(
        default_factory=dict
    )  # local src,dst → tr,B,ns

    @property
    def name(self) -> str:
        return f"{OP_NAME[self.kind]}_{self.group[-3:]}_{self.seq}_1"


def _group_ids(rng: random.Random, n: int) -> list[str]:
    return [str(rng.randrange(10**18, 10**19)) for _ in range(n)]


def _layout(ranks: int, tp: int, rng: random.Random) -> dict[str, dict]:
    """parallel groups: tp (consecutive ranks, HCCS), ep (same local rank on every node, RDMA), default."""
    nodes = ranks // tp
    ids = iter(_group_ids(rng, nodes + tp + 1))
    groups: dict[str, dict] = {next(ids): {"group_name": "default_group", "global_ranks": list(range(ranks))}}
    for n in range(nodes):
        groups[next(ids)] = {"group_name": "tp", "global_ranks": list(range(n * tp, (n + 1) * tp))}
    for i in range(tp):
        groups[next(ids)] = {"group_name": "ep", "global_ranks": list(range(i, ranks, tp))}
    return groups


def _link_ns(nbytes: int, gbps: float, rng: random.Random) -> int:
    return max(1, round(nbytes / (gbps * rng.uniform(0.985, 1.015))))


def _op_links(kind: str, members: list[int], me: int, rng: random.Random, slow: dict) -> OpRec:
    """One collective as rank ``me`` sees it: links from its local rank to every member (and LOCAL)."""
    n, src = len(members), members.index(me)
    per_link = 2 * AR_BYTES // n if kind == "allreduce" else A2A_PEER_BYTES
    transport, gbps = ("HCCS", HCCS_GBPS) if kind == "allreduce" else ("RDMA", RDMA_GBPS)
    op = OpRec(kind, "", 0)
    local = AR_BYTES if kind == "allreduce" else per_link
    op.links[(src, src)] = ("LOCAL", local, _link_ns(local, LOCAL_GBPS, rng))
    for dst, peer in enumerate(members):
        if peer != me:
            bw = slow["gbps"] if (me, peer) == (slow["src"], slow["dst"]) and kind == "alltoallv" else gbps
            op.links[(src, dst)] = (transport, per_link, _link_ns(per_link, bw, rng))
    op.transit_ns = max(t for (s, d), (_, _, t) in op.links.items() if s != d)
    return op


def _fmt(ns_or_bytes: int) -> float:
    return ns_or_bytes / 1e6  # ms from ns, MB from bytes: exact through the shortest float repr


def _bandwidth_info(op: OpRec) -> dict:
    info = {t: {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                "Size Distribution": {}} for t in TRANSPORTS}  # fmt: skip
    remote = [(tr, b, t) for (s, d), (tr, b, t) in op.links.items() if s != d]
    size, ns = sum(b for _, b, _ in remote), sum(t for _, _, t in remote)
    body = {
        "Transit Size(MB)": _fmt(size),
        "Transit Time(ms)": _fmt(ns),
        "Bandwidth(GB/s)": round(size / ns, 4) if ns else 0,
        "Large Packet Ratio": 1.0 if remote[0][1] >= 1_000_000 else 0.0,
        "Size Distribution": {str(_fmt(remote[0][1])): [len(remote), _fmt(ns)]},
    }
    info[remote[0][0]] = body
    if remote[0][0] == "HCCS":  # HCCS transfers run on the SDMA engine: exported twice, as real files do
        info["SDMA"] = {**body, "Large Packet Ratio": 0, "Size Distribution": {}}
    return info


def _time_info(op: OpRec) -> dict:
    return {
        "Start Timestamp(us)": op.start_ns / 1000,
        "Elapse Time(ms)": _fmt(op.transit_ns + op.wait_ns + op.idle_ns),
        "Transit Time(ms)": _fmt(op.transit_ns),
        "Wait Time(ms)": _fmt(op.wait_ns),
        "Synchronization Time(ms)": _fmt(op.wait_ns),
        "Idle Time(ms)": _fmt(op.idle_ns),
        "Wait Time Ratio": round(op.wait_ns / (op.wait_ns + op.transit_ns), 4) if op.wait_ns else 0,
        "Synchronization Time Ratio": round(op.wait_ns / (op.wait_ns + op.transit_ns), 4)
        if op.wait_ns
        else 0,
    }


def _matrix(ops: list[OpRec]) -> dict:
    """``<optype>-top1|middle|bottom1..3|total@<group>`` → links, as msprof writes communication_matrix.json."""
    out: dict[str, dict] = {}
    by_key: dict[tuple[str, str], list[OpRec]] = {}
    for op in ops:
        by_key.setdefault((op.kind, op.group), []).append(op)
    for (kind, group), same in by_key.items():
        ranked = sorted(same, key=lambda o: -o.transit_ns)
        picks = {"top1": ranked[0], "middle": ranked[len(ranked) // 2], "bottom1": ranked[-1]}
        for i in (2, 3):
            if len(ranked) >= i:
                picks[f"bottom{i}"] = ranked[-i]
        for label, op in picks.items():
            out[f"{kind}-{label}@{group}"] = {
                f"{s}-{d}": _link_json(tr, b, t, op.name) for (s, d), (tr, b, t) in op.links.items()
            }
        total: dict[str, dict] = {}
        for (s, d), (tr, _, _) in same[0].links.items():
            b, t = sum(o.links[(s, d)][1] for o in same), sum(o.links[(s, d)][2] for o in same)
            total[f"{s}-{d}"] = _link_json(tr, b, t, None)
        out[f"{kind}-total@{group}"] = total
    return out


def _link_json(transport: str, nbytes: int, ns: int, op_name: str | None) -> dict:
    return {
        "Transport Type": transport,
        "Transit Size(MB)": _fmt(nbytes),
        "Transit Time(ms)": _fmt(ns),
        "Bandwidth(GB/s)": round(nbytes / ns, 4),
        "Op Name": op_name,
    }


def _simulate_step(ranks: int, groups: dict[str, dict], of_rank: dict, compute: list[int], rng, slow) -> list:
    """Every rank's ops of one step; the job is in lock-step, each rank waiting for the slowest."""
    ops = [[] for _ in range(ranks)]
    for r in range(ranks):
        for seq, kind in enumerate(PLAN):
            gid = of_rank[r]["tp" if kind == "allreduce" else "ep"]
            op = _op_links(kind, groups[gid]["global_ranks"], r, rng, slow)
            op.kind, op.group, op.seq, op.idle_ns = kind, gid, seq, rng.randrange(8_000, 20_000)
            ops[r].append(op)
    for seq in range(len(PLAN)):  # a collective ends when its slowest member's transfer does
        for gid in {ops[r][seq].group for r in range(ranks)}:
            members = groups[gid]["global_ranks"]
            slowest = max(ops[m][seq].transit_ns for m in members)
            for m in members:
                ops[m][seq].wait_ns = slowest - ops[m][seq].transit_ns
    need = [compute[r] + sum(o.transit_ns + o.wait_ns + o.idle_ns for o in ops[r]) for r in range(ranks)]
    end = max(need)
    for r in range(ranks):  # the rest of the wait: for the rank that computes longest, spread over the ops
        extra = end - need[r]
        for i, op in enumerate(ops[r]):
            op.wait_ns += extra // len(PLAN) + (extra % len(PLAN) if i == 0 else 0)
    return ops


def _place(ops: list[OpRec], step_start: int, compute: int) -> None:
    seg, t = compute // (len(ops) + 1), step_start + PREP_NS
    for op in ops:
        t += seg
        op.start_ns = t - t % 500
        t = op.start_ns + op.transit_ns + op.wait_ns + op.idle_ns


def _step_row(rank: int, tp: int, step: int, compute: int, ops: list[OpRec], free: int) -> tuple[str, dict]:
    comm = sum(o.transit_ns + o.wait_ns + o.idle_ns for o in ops)
    overlapped = comm // 20  # decode overlaps little of its communication
    rec = {
        "step": step,
        "computing_ns": compute,
        "comm_not_overlapped_ns": comm - overlapped,
        "overlapped_ns": overlapped,
        "communication_ns": comm,
        "free_ns": free,
        "stage_ns": compute + comm - overlapped + free,
        "preparing_ns": PREP_NS,
        "wait_ns": sum(o.wait_ns for o in ops),
        "transit_ns": sum(o.transit_ns for o in ops),
    }
    us = [rec[k] for k in ("computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns")]
    cells = [*us, free, rec["stage_ns"], 0, rec["comm_not_overlapped_ns"], PREP_NS]
    return f"{rank % tp},{step}," + ",".join(f"{c / 1000:.3f}" for c in cells), rec


def _write_rank(out: Path, rank: int, tp: int, world: int, groups: dict, steps: list, pid: int) -> Path:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(T0_NS // 10**9)) + "000"
    run = out / f"rank{rank}_{pid}_{stamp}_ascend_pt"
    (run / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    info = {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "active": len(steps), "warmup": 1, "repeat": 1, "skip_first": 12},
                "record_shapes": True, "profile_memory": False, "with_stack": False,
                "with_flops": False, "with_modules": False,
            },
            "experimental_config": {
                "_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION", "_l2_cache": False,
                "_msprof_tx": False, "_mstx": False, "_data_simplification": True, "record_op_args": False,
                "_export_type": ["text"], "_host_sys": [], "_op_attr": False, "_gc_detect_threshold": None,
            },
        },
        "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308 + rank * 977,
                       "start_monotonic": 4699801002845430 + rank * 1009},
        "end_info": {"collectionTimeEnd": T0_NS + len(steps) * 40_000_000, "MonotonicTimeEnd": 4699802061975030},
        "torch_npu_version": TORCH_NPU_VERSION, "cann_version": CANN_VERSION, "rank_id": str(rank),
    }  # fmt: skip
    (run / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=4), encoding="utf-8")
    mine = {
        g: v | {"group_rank": v["global_ranks"].index(rank)}
        for g, v in groups.items()
        if rank in v["global_ranks"]
    }
    meta = {
        "distributed_args": {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": 1,
                             "data_parallel_size": 1, "expert_model_parallel_size": world // tp, "rank": rank,
                             "world_size": world},
        "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_RDMA_TC": "", "HCCL_RDMA_SL": "",
                          "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "HCCL_ALGO": ""},
        "parallel_group_info": {g: {"group_name": v["group_name"], "group_rank": v["group_rank"],
                                    "global_ranks": v["global_ranks"]} for g, v in mine.items()},
    }  # fmt: skip
    (run / "profiler_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    out_dir = run / "ASCEND_PROFILER_OUTPUT"
    comm, matrix, lines = {}, {}, [STEP_TRACE_HEADER]
    for number, line, ops in steps:
        lines.append(line)
        coll = {f"{o.name}@{o.group}": {"Communication Time Info": _time_info(o),
                                        "Communication Bandwidth Info": _bandwidth_info(o)} for o in ops}  # fmt: skip
        comm[f"step{number}"] = {"p2p": {}, "collective": coll}
        matrix[f"step{number}"] = {"p2p": {}, "collective": _matrix(ops)}
    (out_dir / "step_trace_time.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out_dir / "communication.json").write_text(json.dumps(comm), encoding="utf-8")
    (out_dir / "communication_matrix.json").write_text(json.dumps(matrix), encoding="utf-8")
    (out_dir / "analyse.done").write_text("", encoding="utf-8")
    return run


def generate(
    out: Path,
    ranks: int = 64,
    steps: int = 8,
    tp: int = 8,
    seed: int = 0,
    slow_rank: int | None = None,
    slow_factor: float = 1.15,
    slow_link: tuple[int, int] | None = None,
    slow_link_gbps: float = 5.0,
) -> dict:
    """Write the job under ``out`` (replaced) and return its ground truth (also ``out/ground_truth.json``)."""
    if ranks % tp or ranks < 2 * tp:
        raise ValueError(f"ranks ({ranks}) must be a multiple of tp ({tp}) with at least two nodes")
    rng = random.Random(seed)
    groups = _layout(ranks, tp, rng)
    of_rank = {
        r: {v["group_name"]: g for g, v in groups.items() if r in v["global_ranks"]} for r in range(ranks)
    }
    slow_rank = ranks // 3 if slow_rank is None else slow_rank
    src, dst = slow_link if slow_link is not None else (tp + 4, ranks - tp + 4)
    if (src - dst) % tp or src == dst:
        raise ValueError("the slow link must join two ranks of one EP group (same local rank, other node)")
    slow = {"src": src, "dst": dst, "gbps": slow_link_gbps}
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    per_rank: list[list] = [[] for _ in range(ranks)]
    recs: list[list[dict]] = [[] for _ in range(ranks)]
    step_len = 60_000_000
    for s in range(steps):
        number = s + 1
        compute = [round(COMPUTE_NS * rng.gauss(1.0, 0.006)) for _ in range(ranks)]
        compute[slow_rank] = round(compute[slow_rank] * slow_factor)
        ops = _simulate_step(ranks, groups, of_rank, compute, rng, slow)
        for r in range(ranks):
            _place(ops[r], T0_NS + s * step_len, compute[r])
            line, rec = _step_row(r, tp, number, compute[r], ops[r], FREE_NS + rng.randrange(0, 120_000))
            per_rank[r].append((number, line, ops[r]))
            recs[r].append(rec)
    pids = [rng.randrange(100_000, 4_000_000) for _ in range(ranks)]
    dirs = [_write_rank(out, r, tp, ranks, groups, per_rank[r], pids[r]) for r in range(ranks)]
    truth = _truth(ranks, tp, steps, groups, of_rank, recs, per_rank, slow_rank, slow_factor, slow, dirs)
    text = json.dumps(truth, indent=2)
    (out / "ground_truth.json").write_text(text, encoding="utf-8")
    return json.loads(text)  # as a reader of ground_truth.json sees it (string keys)


def _truth(ranks, tp, steps, groups, of_rank, recs, per_rank, slow_rank, slow_factor, slow, dirs) -> dict:
    totals = {r: {k: sum(x[k] for x in recs[r]) for k in recs[r][0] if k != "step"} for r in range(ranks)}
    median_compute = statistics.median(totals[r]["computing_ns"] for r in range(ranks))
    others_wait = statistics.median(totals[r]["wait_ns"] for r in range(ranks) if r != slow_rank)
    ep = of_rank[slow["src"]]["ep"]
    members = groups[ep]["global_ranks"]
    links: dict[tuple[int, int], list[int]] = {}
    for r in members:  # link bandwidth as a reader aggregates it: Σ bytes / Σ ns over the *-total entries
        for _, _, ops in per_rank[r]:
            for op in (o for o in ops if o.kind == "alltoallv"):
                for (s, d), (tr, b, t) in op.links.items():
                    if tr == "RDMA":
                        acc = links.setdefault((members[s], members[d]), [0, 0])
                        acc[0], acc[1] = acc[0] + b, acc[1] + t
    bw = {k: b / t for k, (b, t) in links.items()}
    key = (slow["src"], slow["dst"])
    return {
        "ranks": ranks,
        "steps": steps,
        "tp": tp,
        "parallel_groups": groups,
        "run_dirs": {r: d.name for r, d in enumerate(dirs)},
        "slow_rank": {
            "rank": slow_rank,
            "factor": slow_factor,
            "computing_ns": totals[slow_rank]["computing_ns"],
            "median_computing_ns": median_compute,
            "excess_ns": totals[slow_rank]["computing_ns"] - median_compute,
            "wait_ns": totals[slow_rank]["wait_ns"],
            "peers_median_wait_ns": others_wait,
        },
        "slow_link": {
            "src_rank": slow["src"],
            "dst_rank": slow["dst"],
            "group": ep,
            "transport": "RDMA",
            "injected_gbps": slow["gbps"],
            "size_bytes": links[key][0],
            "transit_ns": links[key][1],
            "bandwidth_gbps": bw[key],
            "median_rdma_gbps_of_group": statistics.median(bw.values()),
        },
        "per_rank_totals": totals,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow-rank", type=int, default=None, help="default: ranks // 3")
    p.add_argument("--slow-factor", type=float, default=1.15, help="its computing × this")
    p.add_argument("--slow-link", type=int, nargs=2, default=None, metavar=("SRC", "DST"))
    p.add_argument("--slow-link-gbps", type=float, default=5.0)
    p.add_argument("--moe", action="store_true", help="an EP=8 MoE job with a hot expert instead (_moe.py)")
    a = p.parse_args(argv)
    if a.moe:
        return _main_moe(a.out_dir, a.steps, a.seed)
    t0 = time.perf_counter()
    truth = generate(a.out_dir, a.ranks, a.steps, a.tp, a.seed, a.slow_rank, a.slow_factor,
                     tuple(a.slow_link) if a.slow_link else None, a.slow_link_gbps)  # fmt: skip
    sr, sl = truth["slow_rank"], truth["slow_link"]
    print(
        f"{a.ranks} ranks × {a.steps} steps in {time.perf_counter() - t0:.1f} s -> {a.out_dir}\n"
        f"slow rank {sr['rank']}: computing +{sr['excess_ns'] / 1e6:.1f} ms over the median; "
        f"slow link {sl['src_rank']}->{sl['dst_rank']} {sl['transport']}: {sl['bandwidth_gbps']:.2f} GB/s "
        f"(median {sl['median_rdma_gbps_of_group']:.2f})"
    )
    return 0


def _main_moe(out: Path, steps: int, seed: int) -> int:
    if __package__ in (None, ""):  # run as a script: the repository root makes sample_traces importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sample_traces._moe import generate_moe

    h = generate_moe(out, steps=steps, seed=seed)["hot"]
    print(f"EP=8 MoE job -> {out}: expert {h['expert']} of layer {h['layer']} on rank {h['rank']}, "
          f"{h['ratio']:.1f}x the mean tokens")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
