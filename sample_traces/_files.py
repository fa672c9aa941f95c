"""One rank's export folder: streamed writers for its files, its metadata JSONs and its ground truth."""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import IO

from sample_traces import _events as ev
from sample_traces._accounting import CLASSES, OVERLAP_THREADS
from sample_traces._memory import write_memory
from sample_traces._pmu import HEADER as KERNEL_HEADER
from sample_traces._rank import (
    S_AICPU,
    S_COMM,
    S_COMPUTE,
    S_CTRL,
    SORT_CANN,
    SORT_HCCL,
    SORT_HW,
    SORT_OVERLAP,
    Rank,
)
from sample_traces._step import STEP_TRACE_HEADER, StepOutput

TORCH_NPU_VERSION, CANN_VERSION = "2.5.1", "8.0.RC3"
OP_STAT_HEADER = "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"
ENV = (
    "ASCEND_GLOBAL_LOG_LEVEL",
    "HCCL_RDMA_TC",
    "HCCL_RDMA_SL",
    "ACLNN_CACHE_LIMIT",
    "HOST_CACHE_CAPACITY",
    "ASCEND_ENHANCE_ENABLE",
    "PYTORCH_NPU_ALLOC_CONF",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_ALGO",
)
TP_GROUP = "group_name_1"


def run_dir_name(rank: int, pid: int, start_ns: int) -> str:
    """``{worker}_{pid}_{YYYYmmddHHMMSSfff}_ascend_pt`` (the stamp in UTC, so output never depends on TZ)."""
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(start_ns // 10**9)) + f"{start_ns // 10**6 % 1000:03d}"
    return f"rank{rank}_{pid}_{stamp}_ascend_pt"


class RankFiles:
    def __init__(self, out: Path, rank: Rank, start_ns: int, files: tuple[str, ...], world: int) -> None:
        self.rank, self.start_ns, self.files, self.world = rank, start_ns, files, world
        self.dir = out / run_dir_name(rank.rank, rank.pid, start_ns)
        self.output = self.dir / "ASCEND_PROFILER_OUTPUT"
        self.output.mkdir(parents=True)
        self.trace_bytes = 0
        self.n_meta = 0
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.stalls: Counter[str] = Counter()
        self._trace = self._open("trace_view.json") if "trace_view" in files else None
        self._kernels = self._open("kernel_details.csv") if "kernel_details" in files else None
        self._step_trace = self._open("step_trace_time.csv") if "step_trace_time" in files else None
        # per-step ground truth waits here until the run ends (kept out of memory); closed by copy_steps
        self._spill: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self._n_spilled = 0
        self.step_windows: list[
            tuple[int, int, int]
        ] = []  # (step, start_ns, end_ns): the memory files' steps
        self.memory_truth: dict | None = None
        if self._trace is not None:
            meta = self._meta()
            self.n_meta = len(meta)
            self._write_trace("[" + ", ".join(meta))
        if self._kernels is not None:
            self._kernels.write(KERNEL_HEADER + "\r\n")
        if self._step_trace is not None:
            self._step_trace.write(STEP_TRACE_HEADER + "\r\n")

    def _open(self, name: str) -> IO[str]:
        return open(self.output / name, "w", encoding="utf-8", newline="")

    def _write_trace(self, text: str) -> None:
        assert self._trace is not None
        self._trace.write(text)
        self.trace_bytes += len(text)  # ASCII only

    def _meta(self) -> list[str]:
        rk = self.rank
        main, queue = rk.pid, rk.qtid
        return [
            *ev.python_meta(rk.pid, [main, queue]),
            *ev.device_meta(
                rk.cann_pid, "CANN", "CPU", SORT_CANN, [(main, f"Thread {main}"), (queue, f"Thread {queue}")]
            ),
            *ev.device_meta(
                rk.hw_pid,
                "Ascend Hardware",
                "NPU",
                SORT_HW,
                [(s, f"Stream {s}") for s in (S_CTRL, S_COMPUTE, S_AICPU, S_COMM)],
            ),
            *ev.device_meta(
                rk.hccl_pid,
                "HCCL",
                "NPU",
                SORT_HCCL,
                [(0, f"Group {TP_GROUP} Communication"), (1, "Plane 0")],
            ),
            *ev.device_meta(
                rk.overlap_pid,
                "Overlap Analysis",
                "NPU",
                SORT_OVERLAP,
                list(enumerate(OVERLAP_THREADS)),
                False,
            ),
        ]

    def pending_trace_bytes(self) -> int:
        out = self.rank.out
        return sum(map(len, out)) + 2 * len(out) if out else 0

    def write_step(self, step: StepOutput) -> None:
        if self._trace is not None and step.trace:
            self._write_trace(", " + ", ".join(step.trace))
        if self._kernels is not None and step.kernel_rows:
            self._kernels.write(step.kernel_rows)
        if self._step_trace is not None:
            self._step_trace.write(step.step_trace_row)
        rec = step.record
        self.step_windows.append((rec["step"], rec["start_ns"], rec["end_ns"]))
        if self.first_step is None:
            self.first_step = rec["step"]
        self.last_step = rec["step"]
        if rec["stall"]:
            self.stalls["count"] += 1
            self.stalls["device_gap_ns"] += rec["stall"].get("device_gap_ns", 0)
            self.stalls["host_stall_ns"] += rec["stall"]["host_stall_ns"]
        self._spill.write(json.dumps(rec, separators=(", ", ": ")) + "\n")
        self._n_spilled += 1

    def close(self, end_ns: int, steps: int) -> None:
        rk = self.rank
        if self._trace is not None:
            rk.placeholder("PROFILING_DISABLE", end_ns)
            assert rk.out is not None
            self._write_trace(", " + ", ".join(rk.out) + "]")
            rk.out = []
        else:
            rk.placeholder("PROFILING_DISABLE", end_ns)
        for fh in (self._trace, self._kernels, self._step_trace):
            if fh is not None:
                fh.close()
        if "op_statistic" in self.files:
            self._write_op_statistic()
        if "memory" in self.files:  # off by default: the default export stays byte-identical
            self.memory_truth = write_memory(self.output, self.step_windows, rk.rank)
        (self.output / "analyse.done").write_bytes(b"")
        self._write_profiler_info(end_ns, steps)
        self._write_metadata()

    def _write_op_statistic(self) -> None:
        stats = sorted(self.rank.op_stats.items(), key=lambda kv: (-kv[1][1], kv[0]))
        total = sum(v[1] for _, v in stats) or 1
        f3 = ev.us_float
        lines = [OP_STAT_HEADER]
        for (op_type, core), (count, tot, lo, hi) in stats:
            avg = repr(round(tot / count / 1000, 3))
            lines.append(
                f"{op_type},{core},{count},{f3(tot)},{f3(lo)},{avg},{f3(hi)},{round(tot / total * 100, 3)!r}"
            )
        (self.output / "op_statistic.csv").write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")

    def _write_profiler_info(self, end_ns: int, steps: int) -> None:
        rk = self.rank
        start_cnt = 17_238_197_612_056 + rk.rank * 1_234_567
        monotonic = 172_163_581_670_080 + rk.rank * 12_345_678
        info = {
            "config": {
                "common_config": {
                    "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                    "schedule": {"wait": 0, "active": steps, "warmup": 1, "repeat": 1, "skip_first": 10},
                    "record_shapes": True,
                    "profile_memory": "memory" in self.files,
                    "with_stack": True,
                    "with_flops": False,
                    "with_modules": False,
                },
                "experimental_config": {
                    "_profiler_level": "Level1",
                    "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                    "_l2_cache": False,
                    "_msprof_tx": False,
                    "_data_simplification": True,
                    "record_op_args": False,
                    "_export_type": "text",
                    "_op_attr": False,
                    "_gc_detect_threshold": None,
                },
            },
            "start_info": {
                "syscnt_enable": True,
                "freq": 100,
                "start_cnt": start_cnt,
                "start_monotonic": monotonic,
            },
            "end_info": {"collectionTimeEnd": end_ns, "MonotonicTimeEnd": monotonic + end_ns - self.start_ns},
            "torch_npu_version": TORCH_NPU_VERSION,
            "cann_version": CANN_VERSION,
            "rank_id": rk.rank,
        }
        (self.dir / f"profiler_info_{rk.rank}.json").write_text(json.dumps(info, indent=4), encoding="utf-8")

    def _write_metadata(self) -> None:
        ranks = list(range(self.world))
        meta = {
            "ENV_VARIABLES": dict.fromkeys(ENV, "") | {"ASCEND_GLOBAL_LOG_LEVEL": "3"},
            "distributed_args": {
                "tensor_model_parallel_size": self.world,
                "pipeline_model_parallel_size": 1,
                "data_parallel_size": 1,
                "rank": self.rank.rank,
                "world_size": self.world,
            },
            "parallel_group_info": {
                "group_name_0": {
                    "group_name": "default_group",
                    "group_rank": self.rank.rank,
                    "global_ranks": ranks,
                },
                TP_GROUP: {"group_name": "tp", "group_rank": self.rank.rank, "global_ranks": ranks},
            },
        }
        (self.dir / "profiler_metadata.json").write_text(json.dumps(meta, indent=4), encoding="utf-8")

    # -- ground truth ----------------------------------------------------------------------------------------
    def summary(self) -> dict:
        rk = self.rank
        n, kd, s = rk.n, rk.kd, rk.sums
        flows = {cat: n[f"flow:{cat}"] for cat in ("async_npu", "HostToDevice")}
        host_x = n["X_py"] + n["X_cann"]
        x_total = host_x + n["X_hw"] + n["X_hccl"] + n["X_overlap"]
        pairs = sum(flows.values())
        files = {p.name: p.stat().st_size for p in sorted(self.output.iterdir())}
        files |= {p.name: p.stat().st_size for p in sorted(self.dir.glob("*.json"))}
        ai_cpu = dict(sorted(rk.names.items()))
        window = s["u:window"]
        return {
            "run_dir": self.dir.name,
            "rank_id": rk.rank,
            "device_id": rk.rank,
            "host_pid": rk.pid,
            "files": files,
            "steps": {"count": self._n_spilled, "first": self.first_step, "last": self.last_step},
            "trace": {
                "written": self._trace is not None,
                "events": self.n_meta + x_total + 2 * pairs,
                "events_by_phase": {"M": self.n_meta, "X": x_total, "s": pairs, "f": pairs},
                "ascend_hardware_x": n["X_hw"],
                "hccl_x": n["X_hccl"],
                "host_x": host_x,
                "python_x": n["X_py"],
                "cann_x": n["X_cann"],
                "overlap_slices": n["X_overlap"],
                "overlap_slices_by_kind": {k: n[f"overlap:{k}"] for k in OVERLAP_THREADS},
                "flows": flows,
                "flow_pairs": pairs,
                "device_tasks": n["X_hw"] + n["X_hccl"],
                "ascend_hardware_by_task_type": {
                    k[3:]: v for k, v in sorted(n.items()) if k.startswith("hw:")
                },
            },
            "kernel_details": {
                "written": self._kernels is not None,
                "rows": kd["rows"],
                "dur_ns_sum": kd["dur_ns"],
                "rows_by_accelerator_core": {
                    k[5:]: v for k, v in sorted(kd.items()) if k.startswith("core:")
                },
                "ai_cpu_rows": kd["core:AI_CPU"],
                "communication_rows": kd["core:HCCL"],
            },
            "ai_cpu": {"count": sum(ai_cpu.values()), "names": ai_cpu, "stream_id": S_AICPU},
            "memcpy": {
                "count": kd["memcpy"],
                "host_to_device": kd["memcpy:h2d"],
                "device_to_host": kd["memcpy:d2h"],
                "bytes": kd["memcpy_bytes"],
                "dur_ns_sum": s["memcpy"],
            },
            "trans_ops": {
                "TransData": kd["trans:TransData"],
                "Cast": kd["trans:Cast"],
                "dur_ns_sum": s["trans"],
            },
            **({"memory": self.memory_truth} if self.memory_truth is not None else {}),
            "stalls": {k: self.stalls[k] for k in ("count", "device_gap_ns", "host_stall_ns")},
            "device_time_ns": {
                "window": window,
                "computing": s["u:computing"],
                "communication": s["u:communication"],
                "comm_not_overlapped": s["u:comm_not_overlapped"],
                "overlapped": s["u:communication"] - s["u:comm_not_overlapped"],
                "free": s["u:free"],
                "ai_cpu_exposed": s["u:ai_cpu_exposed"],
                "buckets": {c: s[f"p:{c}"] for c in (*CLASSES, "idle")},
                "task_sums": {c: s[c] for c in (*CLASSES, "trans")},
            },
        }

    def copy_steps(self, fh: IO[str], indent: str) -> None:
        self._spill.seek(0)
        for i, line in enumerate(self._spill):
            fh.write(("," if i else "") + indent + line.rstrip("\n"))
        self._spill.close()
