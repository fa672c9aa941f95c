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
