"""What a `diag` process costs before it does anything: the modules it imports (issue #25)."""


def test_the_cli_starts_without_the_parsers_and_their_libraries():
    """Every `diag …` process pays its imports (3 processes for ingest + findings + breakdown, issue #25): a
    command that does not ingest must not load the parsers, Polars or PyArrow (~0.8 s on this machine)."""
    import subprocess
    import sys

    code = (
        "import sys, diag.cli; "
        "print(sorted(m for m in ('polars', 'pyarrow', 'parsers', 'diag.ingest', 'ray', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_findings_on_a_database_does_not_import_the_ingest_side(tmp_path):
    """``diag findings`` on a DuckDB file reads; the Ray engine's check must not pull in the parsers."""
    import subprocess
    import sys

    db = tmp_path / "empty.duckdb"
    code = (
        "import sys; from diag.cli import main; "
        f"main(['findings', '--db', {str(db)!r}, '--json']); "
        "print(sorted(m for m in ('polars', 'parsers', 'diag.ingest', 'diag.engine_ray') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout + run.stderr


def test_ingest_of_a_profiler_folder_without_logs_loads_no_polars_or_pyarrow(tmp_path):
    """The log parser's Polars side (Polars, NumPy, PyArrow: 0.25 CPU-s and 64 MB to import) loads when a log is
    read: a torch_npu folder of trace_view.json and CSVs is stored without it, and a log still is with it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    folder = next((Path(__file__).parent.parent / "sample_traces/generated/llm_decode_tp2").glob("rank0_*"))
    log = tmp_path / "plog-1_20250115093320983.log"
    log.write_text("[ERROR] RUNTIME(1234,python):2025-01-15-09:33:20.983.000 [x.cc:1]1234 boom EE1001\n")
    code = (
        "import sys, json; from diag.cli import main; "
        "main(['ingest', sys.argv[1], '--db', sys.argv[2], '--json']); "
        "print(json.dumps(sorted(m for m in ('polars', 'pyarrow', 'numpy') if m in sys.modules)))"
    )
    seen = []
    for path in (folder, log):
        run = subprocess.run(
            [sys.executable, "-c", code, str(path), str(tmp_path / "d.duckdb")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        seen.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert seen == [[], ["numpy", "polars", "pyarrow"]]
    import duckdb

    con = duckdb.connect(str(tmp_path / "d.duckdb"), read_only=True)
    # the rows of its kernel_details.csv, and the log's one record
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 212
    assert con.execute("SELECT count(*) FROM log_records").fetchone()[0] == 1
