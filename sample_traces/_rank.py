"""One rank's host and device timelines, simulated op by op, with the trace events each op leaves.

Host side (eager torch_npu): the main thread runs the framework op, the aclnn op inside it and an
``Enqueue``; the task-queue thread dequeues it and calls CANN (``AscendCL@…``, ``Node@launch``); the device
task starts once launched and once its stream is free.  Host times have a 10 ns grain, device times 1 ns,
as in real exports.  Timing draws come from ``rng`` only, so which files are written never changes a time;
cosmetic draws (PMU values, sub-ns fractions) have their own generators.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from sample_traces import _events as ev
from sample_traces._catalog import CommSpec, KernelSpec, MemcpySpec
from sample_traces._pmu import kernel_static, pmu_text

S_CTRL, S_COMPUTE, S_AICPU, S_COMM = 0, 2, 3, 4
SORT_CANN, SORT_HW, SORT_HCCL, SORT_OVERLAP = 7, 13, 15, 23
COMM_TAIL = ",0," + ",".join(["N/A"] * 34) + "\r\n"
_QUEUE_ARGS = '{{"correlation_id": {}}}'


def us(x: float) -> int:
    """A host duration in ns, on the exporter's 10 ns grain."""
    return int(round(x * 100)) * 10


@dataclass
class StepLog:
    number: int
    start: int  # ProfilerStep#N start on the host
    end: int = 0
    compute: list[tuple[int, int, str]] = field(default_factory=list)
    comm: list[tuple[int, int]] = field(default_factory=list)
    other: list[tuple[int, int, str]] = field(default_factory=list)  # memcpy / sync tasks
    # kernel_details rows: start, dur, text before Wait Time, text after it
    rows: list[tuple[int, int, str, str]] = field(default_factory=list)
    first_task: int | None = None
    n_rows: int = 0
    last_end: int = 0
    gap_from: int | None = None
    stall: dict[str, int] | None = None
    flow_ids: set[int] = field(default_factory=set)


