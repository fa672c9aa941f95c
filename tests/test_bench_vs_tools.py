"""bench/bench_vs_tools.py's table logic, with the tools stubbed: no tool is installed, nothing is timed."""

from __future__ import annotations

from pathlib import Path

from bench import bench_vs_tools as vs

MB = 1_000_000


def _fake_measure(timings: dict[str, tuple[float, int]], seen: list[str]):
    """A measure() whose command ``['fake', NAME]`` takes the wall time and RSS ``timings[NAME]``."""

    def measure(cmd: list[str]) -> dict:
        seen.append(cmd[1])
        wall, rss = timings[cmd[1]]
        return {"wall_s": wall, "peak_rss": rss, "rc": 0, "stdout": "", "stderr": ""}

    return measure


def test_ratios_rss_and_verdicts_from_known_timings(tmp_path: Path) -> None:
    stale = tmp_path / "diag.duckdb"
    stale.write_text("old")
    advisor = vs.Row(
        "advisor_big",
        "Ascend folder 1,000 MB",
        [["fake", "ingest"], ["fake", "findings"]],
        [["fake", "advisor"]],
        "msprof-analyze advisor all",
        30.0,
        0.1,
        "tool",
        1000 * MB,
        cleanup=[stale],
    )
    ctas = vs.Row(
        "csv",
        "kernel_details.csv",
        [["fake", "csv"]],
        [["fake", "ctas"]],
        "DuckDB CTAS",
        1.0,
        1.0,
        "file",
        360 * MB,
    )
    timings = {
        "ingest": (6.0, 300 * MB),
        "findings": (1.0, 200 * MB),
        "advisor": (245.0, 4000 * MB),
        "csv": (4.0, 330 * MB),
        "ctas": (3.0, 250 * MB),
    }
    seen: list[str] = []
    results = [vs.run_pair(r, 3, _fake_measure(timings, seen)) for r in (advisor, ctas)]
    # alternating: diag's commands, then the tool's, three times
    assert seen[:6] == ["ingest", "findings", "advisor", "ingest", "findings", "advisor"]
    assert not stale.exists()
    big, csv = results
    assert (big["diag"]["wall_s"], big["tool"]["wall_s"], big["ratio"], big["rss_ratio"]) == (
        7.0,
        245.0,
        35.0,
        0.075,
    )
    assert big["met"] is True
    assert (csv["ratio"], csv["rss_ratio"], csv["met"]) == (0.75, 0.917, False)
    lines = vs.table_lines(results)
    assert lines[2] == (
        "| Ascend folder 1,000 MB | 7.00 s | msprof-analyze advisor all: 245.00 s | 35.00× | ≥ 30× | "
        "300 MB (0.07× the tool's) | 4,000 MB | ≤ 0.1× the tool's | yes |"
    )
    assert lines[3] == (
        "| kernel_details.csv | 4.00 s | DuckDB CTAS: 3.00 s | 0.75× | ≥ 1× | 330 MB (0.92× the file) | 250 MB | "
        "≤ 1× the file | no |"
    )


def test_a_missing_tool_is_a_dash_with_the_reason() -> None:
    row = vs.Row(
        "kineto",
        "Kineto 250 MB",
        [["fake", "ingest"]],
        None,
        "HTA",
        10.0,
        1.0,
        "file",
        250 * MB,
        missing="hta does not import",
    )
    result = vs.run_pair(row, 2, _fake_measure({"ingest": (2.0, 100 * MB)}, []))
    assert (result["ratio"], result["met"]) == (None, None)
    assert vs.table_lines([result])[2] == (
        "| Kineto 250 MB | 2.00 s | HTA: — (hta does not import) | — | ≥ 10× | 100 MB (0.40× the file) | — | "
        "≤ 1× the file | — |"
    )


def test_the_tools_venv_is_keyed_by_the_pins_and_reused(tmp_path: Path) -> None:
    pins = ("example==1.0",)
    import hashlib

    tag = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]
    venv = tmp_path / f"tools-{tag}"
    (venv / "bin").mkdir(parents=True)
    (venv / ".complete").write_text("example==1.0\n")
    python, why = vs.tools_python(pins, where=tmp_path)  # already built: no venv, no pip
    assert (python, why) == (venv / "bin" / "python", "")
