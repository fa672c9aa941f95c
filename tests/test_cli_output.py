"""What the CLI prints for a person: no crash on a missing figure, '—' for it, one failing run as a one-line note,
cells that hold Rich markup printed as text, '-o FILE' said, paths as the shortest tail that tells them apart."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from diag.cli import main
from diag.commands._format import fmt_bytes, path_tails
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, ingest_into, query

CUDA_TRACE = SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"
TP2 = SAMPLES / "generated" / "llm_decode_tp2"
NO_COMM_EXPORT = SAMPLES / "real" / "mstt_timeline_advice"  # a real export whose steps hold no Communication
# real-shaped log lines: a CANN plog line naming its C++ source in brackets, a Python one naming its file
PLOG = (
    "[ERROR] RUNTIME(4321,python3):2025-06-25-10:45:00.100.200 "
    "[/usr/local/Ascend/ascend-toolkit/latest/runtime/stream.cc:1021] 4321 Stream Synchronize failed, "
    "ErrCode=507035"
)
PYLOG = (
    "[ERROR] [/home/x.py:12] RuntimeError: NPU function error: aclrtSynchronizeStream, error code is 507035"
)


def _ingest(db: Path, *paths: Path) -> None:
    with Store(db) as store:
        ingest_into(store, paths)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[list[str]]:
    """The body rows of the Rich tables in ``out``, each as its stripped cells (one line per row)."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]


