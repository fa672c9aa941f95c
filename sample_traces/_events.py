"""torch_npu trace_view.json event text, formatted by hand (key order, spacing and value types as exported).

The exporter writes ``json.dumps`` of a list: ``", "`` between events and ``": "`` inside them; ``ts`` is a
string of epoch µs with 3 decimals, ``dur`` a float µs.  Framework (``Python``) events and torch flows put
``ph`` first; CANN/device events put it last: both orders are copied from the real samples.
"""

from __future__ import annotations

import json

MODEL_ID = 4294967295
UINT32_MAX = 4294967295
INNER_ARGS = '{"Sequence number": -1, "Fwd thread id": 0}'


def ts(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def us_float(ns: int) -> str:
    return repr(ns / 1000)


def device_pid(host_pid: int, sort_index: int, device_id: int) -> int:
    """torch_npu's bit-packed pid for device-side processes."""
    return (host_pid << 10) | (sort_index << 5) | device_id


def jstr(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def cpu_op_args(input_dims: str | None, input_types: str | None, stack: str | None) -> str:
    parts = ['"Sequence number": -1', '"Fwd thread id": 0']
    if input_dims is not None:
        parts.append(f'"Input Dims": {jstr(input_dims)}')
    if input_types is not None:
        parts.append(f'"Input type": {jstr(input_types)}')
    if stack is not None:
        parts.append(f'"Call stack": {jstr(stack)}')
    return "{" + ", ".join(parts) + "}"


def py_x(name: str, pid: int, tid: int, start: int, dur: int, cat: str, args: str) -> str:
    return (
        f'{{"ph": "X", "name": "{name}", "pid": {pid}, "tid": {tid}, "ts": "{ts(start)}", '
        f'"dur": {dur / 1000!r}, "cat": "{cat}", "args": {args}}}'
    )


def cann_x(
    name: str,
    pid: int,
    tid: int,
    start: int,
    dur: int,
    mode: str,
    level: str,
    api_id: str,
    item_id: str,
    conn: int,
) -> str:
    return (
        f'{{"name": "{name}", "pid": {pid}, "tid": {tid}, "ts": "{ts(start)}", "dur": {dur / 1000!r}, '
        f'"args": {{"Thread Id": {tid}, "Mode": "{mode}", "level": "{level}", "id": "{api_id}", '
        f'"item_id": "{item_id}", "connection_id": {conn}}}, "ph": "X"}}'
    )


def hw_x(
    name: str,
    pid: int,
    stream: int,
    start: int,
    dur_text: str,
    task_type: str,
    task_id: int,
    subtask: int,
    conn: int,
    extra: str = "",
) -> str:
    return (
        f'{{"name": "{name}", "pid": {pid}, "tid": {stream}, "ts": "{ts(start)}", "dur": {dur_text}, '
        f'"args": {{"Model Id": {MODEL_ID}, "Task Type": "{task_type}", "Physic Stream Id": {stream}, '
        f'"Task Id": {task_id}, "Batch Id": 0, "Subtask Id": {subtask}, "connection_id": {conn}{extra}}}, "ph": "X"}}'
    )


def plain_x(name: str, pid: int, tid: int, start: int, dur_text: str, args: str | None = None) -> str:
    if args is None:
        return f'{{"name": "{name}", "pid": {pid}, "tid": {tid}, "ts": "{ts(start)}", "dur": {dur_text}, "ph": "X"}}'
    return (
        f'{{"name": "{name}", "pid": {pid}, "tid": {tid}, "ts": "{ts(start)}", "dur": {dur_text}, '
        f'"args": {args}, "ph": "X"}}'
    )


def torch_flow(phase: str, flow_id: int, pid: int, tid: int, at: int) -> str:
    return (
        f'{{"ph": "{phase}", "bp": "e", "name": "torch_to_npu", "id": {flow_id}, "pid": {pid}, '
        f'"tid": {tid}, "ts": "{ts(at)}", "cat": "async_npu"}}'
    )


def h2d_start(conn: int, pid: int, tid: int, at: int) -> str:
    return (
        f'{{"name": "HostToDevice{conn}", "ph": "s", "cat": "HostToDevice", "id": "{conn}", '
        f'"pid": {pid}, "tid": {tid}, "ts": "{ts(at)}"}}'
    )


def h2d_finish(conn: int, pid: int, tid: int, at: int) -> str:
    return (
        f'{{"name": "HostToDevice{conn}", "ph": "f", "id": "{conn}", "ts": "{ts(at)}", '
        f'"cat": "HostToDevice", "pid": {pid}, "tid": {tid}, "bp": "e"}}'
    )


def python_meta(pid: int, threads: list[int]) -> list[str]:
    out = [
        f'{{"ph": "M", "name": "process_name", "pid": {pid}, "tid": 0, "args": {{"name": "Python"}}}}',
        f'{{"ph": "M", "name": "process_labels", "pid": {pid}, "tid": 0, "args": {{"labels": "CPU"}}}}',
        f'{{"ph": "M", "name": "process_sort_index", "pid": {pid}, "tid": 0, "args": {{"sort_index": 0}}}}',
    ]
    for tid in threads:
        out.append(
            f'{{"ph": "M", "name": "thread_name", "pid": {pid}, "tid": {tid}, "args": {{"name": "Thread {tid}"}}}}'
        )
        out.append(
            f'{{"ph": "M", "name": "thread_sort_index", "pid": {pid}, "tid": {tid}, "args": {{"sort_index": {tid}}}}}'
        )
    return out


def device_meta(
    pid: int,
    process: str,
    label: str,
    sort_index: int,
    threads: list[tuple[int, str]],
    thread_sort: bool = True,
) -> list[str]:
    out = [f'{{"name": "process_name", "pid": {pid}, "tid": 0, "args": {{"name": "{process}"}}, "ph": "M"}}']
    for tid, name in threads:
        out.append(
            f'{{"name": "thread_name", "pid": {pid}, "tid": {tid}, "args": {{"name": "{name}"}}, "ph": "M"}}'
        )
    if thread_sort:
        out.extend(
            f'{{"name": "thread_sort_index", "pid": {pid}, "tid": {tid}, "args": {{"sort_index": {tid}}}, "ph": "M"}}'
            for tid, _ in threads
        )
    out.append(
        f'{{"name": "process_labels", "pid": {pid}, "tid": 0, "args": {{"labels": "{label}"}}, "ph": "M"}}'
    )
    out.append(
        f'{{"name": "process_sort_index", "pid": {pid}, "tid": 0, "args": {{"sort_index": {sort_index}}}, "ph": "M"}}'
    )
    return out
