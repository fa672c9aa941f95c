"""Cutting a JSON array of trace events into parts read in parallel: the parts hold exactly the elements, in
order; cuts never land inside a string or a nested value; an ingest through parts stores what a whole read does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import parsers._json_split as js
from diag.store import Store
from sample_traces.generate import generate
from tests.conftest import ingest_into

TABLES = {  # table: the columns whose hash sums must agree
    "device_tasks": "name, start_ns, dur_ns, stream, task_kind",
    "host_ops": "name, start_ns, dur_ns, tid, correlation",
    "overlap_slices": "kind, start_ns, dur_ns",
    "links": "flow_id, src_ts_ns, dst_ts_ns",
    "steps": "step, start_ns, end_ns",
}


def _events(n: int) -> list[dict]:
    out = []
    for i in range(n):
        ev = {"ph": "X", "name": f"op{i}", "pid": 1, "tid": i % 3, "ts": f"{1000 + i}.125", "dur": "2.5"}
        if i % 5 == 0:  # look-alikes of a cut: inside a string, and between objects nested in a value
            ev["args"] = {
                "Call stack": 'a}, {"ph": "X"} b' * 3,
                "nested": [{"k": 1}, {"k": 2}, {"ph_not": 3}],
            }
        out.append(ev)
    return out


def _write(path: Path, events: list[dict], sep: str = ", ") -> Path:
    path.write_text("[" + sep.join(json.dumps(e) for e in events) + "]")
    return path


@pytest.mark.parametrize("parts", [2, 3, 7])
@pytest.mark.parametrize("sep", [", ", ",\n  ", ","])
def test_parts_hold_every_element_once_in_order(tmp_path, monkeypatch, parts, sep):
    monkeypatch.setattr(js, "MIN_PART_BYTES", 1)
    events = _events(4000)
    src = _write(tmp_path / "trace_view.json", events, sep)
    out = js.split_array(src, parts, tmp_path)
    assert len(out) == parts and all(p != src for p in out)
    back = [e for p in out for e in json.loads(p.read_text())]
    assert back == events
    js.remove(out)
    assert not any(p.exists() for p in out)


def test_cut_is_never_inside_a_string_or_a_nested_value(tmp_path, monkeypatch):
    monkeypatch.setattr(js, "MIN_PART_BYTES", 1)
    events = _events(2000)
    src = _write(tmp_path / "t.json", events)
    data = src.read_bytes()
    for end, start in js.split_points(src, 9):
        assert data[end - 1 : end] == b"}" and data[start : start + 1] == b"{"
        # the element after the cut is a whole top-level event
        assert data[start:].startswith(b'{"ph": "X", "name": "op')


def test_small_or_uncuttable_files_are_read_whole(tmp_path, monkeypatch):
    small = _write(tmp_path / "small.json", _events(10))
    assert js.split_array(small, 4, tmp_path) == [small]
    monkeypatch.setattr(js, "MIN_PART_BYTES", 1)
    one = tmp_path / "one.json"
    one.write_text(json.dumps([{"ph": "X", "args": {"s": "x" * 100_000}}]))
    assert js.split_array(one, 4, tmp_path) == [one]  # a single element: nowhere to cut


def _ingest(db: Path, path: Path) -> dict[str, tuple]:
    with Store(db) as store:
        summary = ingest_into(store, [path])
        assert [f.status for f in summary.files] == ["ok"] * len(summary.files)
        return {
            t: store.con.execute(f"SELECT count(*), sum(hash({cols})) FROM {t}").fetchall()[0]
            for t, cols in TABLES.items()
        }


def test_ingest_through_parts_equals_a_whole_read(tmp_path, monkeypatch):
    truth = generate(tmp_path / "gen", ranks=1, steps=6, layers=4, files=("trace_view",))
    trace = tmp_path / "gen" / truth["ranks"]["0"]["run_dir"] / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    import parsers.ascend_trace_view as tv

    monkeypatch.setattr(tv, "split_array", lambda path, parts, tmp: [path])
    whole = _ingest(tmp_path / "whole.duckdb", trace)
    calls: list[int] = []

    def three_parts(path: Path, parts: int, tmp: Path) -> list[Path]:
        monkeypatch.setattr(js, "MIN_PART_BYTES", 1)
        out = js.split_array(path, 3, tmp)
        calls.append(len(out))
        return out

    monkeypatch.setattr(tv, "split_array", three_parts)
    split = _ingest(tmp_path / "split.duckdb", trace)
    assert calls == [3]
    assert split == whole
    assert whole["device_tasks"][0] == truth["ranks"]["0"]["trace"]["device_tasks"]


def test_objects_with_a_ph_key_nested_in_args_are_not_cut_points(tmp_path, monkeypatch):
    # #18: args holding arrays of objects with a "ph" key (a crafted, valid trace) were cut inside the event
    monkeypatch.setattr(js, "MIN_PART_BYTES", 1)
    events = _events(3000)
    for i, ev in enumerate(events):
        ev.setdefault("args", {})["calls"] = [{"ph": "X", "name": f"inner{i}.{k}"} for k in range(3)]
    src = _write(tmp_path / "nested_ph.json", events)
    data = src.read_bytes()
    cuts = js.split_points(src, 9)
    assert cuts
    for _end, start in cuts:
        assert data[start:].startswith(b'{"ph": "X", "name": "op')
    out = js.split_array(src, 9, tmp_path)
    assert [e for p in out for e in json.loads(p.read_text())] == events


def test_a_nested_run_of_events_is_told_from_the_top_level_one():
    assert js._is_event(b'{"ph": "X"}, {"ph": "B"}]}, {"ph": "X", "name": "next"}', "ph") is False
    assert js._is_event(b'{"ph": "X"}, "k": 1}', "ph") is False
    assert (
        js._is_event(b'{"ph": "X"}, {"ph": "B"}, {"ph": "E", "na', "ph") is True
    )  # the bytes read end mid-event
    assert (
        js._is_event(b'{"ph": "X"}, {"ph": "B"}]\n', "ph", at_eof=True) is True
    )  # the last events of the file
