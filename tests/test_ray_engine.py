"""``--engine ray`` (diag.engine_ray, diag.analyses.cluster_ray) on a local Ray instance: the rows and answers
of the local engine, a task whose worker dies retried without a half partition, an idempotent re-run.

One Ray instance for the module (starting one takes seconds); skipped where Ray is not installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from diag.analyses.findings import device_findings
from diag.cli import main
from diag.engine_ray import FAIL_ONCE_ENV
from diag.lake import open_lake
from diag.schema import TABLES
from diag.store import Store
from sample_traces.generate_cluster import main as generate_cluster
from tests.conftest import FIXTURES, ROOT

ray = pytest.importorskip("ray")

# one Ray instance and one pair of stores: the module's tests belong together (under `--dist loadgroup`)
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.xdist_group("ray")]
PLOGS = FIXTURES / "cann_log" / "two_ranks"


@pytest.fixture(scope="module", autouse=True)
def ray_instance():  # noqa: ANN201 - a fixture
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def diag(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def table_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, without the ids a Ray ingest may draw otherwise (``file_id``: each task has
    a block of its own) and the time a row was stored."""
    rows = {}
    for table in TABLES:
        cols = [
            f'"{c.name}"' for c in table.columns if not c.type.startswith("TIMESTAMP") and c.name != "file_id"
        ]
        rows[table.name] = con.execute(
            f'SELECT {", ".join(cols)} FROM "{table.name}" ORDER BY ALL'
        ).fetchall()
    return rows


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An 8-rank job (2 nodes × TP 4, EP 2), with CANN plogs in two ranks' folders and one outside any run."""
    root = tmp_path_factory.mktemp("rayjob") / "job"
    assert (
        generate_cluster([str(root), "--ranks", "8", "--steps", "2", "--tp", "4", "--slow-link", "1", "5"])
        == 0
    )
    ranks = sorted(root.glob("rank*_ascend_pt"), key=lambda p: int(p.name[4:].split("_")[0]))
    for rank in (0, 1):
        shutil.copytree(PLOGS / f"rank{rank}" / "debug", ranks[rank] / "debug")
    shutil.copytree(PLOGS / "rank1" / "debug", root / "loose_logs")
    return root


