"""The trace events of one HCCL collective on one rank: the op on ``Group … Communication``, its small tasks
on ``Plane 0`` (Notify_Wait, Reduce_Inline/Memcpy, Notify_Record) and their mirrors on the Ascend Hardware
communication stream (``Write Value``, ``Notify Wait``, ``SDMA``), as torch_npu exports them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sample_traces import _events as ev
from sample_traces._catalog import CommSpec

if TYPE_CHECKING:
    from sample_traces._rank import Rank

GROUP_TID, PLANE_TID = 0, 1
_PLANE_ARGS = (
    '{{"notify_id": "{nid}", "duration estimated(us)": {est}, "stream id": 4, "task id": {task}, '
    '"context id": {ctx}, "task type": "{kind}", "src rank": {src}, "dst rank": {dst}, "transport type": "SDMA", '
    '"size(Byte)": {size}, "data type": "{dtype}", "link type": "{link}", "bandwidth(GB/s)": {bw}, '
    '"model id": 4294967295}}'
)


def subtasks(start: int, end: int, all_arrived: int) -> list[tuple[int, int]]:
    """Wait for the peer's notify, move the data, notify the peer: 3 intervals that tile [start, end]."""
    wait_end = max(start + 300, all_arrived + 900)
    data_end = end - 800
    return [(start, wait_end), (wait_end + 200, data_end), (data_end + 200, end)]


def emit_collective(
    rank: Rank,
    sp: CommSpec,
    name: str,
    start: int,
    end: int,
    all_arrived: int,
    conn: int,
    task_id: int,
    inner_s: int,
    acl_s: int,
    acl_e: int,
) -> None:
    o = rank.out
    assert o is not None
    cann, hccl, hw, q = rank.cann_pid, rank.hccl_pid, rank.hw_pid, rank.qtid
    peer = (rank.rank + 1) % rank.world
    o.append(
        ev.cann_x(
            f"AscendCL@{sp.op_type}", cann, q, acl_s, acl_e - acl_s, "ACL_RTS", "acl", sp.op_type, "0", conn
        )
    )
    o.append(ev.h2d_start(conn, cann, q, acl_s))
    group_args = (
        f'{{"connection_id": {conn}, "model id": 4294967295, "data_type": "BFP16", "alg_type": "MESH-RING", '
        f'"count": {sp.count}}}'
    )
    o.append(ev.plain_x(name, hccl, GROUP_TID, start, rank._hw_dur(end - start), group_args))
    o.append(ev.h2d_finish(conn, hccl, GROUP_TID, start))
    o.append(ev.torch_flow("s", start, rank.pid, rank.pid, inner_s))
    o.append(ev.torch_flow("f", start, hccl, GROUP_TID, start))
    data_kind = "Reduce_Inline" if sp.op_type == "hcom_allReduce_" else "Memcpy"
    size = sp.nbytes // rank.world
    kinds = (
        ("Notify_Wait", "Notify Wait", "92", 0.02, 0, "INVALID_TYPE", "INVALID_TYPE"),
        (data_kind, "SDMA", "18446744073709551615", round(size / 20000, 3), size, "BFP16", "HCCS"),
        ("Notify_Record", "Write Value", "4294967364", 1, 0, "INVALID_TYPE", "INVALID_TYPE"),
    )
    for ctx, ((s, e), (kind, hw_name, nid, est, nbytes, dtype, link)) in enumerate(
        zip(subtasks(start, end, all_arrived), kinds, strict=True)
    ):
        dur = e - s
        bw = round(nbytes / dur, 6) if nbytes else 0.0  # bytes/ns = GB/s
        args = _PLANE_ARGS.format(
            nid=nid,
            est=est,
            task=task_id,
            ctx=ctx,
            kind=kind,
            src=rank.rank,
            dst=peer,
            size=nbytes,
            dtype=dtype,
            link=link,
            bw=bw,
        )
        text = rank._hw_dur(dur)
        o.append(ev.plain_x(kind, hccl, PLANE_TID, s, text, args))
        o.append(ev.hw_x(hw_name, hw, 4, s, text, hw_name, task_id, ctx, conn))
