"""The free text of a postmortem (title, summary, owner, follow-ups), saved with its run, job or the logs.

Stored in ``postmortem_notes``, one row per scope; an empty field is stored as NULL and left out on reading.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from diag.store import Store, q

NOTE_FIELDS = ("title", "summary", "owner", "follow_ups")


def notes_scope(run_id: int | None = None, job_id: int | None = None) -> str:
    if job_id is not None:
        return f"job:{job_id}"
    return f"run:{run_id}" if run_id is not None else "logs"


def load_notes(store: Store, run_id: int | None = None, job_id: int | None = None) -> dict[str, str]:
    """The saved fields of the scope (only those that are set), with ``updated_at`` when any is."""
    cols = ", ".join(NOTE_FIELDS)
    rows = q(
        store.cursor(),
        f"SELECT {cols}, updated_at FROM postmortem_notes WHERE scope = ?",
        [notes_scope(run_id, job_id)],
    )
    if not rows:
        return {}
    out = {k: v for k, v in zip(NOTE_FIELDS, rows[0], strict=False) if v}
    if out and rows[0][-1] is not None:
        out["updated_at"] = rows[0][-1].isoformat(sep=" ", timespec="seconds")
    return out


def save_notes(
    store: Store, notes: dict[str, str], run_id: int | None = None, job_id: int | None = None
) -> dict[str, str]:
    """Replace the scope's fields with ``notes`` (missing or blank fields are cleared); returns what is stored."""
    values = [(notes.get(k) or "").strip() or None for k in NOTE_FIELDS]
    scope = notes_scope(run_id, job_id)
    now = datetime.now(UTC).replace(tzinfo=None)
    with store.transaction() as con:
        q(con, "DELETE FROM postmortem_notes WHERE scope = ?", [scope])
        if any(values):
            q(
                con,
                f"INSERT INTO postmortem_notes (scope, run_id, job_id, {', '.join(NOTE_FIELDS)}, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    scope,
                    run_id if job_id is None else None,
                    job_id if job_id is not None else _job_of(con, run_id),
                    *values,
                    now,
                ],  # fmt: skip
            )
    return load_notes(store, run_id, job_id)


def _job_of(con: duckdb.DuckDBPyConnection, run_id: int | None) -> int | None:
    """A run's notes carry its job too (``diag export`` partitions by job and run)."""
    if run_id is None:
        return None
    rows = q(con, "SELECT job_id FROM runs WHERE run_id = ?", [run_id])
    return rows[0][0] if rows else None