def _run_id(db: Path, source_like: str) -> int:
    return query(db, "SELECT run_id FROM runs WHERE source LIKE ?", [f"%{source_like}"])[0][0]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled samples, a log with bracketed paths and two serving results (Ascend, CUDA)."""
    root = tmp_path_factory.mktemp("sample")
    logs = root / "logs"
    logs.mkdir()
    (logs / "plog-4321_20250625104000000.log").write_text(f"{PLOG}\n{PYLOG}\n", encoding="utf-8")
    db = root / "sample.duckdb"
    serving = FIXTURES / "serving"
    _ingest(db, SAMPLES, logs, serving / "ok_vllm_sweep_ascend_910b3.txt", serving / "ok_sglang_h100.txt")
    return db


def test_breakdown_shows_a_dash_for_a_figure_the_export_lacks_and_lists_every_run(tmp_path, capsys):
    # before: TypeError NoneType.__format__ on the run whose export has no Communication, and no later run listed
    db = tmp_path / "db.duckdb"
    _ingest(db, NO_COMM_EXPORT, CUDA_TRACE)
    no_comm, cuda = _run_id(db, "mstt_timeline_advice"), _run_id(db, CUDA_TRACE.name)
    code, out, err = _run(capsys, "breakdown", "--db", str(db))
    assert code == 0, err
    lines = out.splitlines()
    assert "  step 1 Communication: ours 0 ns, export —" in lines
    assert "  step 1 Communication(Not Overlapped): ours 0 ns, export —" in lines
    assert "  step 1 Computing: ours 1.8 ms, export 1.8 ms (+0.122%)" in lines
    assert f"run {no_comm}: 276 device kernels · 79 operator types · 276.0 kernels per step" in lines
    assert f"run {cuda}: 204 device kernels · 8 operator types · 51.0 kernels per step" in lines
    # the same lines in Chinese: the command's own words and the bucket headers follow --lang
    code, out, err = _run(capsys, "--lang", "zh", "breakdown", "--db", str(db))
    assert code == 0, err
    lines = out.splitlines()
    assert f"运行 {cuda}：204 个设备 kernel · 8 种算子类型 · 每迭代 51.0 个 kernel" in lines
    assert "  迭代 1 Computing：diag 1.8 ms，导出文件 1.8 ms (+0.122%)" in lines
    assert "AI CPU（回退）" in out and "AI CPU (fallback)" not in out and "device kernels" not in out


def test_one_failing_run_is_a_note_and_the_other_runs_are_listed(tmp_path, capsys, monkeypatch):
    import diag.commands.findings as command

    db = tmp_path / "db.duckdb"
    _ingest(db, NO_COMM_EXPORT, CUDA_TRACE)
    bad, good = _run_id(db, "mstt_timeline_advice"), _run_id(db, CUDA_TRACE.name)
    real = command.breakdown

    def breakdown(store, run_id):  # noqa: ANN001, ANN202
        if run_id == bad:
            raise ValueError("step_trace row without a step\nsecond line")
        return real(store, run_id)

    monkeypatch.setattr(command, "breakdown", breakdown)
    code, out, err = _run(capsys, "breakdown", "--db", str(db))
    assert code == 0, err
    assert (
        f"run {bad}: no breakdown (ValueError: step_trace row without a step second line)" in out.splitlines()
    )
    assert f"run {good}: 204 device kernels · 8 operator types · 51.0 kernels per step" in out.splitlines()
    code, out, _ = _run(capsys, "breakdown", "--db", str(db), "--json")
    import json

    payload = json.loads(out)
    assert [r["run_id"] for r in payload["runs"]] == [good]
    assert payload["failed_runs"] == [
        {"run_id": bad, "error": "ValueError: step_trace row without a step second line"}
    ]


def test_sql_prints_cells_that_hold_rich_markup_as_text(sample_db, capsys):
    # before: rich.errors.MarkupError (closing tag '[/usr/local/Ascend/…]' doesn't match any open tag)
    code, out, err = _run(
        capsys,
        "sql",
        "--db",
        str(sample_db),
        "SELECT line_no, raw FROM log_records WHERE raw LIKE '%[/%' ORDER BY 1",
    )
    assert code == 0, err
    assert _rows(out) == [["1", PLOG], ["2", PYLOG]]
    code, out, _ = _run(
        capsys, "sql", "--db", str(sample_db), "SELECT NULL AS \"[/x]\", '[bold]b[/bold]' AS s"
    )
    assert _rows(out) == [["—", "[bold]b[/bold]"]]
    assert "┃ [/x] ┃" in out


def test_logs_print_bracketed_paths_and_name_the_file_by_its_tail(sample_db, capsys):
    code, out, err = _run(capsys, "logs", "--db", str(sample_db))
    assert code == 0, err
    files = {row[1] for row in _rows(out) if len(row) == 7 and row[1]}
    # each log file of the store (this one and the samples' incident plog) reads as its name, not as a cut
    # absolute path: the names differ, so the name alone tells them apart
    assert {"plog-4321_20250625104000000.log:1", "plog-4321_20250625104000000.log:2"} <= files
    assert all("/" not in f and f.startswith("plog-") for f in files), files
    assert "│ [/home/x.py:12] RuntimeError: NPU function" in out  # the bracketed path printed as text


def test_report_output_says_what_it_wrote(sample_db, tmp_path, capsys):
    run = _run_id(sample_db, "msinsight_level2_rank0_ascend_pt")
    target = tmp_path / "report.html"
    code, out, err = _run(
        capsys, "report", "--db", str(sample_db), "--run", str(run), "--format", "html", "-o", str(target)
    )
    assert code == 0, err
    size = fmt_bytes(target.stat().st_size)
    assert out == "" and err.splitlines() == [f"wrote {target} ({size}, HTML, 5 of 5 sections)"]
    code, out, err = _run(capsys, "report", "--db", str(sample_db), "-o", str(tmp_path / "no" / "r.md"))
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"diag: error: {tmp_path / 'no' / 'r.md'}: cannot write the report (No such file or directory)"
    ]


def test_runs_show_the_shortest_tail_that_tells_sources_apart(tmp_path, capsys):
    # three runs under one long folder; before, `diag runs` cut `source` at the end so the three read the same
    base = tmp_path / "cluster" / "team" / "2025-01-15" / "llama3-70b-decode-investigation"
    for exp, rank in (("exp1", "rank0"), ("exp2", "rank1")):
        (src,) = TP2.glob(f"{rank}_*_ascend_pt")
        shutil.copytree(src, base / exp / "node_ascend_pt")
    (base / "exp3").mkdir()
    shutil.copy(CUDA_TRACE, base / "exp3" / CUDA_TRACE.name)
    db = tmp_path / "db.duckdb"
    _ingest(db, base / "exp1" / "node_ascend_pt", base / "exp2" / "node_ascend_pt", base / "exp3")
    code, out, err = _run(capsys, "runs", "--db", str(db))
    assert code == 0, err
    assert sorted(row[-1] for row in _rows(out)) == [
        "exp1/node_ascend_pt",
        "exp2/node_ascend_pt",
        "h100_decode_tp1.pt.trace.json",
    ]
    code, out, _ = _run(capsys, "runs", "--db", str(db), "--json")
    import json

    assert sorted(r["source"] for r in json.loads(out)["runs"]) == sorted(
        str(p)
        for p in (
            base / "exp1" / "node_ascend_pt",
            base / "exp2" / "node_ascend_pt",
            base / "exp3" / CUDA_TRACE.name,
        )
    )


def test_path_tails_are_the_shortest_unique_suffix():
    assert path_tails(["/d/a/rank0/trace.json", "/d/b/rank0/trace.json", "/d/b/plog.log", None]) == {
        "/d/a/rank0/trace.json": "a/rank0/trace.json",
        "/d/b/rank0/trace.json": "b/rank0/trace.json",
        "/d/b/plog.log": "plog.log",
    }
    # a path that is the tail of another keeps all of itself; one that needs all its components reads as given
    assert path_tails(["b/c", "/x/b/c"]) == {"b/c": "b/c", "/x/b/c": "/x/b/c"}
    assert path_tails(["b/c", "/y/x/b/c"]) == {"b/c": "b/c", "/y/x/b/c": "x/b/c"}
    assert path_tails(["/only/one.log"]) == {"/only/one.log": "one.log"}


def test_no_command_prints_none_or_crashes_on_the_sample_database(sample_db, capsys):
    db = str(sample_db)
    ascend, cuda = (
        _run_id(sample_db, "rank0_1716292_20250115093320983_ascend_pt"),
        _run_id(sample_db, CUDA_TRACE.name),
    )
    serving = [str(r[0]) for r in query(sample_db, "SELECT serving_id FROM serving_runs ORDER BY 1")]
    commands = [
        ["runs"],
        ["findings"],
        ["logs"],
        ["breakdown"],
        ["compare", str(ascend), str(cuda)],
        ["cluster"],
        ["accept", "--compare", *serving[:2]],
        ["report"],
        ["report", "--run", str(ascend), "--baseline", str(cuda)],
        ["sql", "SELECT * FROM runs"],
    ]
    for argv in commands:
        code, out, err = _run(capsys, *argv, "--db", db)
        assert code == 0, (argv, err)
        assert out.strip(), argv
        assert not re.search(r"\bNone\b", out), (argv, [line for line in out.splitlines() if "None" in line])
        assert "Traceback" not in err, argv


def test_findings_name_each_run_by_its_source_tail_and_give_logs_no_device_share(sample_db, capsys):
    code, out, err = _run(capsys, "findings", "--db", str(sample_db))
    assert code == 0, err
    level2 = _run_id(sample_db, "msinsight_level2_rank0_ascend_pt")
    titles = [line.strip() for line in out.splitlines()]
    assert f"run {level2} · msinsight_level2_rank0_ascend_pt" in titles
    logs = "\n".join(out.splitlines()[titles.index("logs") :])
    first = _rows(logs)[0]
    # a log finding measures no device time: '—', not a 0.0% that reads as "no impact"
    assert first[:3] == ["high", "—", "log:device_exception"]


def test_ingest_summary_names_the_runs_in_words(tmp_path, capsys):
    code, out, err = _run(capsys, "ingest", str(TP2), "--db", str(tmp_path / "db.duckdb"))
    assert code == 0, err
    summary = next(line for line in out.splitlines() if " files: " in line)
    # before: "runs [1, 2]" (a Python list) and "6176 rows"
    assert re.fullmatch(
        r"\d+ files: \d+ ok, 0 partial, 0 failed, 0 unchanged, \d+ skipped · runs 1, 2 · \d{1,3}(,\d{3})+ rows "
        r"stored · [\d.]+ MB read",
        summary,
    ), summary


def test_command_messages_follow_the_language(tmp_path, capsys, monkeypatch):
    """The commands' own one-line messages (no data, pick a run) in Chinese under --lang zh, English otherwise."""
    monkeypatch.setenv("COLUMNS", "250")
    empty = tmp_path / "empty.duckdb"
    _ingest(empty)
    code, out, _ = _run(capsys, "--lang", "zh", "moe", "--db", str(empty))
    assert code == 0 and out.startswith("此数据库中没有 MoE 专家负载数据：diag 读取专家热点文件"), out
    code, out, _ = _run(capsys, "--lang", "zh", "accept", "--db", str(empty))
    assert "数据库中没有服务化运行" in out, out
    two = tmp_path / "two.duckdb"
    _ingest(two, NO_COMM_EXPORT, CUDA_TRACE)
    code, _, err = _run(capsys, "--lang", "zh", "env", "--db", str(two))
    assert code == 1 and "数据库中有多个运行：请用 --run ID 或 --job ID 选择一个" in err, err
    code, _, err = _run(capsys, "--lang", "zh", "ops", "--db", str(two))
    assert code == 2 and "2 个运行含 kernel：请用 --run 指定（1, 2 之一）" in err, err
    code, _, err = _run(capsys, "ops", "--db", str(two))
    assert code == 2 and "2 runs with kernels: pass --run (one of 1, 2)" in err, err


