"""Regrouping a lake's runs (``diag.grouping.regroup``) from the staging database of a lake ingest.

The staging database holds the rows of the runs the ingest changes, not the lake's other runs (nor, after a Ray
ingest, the tasks' runs): the capture windows regroup reads from ``comm_ops`` and ``steps`` must come from the
lake for those, or a job timed by its collectives alone would be split into one job per rank.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from diag.lake import LakeWriter
from diag.store import q


@contextmanager
def lake_wide_spans(writer: LakeWriter) -> Iterator[None]:
    """While regrouping: the capture windows ``diag.grouping`` reads from ``comm_ops`` and ``steps`` cover the
    runs whose rows are only in the lake (the tasks' runs, the runs this ingest left alone), not only those in
    the staging database. Views in a schema of their own, first on the search path, for the regroup only."""
    con = writer.store.con
    ids = ", ".join(str(int(r)) for r in sorted(writer.store.loaded))  # type: ignore[attr-defined]
    q(con, "CREATE SCHEMA IF NOT EXISTS lake_wide")
    for table, cols in (("comm_ops", "run_id, start_ns, elapse_ns"), ("steps", "run_id, start_ns, end_ns")):
        q(con, f"CREATE OR REPLACE VIEW lake_wide.{table} AS SELECT {cols} FROM main.{table} UNION ALL "
               f"SELECT {cols} FROM cat.{table} WHERE NOT list_contains([{ids}]::BIGINT[], run_id)")  # fmt: skip
    q(con, "SET search_path = 'lake_wide,main'")
    try:
        yield
    finally:
        q(con, "RESET search_path")
        q(con, "DROP SCHEMA lake_wide CASCADE")
