"""Generate a realistic torch_npu (Ascend) profile of LLM decode with known ground truth.

    python sample_traces/generate.py OUT_DIR [--steps N] [--layers L] [--ranks R] [--seed S]
                                             [--target-trace-bytes B] [--kernel-rows N] [--files …]

For each rank r this writes ``OUT_DIR/rank{r}_{pid}_{YYYYmmddHHMMSSfff}_ascend_pt/`` as torch_npu 2.5.1 +
CANN 8.0.RC3 export it at Level1 / PipeUtilization (profiler_info_{r}.json, profiler_metadata.json,
ASCEND_PROFILER_OUTPUT/{trace_view.json, kernel_details.csv, step_trace_time.csv, op_statistic.csv,
analyse.done}), and ``OUT_DIR/ground_truth.json`` with the exact figures written.

The workload is tensor-parallel decode of a Qwen2-7B-like model (TP=2 by default), eager mode, with injected
problems whose size is known: AI_CPU fallback ops (IndexPut on float64, ArgMaxV2) on their own stream 3,
H2D/D2H MEMCPY_ASYNC tasks, a TransData (first layer) and a Cast per step, and host stalls (every second
step) that idle the device.  Output is streamed step by step (memory does not grow with the number of
steps) and is a pure function of the arguments: the same arguments give byte-identical files.

ground_truth.json, per rank (all times int ns, computed as a reader would: ``round(µs × 1000)``):
``trace`` event counts (by phase; Ascend Hardware / HCCL / host X events; overlap slices; flow pairs by
category; ``device_tasks`` = Ascend Hardware + HCCL X events); ``kernel_details`` (rows, ``dur_ns_sum``,
rows by Accelerator Core); ``ai_cpu`` kernel names and counts; ``memcpy``; ``trans_ops``; ``stalls``;
``device_time_ns`` over the Overlap Analysis window (first to last compute/communication task):
Computing / Communication / Communication(Not Overlapped) / Free unions, ``buckets`` (each ns given to the
first active class of matmul, attention, vector, ai_cpu, communication, memcpy, other — else idle; they sum
to the window), ``task_sums`` (plain duration sums) and ``ai_cpu_exposed`` (AI_CPU time covered by no other
compute or communication); and ``per_step`` records equal to step_trace_time.csv.  Free is split at
ProfilerStep boundaries, so each Overlap Analysis slice lies inside one step.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sample_traces import _events as ev  # noqa: E402
from sample_traces import _long_context  # noqa: E402
from sample_traces._catalog import MODEL_NAME, CommSpec, KernelSpec, MemcpySpec, catalog, layer_ops  # noqa: E402
from sample_traces._files import RankFiles  # noqa: E402
from sample_traces._rank import S_AICPU, S_COMPUTE, Rank, us  # noqa: E402
from sample_traces._step import finish_step  # noqa: E402

FILES = ("trace_view", "kernel_details", "step_trace_time", "op_statistic")
# written only when asked for (--files … memory): memory_record.csv, operator_memory.csv, npu_module_mem.csv
OPTIONAL_FILES = ("memory",)
FIRST_STEP = 11  # schedule skip_first=10, warmup=1
BASE_NS = 1_736_933_600_000_000_000  # 2025-01-15 09:33:20 UTC
BATCH = 16
Op = tuple[str, object]


def step_plan(layers: int, stall: tuple[int, float] | None) -> list[Op]:
    ops: list[Op] = [
        ("memcpy", "h2d_input_ids"),
        ("memcpy", "h2d_block_tables"),
        ("kernel", "index_put"),
        ("kernel", "embedding"),
        ("comm", "allreduce"),
    ]
    for layer in range(layers):
        if stall is not None and stall[0] == layer:
            ops += [("memcpy", "d2h_finished"), ("sync", None), ("stall", stall)]
        ops += [("comm" if key == "allreduce" else "kernel", key) for key in layer_ops(layer)]
    ops += [
        ("kernel", "post_norm"),
        ("kernel", "lm_head"),
        ("comm", "allgather"),
        ("kernel", "cast_logits"),
        ("event", (S_COMPUTE, S_AICPU)),
        ("kernel", "argmax"),
        ("event", (S_AICPU, S_COMPUTE)),
        ("memcpy", "d2h_next_tokens"),
        ("sync", None),
    ]
    return ops


def _run_step(ranks: list[Rank], plan: list[Op], specs: dict, plan_rng: random.Random) -> None:
    for kind, arg in plan:
        if kind == "comm":
            sp = specs[arg]
            assert isinstance(sp, CommSpec)
            arrived = max([rk.comm_launch(sp) for rk in ranks])
            xfer = int(sp.xfer_us * 1000 * plan_rng.lognormvariate(0.0, 0.08))
            for rk in ranks:
                rk.comm_finish(sp, arrived, xfer)
            continue
        for rk in ranks:
            if kind == "kernel":
                spec = specs[arg]
                assert isinstance(spec, KernelSpec)
                rk.kernel(spec)
            elif kind == "memcpy":
                mspec = specs[arg]
                assert isinstance(mspec, MemcpySpec)
                rk.memcpy(mspec)
            elif kind == "event":
                src, dst = arg  # type: ignore[misc]
                rk.event_pair(src, dst)
            elif kind == "sync":
                rk.synchronize()
            elif kind == "stall":
                layer, host_us = arg  # type: ignore[misc]
                rk.stall(layer, host_us)


def _clean(out: Path) -> None:
    """Only what a previous run of this generator left: run folders and the ground truth."""
    for old in out.glob("rank*_ascend_pt"):
        if old.is_dir():
            shutil.rmtree(old)
    (out / "ground_truth.json").unlink(missing_ok=True)


def generate(
    out_dir: str | Path,
    *,
    steps: int = 4,
    layers: int = 4,
    ranks: int = 2,
    seed: int = 0,
    target_trace_bytes: int | None = None,
    kernel_rows: int | None = None,
    batch: int = BATCH,
    files: tuple[str, ...] = FILES,
) -> dict:
    """Write the profile under ``out_dir`` and return the ground truth (also written as ground_truth.json).

    At least ``steps`` decode steps are generated, then more until rank 0's trace_view.json reaches
    ``target_trace_bytes`` and its kernel_details.csv ``kernel_rows`` rows (each target only when given).
    """
    unknown = set(files) - set(FILES) - set(OPTIONAL_FILES)
    if unknown or steps < 1 or layers < 1 or ranks < 1:
        raise ValueError(
            f"bad arguments: files {sorted(unknown)}, steps {steps}, layers {layers}, ranks {ranks}"
        )
    if target_trace_bytes and "trace_view" not in files:
        raise ValueError("--target-trace-bytes needs trace_view among --files")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    world = max(2, ranks)  # a single written rank still talks to its TP peer
    plan_rng = random.Random(f"diag-sample:{seed}:plan")
    base = BASE_NS + plan_rng.randrange(10**8) * 10
    group_tag = 100 + plan_rng.randrange(900)
    specs = catalog(batch, world)
    sims = [
        Rank(
            r,
            world,
            seed,
            group_tag,
            write_trace=r < ranks and "trace_view" in files,
            write_kernels=r < ranks and "kernel_details" in files,
        )
        for r in range(world)
    ]
    writers = [RankFiles(out, sims[r], base + us(3.7 * r), files, world) for r in range(ranks)]
    step_starts = [w.start_ns + us(150) for w in writers] + [
        base + us(150 + 3.7 * r) for r in range(ranks, world)
    ]
    for w in writers:
        w.rank.placeholder("PROFILING_ENABLE", w.start_ns + us(40))
    stack_args = ev.cpu_op_args(None, None, _PROFILER_STEP_STACK)
    index = 0
    while True:
        stall = (plan_rng.randrange(layers), plan_rng.uniform(900, 2600)) if index % 2 == 1 else None
        plan = step_plan(layers, stall)
        for rk, start in zip(sims, step_starts, strict=True):
            rk.begin_step(FIRST_STEP + index, start)
        _run_step(sims, plan, specs, plan_rng)
        logs = [rk.end_step(stack_args) for rk in sims]
        step_starts = [log.end for log in logs]
        index += 1
        lead = writers[0]
        done = index >= steps
        if target_trace_bytes:
            done = done and lead.trace_bytes + lead.pending_trace_bytes() >= target_trace_bytes
        if kernel_rows:
            done = done and lead.rank.kd["rows"] >= kernel_rows
        for w, log in zip(writers, logs, strict=False):
            w.write_step(finish_step(w.rank, log, first=index == 1, last=done))
        if done:
            break
    truth = {
        "generator": {
            "name": "sample_traces/generate.py",
            "format_version": 1,
            "model": MODEL_NAME,
            "seed": seed,
            "steps": index,
            "first_step": FIRST_STEP,
            "layers": layers,
            "ranks": ranks,
            "world_size": world,
            "batch": batch,
            "files": list(files),
        }
    }
    for w in writers:
        w.close(end_ns=step_starts[w.rank.rank] + us(120), steps=index)
    _write_truth(out / "ground_truth.json", truth, writers)
    with open(out / "ground_truth.json", encoding="utf-8") as fh:
        return json.load(fh)


_PROFILER_STEP_STACK = ";\r\n".join(
    (
        "/usr/local/python3.10.14/lib/python3.10/site-packages/torch_npu/profiler/profiler.py(244): step",
        "/usr/local/python3.10.14/lib/python3.10/site-packages/vllm_ascend/worker/worker.py(301): execute_model",
        "/usr/local/python3.10.14/lib/python3.10/site-packages/vllm/engine/llm_engine.py(1386): step",
        "benchmark_decode.py(88): main",
    )
)


def _write_truth(path: Path, truth: dict, writers: list[RankFiles]) -> None:
    """Summary blocks as indented JSON, then each rank's per-step records streamed from its spill file."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write('{\n  "generator": ' + json.dumps(truth["generator"]) + ',\n  "ranks": {')
        for i, w in enumerate(writers):
            summary = json.dumps(w.summary(), indent=2).replace("\n", "\n    ")
            fh.write(
                ("," if i else "") + f'\n    "{w.rank.rank}": ' + summary[:-6] + ',\n      "per_step": ['
            )
            w.copy_steps(fh, indent="\n        ")
            fh.write("\n      ]\n    }")
        fh.write("\n  }\n}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("out_dir", type=Path)
    p.add_argument("--steps", type=int, default=4, help="decode steps (minimum when a target is given)")
    p.add_argument("--layers", type=int, default=4, help="decoder layers (Qwen2-7B has 28)")
    p.add_argument("--ranks", type=int, default=2, help="ranks written (TP world size is max(2, ranks))")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=BATCH, help="decode tokens per step")
    p.add_argument(
        "--target-trace-bytes", type=float, default=None, help="grow until trace_view.json ≥ B bytes"
    )
    p.add_argument("--kernel-rows", type=float, default=None, help="grow until kernel_details.csv ≥ N rows")
    p.add_argument(
        "--files",
        nargs="+",
        choices=FILES + OPTIONAL_FILES,
        default=list(FILES),
        help="which exports to write (memory: the profile_memory=True files, off by default)",
    )
    p.add_argument(
        "--long-context", action="store_true", help="instead: prefill / decode at growing lengths (#20)"
    )
    a = p.parse_args(argv)
    if a.long_context:  # sample_traces/_long_context.py: the Ascend side of the long-context pair
        print(f"wrote {_long_context.write_ascend(a.out_dir)}")
        return 0
    t0 = time.perf_counter()
    truth = generate(
        a.out_dir,
        steps=a.steps,
        layers=a.layers,
        ranks=a.ranks,
        seed=a.seed,
        target_trace_bytes=int(a.target_trace_bytes) if a.target_trace_bytes else None,
        kernel_rows=int(a.kernel_rows) if a.kernel_rows else None,
        batch=a.batch,
        files=tuple(a.files),
    )
    secs = time.perf_counter() - t0
    for rank_id, r in truth["ranks"].items():
        size = sum(r["files"].values())
        print(
            f"rank {rank_id}: {r['run_dir']}  {r['steps']['count']} steps, {r['kernel_details']['rows']} kernel rows, "
            f"{r['files'].get('trace_view.json', 0) / 1e6:.1f} MB trace, {size / 1e6:.1f} MB total"
        )
    total = sum(sum(r["files"].values()) for r in truth["ranks"].values())
    print(
        f"wrote {total / 1e6:.1f} MB in {secs:.1f} s ({total / 1e6 / max(secs, 1e-9):.1f} MB/s) -> {a.out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