class Rank:
    def __init__(
        self, rank: int, world: int, seed: int, group_tag: int, write_trace: bool, write_kernels: bool
    ) -> None:
        self.rank, self.world, self.group_tag = rank, world, group_tag
        self.write_kernels = write_kernels
        self.rng = random.Random(f"diag-sample:{seed}:rank{rank}:timing")
        self.frac_rng = random.Random(f"diag-sample:{seed}:rank{rank}:fraction")
        self.pmu_rng = random.Random(f"diag-sample:{seed}:rank{rank}:pmu")
        r = self.rng
        self.pid = 1_200_000 + r.randrange(2_800_000)
        self.qtid = self.pid + 2000 + r.randrange(3000)
        self.cann_pid = ev.device_pid(self.pid, SORT_CANN, rank)
        self.hw_pid = ev.device_pid(self.pid, SORT_HW, rank)
        self.hccl_pid = ev.device_pid(self.pid, SORT_HCCL, rank)
        self.overlap_pid = ev.device_pid(self.pid, SORT_OVERLAP, rank)
        self.out: list[str] | None = [] if write_trace else None
        self.t = 0
        self.qfree = 0
        self.sfree = {S_CTRL: 0, S_COMPUTE: 0, S_AICPU: 0, S_COMM: 0}
        self.last_end = dict(self.sfree)
        self.conn = 900 + r.randrange(300)
        self.corr = 8000 + r.randrange(2000)
        self.task_ids = {S_CTRL: 8, S_COMPUTE: 11000 + r.randrange(2000), S_AICPU: 300, S_COMM: 800}
        self.hcom_index = 0
        self.n: Counter[str] = Counter()  # event counts: X_py, X_cann, X_hw, X_hccl, flow:<cat>, hw:<type>
        self.kd: Counter[str] = Counter()  # kernel_details figures
        self.names: Counter[str] = Counter()  # AI_CPU kernel names
        self.sums: Counter[str] = Counter()  # duration sums by class, ns
        self.op_stats: dict[tuple[str, str], list[int]] = {}
        self.prev_row_end: int | None = None
        self.step = StepLog(0, 0)
        self._launches = [self._draw_host() for _ in range(4096)]
        self._spread = [r.lognormvariate(0.0, 0.07) for _ in range(4096)]  # kernel duration factors
        self._args: dict[str, str] = {}
        self._static: dict[str, str] = {}
        self._pending: tuple[int, int, int, int] = (0, 0, 0, 0)

    # -- helpers -------------------------------------------------------------------------------------------
    def _task_id(self, stream: int) -> int:
        tid = self.task_ids[stream]
        self.task_ids[stream] = (tid + 1) % 65536
        return tid

    def _conn(self) -> int:
        self.conn += 1
        return self.conn - 1

    def _hw_dur(self, dur: int) -> str:
        """Device durations carry a sub-ns fraction in real traces (53.7410625); it rounds to the same ns."""
        return repr((dur * 32 + self.frac_rng.randrange(8)) / 32000)

    def _cpu_args(self, key: str, dims: str, types: str, stack: str) -> str:
        args = self._args.get(key)
        if args is None:
            args = self._args[key] = ev.cpu_op_args(dims, types, stack)
        return args

    def _draw_host(self) -> tuple[int, ...]:
        """One launch's host-side offsets (ns): op overheads, queue latency, CANN call times."""
        u = self.rng.uniform
        return tuple(
            us(u(lo, hi))
            for lo, hi in (
                (6, 14),  # outer op start -> inner aclnn op start
                (9, 22),  # inner op start -> Enqueue
                (3, 7),  # Enqueue duration
                (0.5, 1.5),  # Enqueue end -> inner op end
                (2, 5),  # inner op end -> outer op end
                (1, 4),  # outer op end -> next op
                (8, 18),  # Enqueue -> Dequeue start (queue latency)
                (2.5, 5),  # Dequeue start -> AscendCL start
                (1.2, 2.5),  # AscendCL start -> Node@launch start
                (6, 14),  # Node@launch duration
                (1.5, 4),  # Node@launch end -> AscendCL end
                (2, 5),  # AscendCL end -> Dequeue end
                (0.8, 2),  # Dequeue end -> next Dequeue
            )
        )

    def _host_op(self, aten: str, api: str, args: str, acl_extra: int = 0) -> tuple[int, int, int, int, int]:
        """Framework op + aclnn op + Enqueue on the main thread, Dequeue on the queue thread.

        Timings come from a table of pre-drawn launches (one random pick per op keeps large runs fast).
        Returns (inner op start, AscendCL start, AscendCL end, Node@launch start, Node@launch dur).
        """
        tpl = self._launches[int(self.rng.random() * len(self._launches))]
        t0 = self.t
        inner_s = t0 + tpl[0]
        enq_s = inner_s + tpl[1]
        enq_d = tpl[2]
        inner_e = enq_s + enq_d + tpl[3]
        outer_e = inner_e + tpl[4]
        self.t = outer_e + tpl[5]
        dq_s = max(enq_s + tpl[6], self.qfree)
        acl_s = dq_s + tpl[7]
        node_s = acl_s + tpl[8]
        node_d = tpl[9]
        acl_e = node_s + node_d + tpl[10] + acl_extra
        dq_e = acl_e + tpl[11]
        self.qfree = dq_e + tpl[12]
        corr = self.corr
        self.corr += 1
        o = self.out
        if o is not None:
            pid, q, qa = self.pid, self.qtid, _QUEUE_ARGS.format(corr)
            o.append(ev.py_x(aten, pid, pid, t0, outer_e - t0, "cpu_op", args))
            o.append(ev.py_x(api, pid, pid, inner_s, inner_e - inner_s, "cpu_op", ev.INNER_ARGS))
            o.append(ev.py_x("Enqueue", pid, pid, enq_s, enq_d, "enqueue", qa))
            o.append(ev.py_x(f"Dequeue@{api}", pid, q, dq_s, dq_e - dq_s, "dequeue", qa))
        self.n["X_py"] += 4
        return inner_s, acl_s, acl_e, node_s, node_d

    def _unique(self, start: int) -> int:
        """torch_to_npu flows are keyed by the device task's start ns: keep it unique."""
        ids = self.step.flow_ids
        while start in ids:
            start += 1
        ids.add(start)
        return start

    def _placed(self, start: int, end: int) -> None:
        st = self.step
        if st.first_task is None or start < st.first_task:
            st.first_task = start
        if st.gap_from is not None and st.stall is not None:
            st.stall["device_gap_ns"] = start - st.gap_from
            st.gap_from = None
        st.last_end = max(st.last_end, end)

    def _device(self, stream: int, ready: int, dur: int) -> tuple[int, int]:
        start = self._unique(max(ready, self.sfree[stream]))
        end = start + dur
        self.sfree[stream] = end + 700 + int(self.rng.random() * 900)  # inter-task gap
        self.last_end[stream] = end
        self._placed(start, end)
        return start, end

    # -- steps -----------------------------------------------------------------------------------------------
    def begin_step(self, number: int, start: int) -> None:
        self.step = StepLog(number, start)
        self.t = start + us(self.rng.uniform(280, 650))  # scheduler / input preparation in Python

    def end_step(self, stack_args: str) -> StepLog:
        st = self.step
        st.end = self.t + us(self.rng.uniform(20, 60))
        if self.out is not None:
            self.out.append(
                ev.py_x(
                    f"ProfilerStep#{st.number}",
                    self.pid,
                    self.pid,
                    st.start,
                    st.end - st.start,
                    "cpu_op",
                    stack_args,
                )
            )
        self.n["X_py"] += 1
        return st

    def placeholder(self, name: str, at: int) -> None:
        """PROFILING_ENABLE / PROFILING_DISABLE on stream 0, outside every step."""
        if self.out is not None:
            self.out.append(
                ev.hw_x(
                    name,
                    self.hw_pid,
                    S_CTRL,
                    at,
                    "0.02",
                    "PLACE_HOLDER_SQE",
                    self._task_id(S_CTRL),
                    ev.UINT32_MAX,
                    self.conn,
                )
            )
        self.n.update(("X_hw", "hw:PLACE_HOLDER_SQE"))

    # -- ops -------------------------------------------------------------------------------------------------
    def kernel(self, sp: KernelSpec) -> None:
        r = self.rng
        args = self._cpu_args(sp.key, sp.input_dims, sp.input_types, sp.stack)
        inner_s, acl_s, acl_e, node_s, node_d = self._host_op(sp.aten, sp.api, args)
        dur = max(400, int(sp.dur_us * 1000 * self._spread[int(r.random() * 4096)]))
        start, end = self._device(sp.stream, node_s + 2500 + int(r.random() * 2510), dur)  # launch latency
        task_id = self._task_id(sp.stream)
        c_acl, c_node = self._conn(), self._conn()
        self.step.compute.append((start, end, "layout" if sp.trans else sp.bucket))
        self._kernel_row(sp, start, dur, task_id)
        self.sums["layout" if sp.trans else sp.bucket] += dur
        if sp.trans:
            self.kd[f"trans:{sp.op_type}"] += 1
            self.sums["trans"] += dur
        o = self.out
        if o is not None:
            q, cann = self.qtid, self.cann_pid
            subtask = 0 if sp.core == "MIX_AIC" else ev.UINT32_MAX
            o.append(
                ev.cann_x(
                    f"AscendCL@{sp.api}", cann, q, acl_s, acl_e - acl_s, "ACL_NN", "acl", sp.api, "0", c_acl
                )
            )
            o.append(
                ev.cann_x("Node@launch", cann, q, node_s, node_d, "launch", "node", "0", sp.name, c_node)
            )
            o.append(ev.h2d_start(c_node, cann, q, node_s))
            o.append(
                ev.hw_x(
                    sp.name,
                    self.hw_pid,
                    sp.stream,
                    start,
                    self._hw_dur(dur),
                    sp.task_type,
                    task_id,
                    subtask,
                    c_node,
                )
            )
            o.append(ev.h2d_finish(c_node, self.hw_pid, sp.stream, start))
            o.append(ev.torch_flow("s", start, self.pid, self.pid, inner_s))
            o.append(ev.torch_flow("f", start, self.hw_pid, sp.stream, start))
        self.n.update(
            ("X_cann", "X_cann", "X_hw", f"hw:{sp.task_type}", "flow:async_npu", "flow:HostToDevice")
        )

    def _kernel_row(self, sp: KernelSpec, start: int, dur: int, task_id: int) -> None:
        dur_text = ev.us_float(dur)
        if self.write_kernels:
            static = self._static.get(sp.key)
            if static is None:
                static = self._static[sp.key] = kernel_static(sp)
            head = (
                f"{self.step.number},4294967295,{task_id},{sp.stream},{sp.name},{sp.op_type},dynamic,{sp.core},"
                f"{ev.ts(start)}\t,{dur_text},"
            )
            self.step.rows.append((start, dur, head, f",{static},{pmu_text(sp, dur, self.pmu_rng)}\r\n"))
        self._count_row(sp.core, dur_text)
        if sp.core == "AI_CPU":
            self.names[sp.name] += 1
        stats = self.op_stats.get((sp.op_type, sp.core))
        if stats is None:
            self.op_stats[(sp.op_type, sp.core)] = [1, dur, dur, dur]
        else:
            stats[0] += 1
            stats[1] += dur
            stats[2] = min(stats[2], dur)
            stats[3] = max(stats[3], dur)

    def _count_row(self, core: str, dur_text: str) -> None:
        self.step.n_rows += 1
        self.kd.update(
            {"rows": 1, f"core:{core}": 1, "dur_ns": round(float(dur_text) * 1000)}
        )  # as a reader rounds

    def memcpy(self, sp: MemcpySpec) -> None:
        r = self.rng
        args = self._cpu_args(sp.key, sp.input_dims, sp.input_types, sp.stack)
        inner_s, acl_s, acl_e, _, _ = self._host_op("aten::copy_", sp.api, args)
        dur = max(800, int(sp.dur_us * 1000 * r.lognormvariate(0.0, 0.1)))
        start, end = self._device(S_COMPUTE, acl_s + us(r.uniform(3, 6)) + r.randrange(10), dur)
        task_id, conn = self._task_id(S_COMPUTE), self._conn()
        self.step.other.append((start, end, "memcpy"))
        self.sums["memcpy"] += dur
        self.kd["memcpy"] += 1
        self.kd["memcpy:h2d" if sp.direction == "host to device" else "memcpy:d2h"] += 1
        self.kd["memcpy_bytes"] += sp.nbytes
        o = self.out
        if o is not None:
            q, cann, hw = self.qtid, self.cann_pid, self.hw_pid
            extra = f', "data size(Byte)": {sp.nbytes}, "memcpy direction": "{sp.direction}"'
            api = "aclrtMemcpyAsync"
            o.append(
                ev.cann_x(f"AscendCL@{api}", cann, q, acl_s, acl_e - acl_s, "ACL_RTS", "acl", api, "0", conn)
            )
            o.append(ev.h2d_start(conn, cann, q, acl_s))
            o.append(
                ev.hw_x(
                    "MEMCPY_ASYNC",
                    hw,
                    S_COMPUTE,
                    start,
                    self._hw_dur(dur),
                    "PCIE_DMA_SQE",
                    task_id,
                    ev.UINT32_MAX,
                    conn,
                    extra,
                )
            )
            o.append(ev.h2d_finish(conn, hw, S_COMPUTE, start))
            o.append(ev.torch_flow("s", start, self.pid, self.pid, inner_s))
            o.append(ev.torch_flow("f", start, hw, S_COMPUTE, start))
        self.n.update(("X_cann", "X_hw", "hw:PCIE_DMA_SQE", "flow:async_npu", "flow:HostToDevice"))

    def comm_launch(self, sp: CommSpec) -> int:
        """Host side of a collective; returns when this rank's comm stream could start it."""
        r = self.rng
        args = self._cpu_args(sp.key, sp.input_dims, "c10::BFloat16", sp.stack)
        inner_s, acl_s, acl_e, _, _ = self._host_op(sp.aten, sp.api, args, acl_extra=us(r.uniform(10, 20)))
        ready = max(
            acl_s + us(r.uniform(6, 12)) + r.randrange(10),
            self.last_end[S_COMPUTE] + us(r.uniform(0.8, 1.6)),
            self.sfree[S_COMM],
        )
        ready = self._unique(ready)
        self._pending = (inner_s, acl_s, acl_e, ready)
        return ready

    def comm_finish(self, sp: CommSpec, all_arrived: int, xfer: int) -> None:
        """Device side once every rank's start is known: a rank waits for the last one (Notify_Wait)."""
        from sample_traces._comm import emit_collective

        inner_s, acl_s, acl_e, start = self._pending
        end = all_arrived + xfer + self.rng.randrange(600)
        conn, task_id = self._conn(), self._task_id(S_COMM)
        name = f"{sp.op_type}_{self.group_tag}_{self.hcom_index}_1"
        self.hcom_index += 1
        self.sfree[S_COMM] = end + 700
        self.last_end[S_COMM] = end
        self.sfree[S_COMPUTE] = max(self.sfree[S_COMPUTE], end + us(self.rng.uniform(0.8, 1.6)))
        self._placed(start, end)
        self.step.comm.append((start, end))
        self.sums["communication"] += end - start
        if self.write_kernels:
            head = (
                f"{self.step.number},4294967295,N/A,N/A,{name},{sp.op_type},N/A,HCCL,{ev.ts(start)}\t,"
                f"{ev.us_float(end - start)},"
            )
            self.step.rows.append((start, end - start, head, COMM_TAIL))
        self._count_row("HCCL", ev.us_float(end - start))
        if self.out is not None:
            emit_collective(self, sp, name, start, end, all_arrived, conn, task_id, inner_s, acl_s, acl_e)
        self.n.update({"X_cann": 1, "X_hccl": 4, "X_hw": 3, "flow:async_npu": 1, "flow:HostToDevice": 1})

    def event_pair(self, src: int, dst: int) -> None:
        """EVENT_RECORD on ``src`` then EVENT_WAIT on ``dst``: ``dst`` resumes once ``src`` got there."""
        r = self.rng
        recorded = 0
        for stream, api, queue_name, task_type in (
            (src, "aclrtRecordEvent", "record_event", "EVENT_RECORD_SQE"),
            (dst, "aclrtStreamWaitEvent", "wait_event", "EVENT_WAIT_SQE"),
        ):
            t0 = self.t
            enq_d = us(r.uniform(2.5, 5))
            self.t = t0 + enq_d + us(r.uniform(3, 6))
            dq_s = max(t0 + us(r.uniform(6, 14)), self.qfree)
            acl_s = dq_s + us(r.uniform(1.5, 3))
            acl_d = us(r.uniform(2, 6))
            dq_e = acl_s + acl_d + us(r.uniform(1, 3))
            self.qfree = dq_e + us(r.uniform(0.8, 2))
            start, end = self._device(stream, acl_s + us(r.uniform(2, 4)) + r.randrange(10), 20)
            if task_type == "EVENT_RECORD_SQE":
                recorded = end
            else:
                self.sfree[stream] = max(self.sfree[stream], recorded + 700 + r.randrange(300))
            corr, conn, task_id = self.corr, self._conn(), self._task_id(stream)
            self.corr += 1
            self.step.other.append((start, end, "other"))
            self.sums["other"] += end - start
            o = self.out
            if o is not None:
                pid, q, cann, hw, qa = (
                    self.pid,
                    self.qtid,
                    self.cann_pid,
                    self.hw_pid,
                    _QUEUE_ARGS.format(corr),
                )
                name = task_type.removesuffix("_SQE")
                o.append(ev.py_x("Enqueue", pid, pid, t0, enq_d, "enqueue", qa))
                o.append(ev.py_x(f"Dequeue@{queue_name}", pid, q, dq_s, dq_e - dq_s, "dequeue", qa))
                o.append(
                    ev.cann_x(f"AscendCL@{api}", cann, q, acl_s, acl_d, "ACL_RTS", "acl", api, "0", conn)
                )
                o.append(ev.h2d_start(conn, cann, q, acl_s))
                o.append(ev.hw_x(name, hw, stream, start, "0.02", task_type, task_id, ev.UINT32_MAX, conn))
                o.append(ev.h2d_finish(conn, hw, stream, start))
            self.n.update(("X_py", "X_py", "X_cann", "X_hw", f"hw:{task_type}", "flow:HostToDevice"))

    def synchronize(self) -> None:
        """``aclrtSynchronizeStream`` on the main thread: returns once the compute stream drained."""
        r = self.rng
        t0 = self.t
        drained = self.last_end[S_COMPUTE]
        end = max(t0 + us(r.uniform(3, 6)), (drained + 9) // 10 * 10 + us(r.uniform(4, 9)))
        conn = self._conn()
        if self.out is not None:
            api = "aclrtSynchronizeStreamWithTimeout"
            self.out.append(
                ev.cann_x(
                    f"AscendCL@{api}", self.cann_pid, self.pid, t0, end - t0, "ACL_RTS", "acl", api, "0", conn
                )
            )
        self.n["X_cann"] += 1
        self.t = end + us(r.uniform(2, 5))

    def stall(self, layer: int, host_us: float) -> None:
        """Host-side work with nothing queued: the device idles from its last task to the next launch."""
        st = self.step
        st.gap_from = st.last_end
        st.stall = {"layer": layer, "host_stall_ns": us(host_us)}
        self.t += us(host_us)