@pytest.fixture(scope="module")
def stores(job: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The job in a DuckDB file by the local engine, and in a lake by Ray."""
    where = tmp_path_factory.mktemp("raystores")
    db, lake = where / "x.duckdb", where / "lake"
    assert main(["ingest", str(job), "--db", str(db)]) == 0
    assert main(["ingest", str(job), "--lake", str(lake), "--engine", "ray"]) == 0
    return db, lake


def test_ray_ingest_stores_exactly_the_rows_of_the_local_engine(stores: tuple[Path, Path]) -> None:
    db, lake = stores
    with open_lake(lake) as store, duckdb.connect(str(db), read_only=True) as con:
        in_lake, in_db = table_rows(store.con), table_rows(con)
        assert store.con.execute("SELECT count(DISTINCT file_id) FROM files").fetchall() == [(43,)]
    assert in_lake == in_db
    counts = {
        t: len(in_db[t])
        for t in ("runs", "jobs", "files", "step_trace", "comm_ops", "comm_matrix", "log_records")
    }
    assert counts == {"runs": 8, "jobs": 1, "files": 43, "step_trace": 16, "comm_ops": 96, "comm_matrix": 544,
                      "log_records": 10}  # fmt: skip
    parts = sorted(p.relative_to(lake).as_posix() for p in (lake / "comm_ops").glob("*/*/*.parquet"))
    assert parts == [f"comm_ops/job_id=1/run_id={r}/part-0.parquet" for r in range(1, 9)]
    assert sorted(p.name for p in lake.iterdir() if p.name.startswith(".")) == [".writer.lock"]


def test_cluster_on_ray_over_the_lake_equals_cluster_over_the_database(
    stores: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, lake = stores
    code_r, out_r, _ = diag(capsys, "cluster", "--lake", str(lake), "--engine", "ray", "--json")
    code_d, out_d, _ = diag(capsys, "cluster", "--db", str(db), "--json")
    on_ray, local = json.loads(out_r), json.loads(out_d)
    assert code_r == code_d == 0
    assert on_ray.pop("db") == str(lake / "catalog.duckdb") and local.pop("db") == str(db)
    assert on_ray == local
    view = local["jobs"][0]
    assert (len(view["ranks"]), len(view["groups"]), len(view["links"])) == (8, 6, 32)
    assert [(x["src_rank"], x["dst_rank"]) for x in view["links"] if x["slow"]] == [(1, 5)]


def test_findings_per_run_on_ray_equal_the_local_ones(stores: tuple[Path, Path]) -> None:
    from diag.analyses.cluster_ray import device_findings_on_ray

    _, lake = stores
    with open_lake(lake) as store:
        runs = [r[0] for r in store.con.execute("SELECT run_id FROM runs ORDER BY 1").fetchall()]
        local = {rid: [f.to_json() for f in device_findings(store, rid)] for rid in runs}
    done, failed = device_findings_on_ray(lake, runs)
    assert failed == {} and {rid: [f.to_json() for f in fs] for rid, fs in done.items()} == local


def _without_file_ids(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_file_ids(v) for k, v in value.items() if k != "file_id"}
    if isinstance(value, list):
        return [_without_file_ids(v) for v in value]
    return value


def _by_source(capsys: pytest.CaptureFixture[str], flag: str, where: Path, findings_json: str) -> list[dict]:
    runs = json.loads(diag(capsys, "runs", flag, str(where), "--json")[1])["runs"]
    source = {r["run_id"]: Path(r["source"]).name for r in runs}
    rows = [
        {**_without_file_ids(f), "run_id": None, "run": source.get(f["run_id"])}
        for f in json.loads(findings_json)["findings"]
    ]
    return sorted(rows, key=lambda f: json.dumps(f, sort_keys=True))


def test_diag_findings_on_ray_over_the_lake_equals_findings_over_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled samples (4 runs with 25 device findings: AI CPU, idle, exposed communication, recompile…),
    one Ray task per run over a lake, against the local findings over a database of the same files."""
    samples = [
        str(ROOT / "sample_traces" / "real" / "mstt_timeline_advice"),
        str(ROOT / "sample_traces" / "generated"),
    ]
    db, lake = tmp_path / "s.duckdb", tmp_path / "lake"
    assert diag(capsys, "ingest", *samples, "--db", str(db))[0] == 0
    assert diag(capsys, "ingest", *samples, "--lake", str(lake), "--engine", "ray")[0] == 0
    code_r, out_r, _ = diag(capsys, "findings", "--lake", str(lake), "--engine", "ray", "--json")
    code_d, out_d, _ = diag(capsys, "findings", "--db", str(db), "--json")
    assert code_r == code_d == 0
    # run and file ids may differ between the engines (per-task id blocks; one-file captures): findings are
    # compared by the run's source path, everything else equal
    on_ray, local = _by_source(capsys, "--lake", lake, out_r), _by_source(capsys, "--db", db, out_d)
    assert on_ray == local and json.loads(out_r)["failed_runs"] == []
    device = [f for f in local if f["run"] is not None]
    assert (len(device), len({f["run"] for f in device})) == (25, 4)


def test_rerun_skips_unchanged_files_and_rewrites_nothing(
    job: Path, stores: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, lake = stores
    before = {p: p.stat().st_mtime_ns for p in lake.glob("*/*/*/*.parquet")}
    code, out, _ = diag(capsys, "ingest", str(job), "--lake", str(lake), "--engine", "ray", "--json")
    summary = json.loads(out)["summary"]
    assert code == 0 and (summary["unchanged"], summary["ok"], summary["rows"]) == (43, 0, {})
    assert {p: p.stat().st_mtime_ns for p in lake.glob("*/*/*/*.parquet")} == before
    with open_lake(lake) as store:
        assert store.con.execute("SELECT count(*), count(DISTINCT job_id) FROM runs").fetchall() == [(8, 1)]


def two_ranks(job: Path, where: Path) -> Path:
    """Ranks 0 (with its plog) and 1 of the job, copied: a quicker input for the tests that ingest it again."""
    src = where / "pair"
    for rank in ("rank0_", "rank1_"):
        folder = next(job.glob(f"{rank}*"))
        shutil.copytree(folder, src / folder.name)
    return src


def test_a_task_whose_worker_dies_is_retried_and_leaves_no_half_partition(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first task to have written its partitions dies (``os._exit``, as a lost node) before the driver
    moved them: Ray runs it again, the lake ends with every run whole and no task's incoming folder."""
    src, db = two_ranks(job, tmp_path), tmp_path / "x.duckdb"
    assert main(["ingest", str(src), "--db", str(db)]) == 0
    marker, lake = tmp_path / "died-once", tmp_path / "lake"
    monkeypatch.setenv(FAIL_ONCE_ENV, str(marker))
    assert main(["ingest", str(src), "--lake", str(lake), "--engine", "ray"]) == 0
    assert marker.read_text() == "failed once\n"
    with open_lake(lake) as store, duckdb.connect(str(db), read_only=True) as con:
        assert table_rows(store.con) == table_rows(con)
    names = {p.name for p in lake.glob("*/*/*/*")}
    assert names == {"part-0.parquet"}
    assert sorted(p.name for p in lake.iterdir() if p.name.startswith(".")) == [".writer.lock"]


def test_a_failing_file_is_reported_as_the_local_engine_reports_it(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = two_ranks(job, tmp_path)
    broken = next(src.glob("rank1_*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"))
    broken.write_text("Device_id,Step,Computing\n0,1,not-a-number\n")
    code_l, out_l, err_l = diag(capsys, "ingest", str(src), "--db", str(tmp_path / "x.duckdb"))
    code_r, out_r, err_r = diag(
        capsys, "ingest", str(src), "--lake", str(tmp_path / "lake"), "--engine", "ray"
    )
    failed_l = [line for line in err_l.splitlines() if str(broken) in line]
    assert code_l == code_r == 1 and failed_l and len(failed_l) == 2
    assert [line for line in err_r.splitlines() if str(broken) in line] == failed_l
    assert (
        out_l.splitlines()[-1] == out_r.splitlines()[-1]
    )  # the summary's last line: the rows stored by table
    with Store(tmp_path / "lake" / "catalog.duckdb", read_only=True) as store:
        assert store.con.execute("SELECT status FROM files WHERE source = ?", [str(broken)]).fetchall() == [
            ("failed",)
        ]