def test_memory_answer_follows_the_language(sample_db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    code, out, err = _run(capsys, "--lang", "zh", "memory", "--db", str(sample_db))
    assert code == 0, err
    assert re.search(r"^内存峰值（reserved）\d", out, re.M) and "分配抖动：每迭代" in out, out
    assert not re.search(r"Peak reserved|Allocation churn|Held outside", out), out
    code, out, _ = _run(capsys, "memory", "--db", str(sample_db))
    assert re.search(r"^Peak reserved \d", out, re.M) and "Allocation churn: " in out, out


def test_every_command_s_own_sentences_are_chinese_under_lang_zh(sample_db, capsys, monkeypatch):
    """Each command's text output on the samples holds no English sentence of diag's own under --lang zh (data
    values — kernel names, raw log lines, paths — are the user's; commands that print those whole are left out)."""
    from tests.test_i18n import english_sentences

    monkeypatch.setenv("COLUMNS", "400")
    kernels = _run_id(sample_db, "msinsight_level2_rank0_ascend_pt")
    commands = [
        ["runs"], ["breakdown"], ["ops", "--run", str(kernels)], ["ops", "--run", str(kernels), "--util"],
        ["memory"], ["env", "--run", str(kernels)], ["moe"], ["scaling", "--run", str(kernels)], ["accept"],
        ["cluster"], ["compare", str(kernels), str(_run_id(sample_db, "h100_decode_tp1.pt.trace.json"))],
    ]  # fmt: skip
    found = {}
    for args in commands:
        code, out, err = _run(capsys, "--lang", "zh", *args, "--db", str(sample_db))
        assert code == 0, (args, err)
        cells = [c.strip() for line in (out + err).splitlines() for c in re.split(r"[│┃]", line) if c.strip()]
        if english := english_sentences(cells):
            found[" ".join(args)] = english
    assert found == {}
