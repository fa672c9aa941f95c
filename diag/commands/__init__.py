"""One module per CLI command; each exposes ``register(app)``. Adding a command is one line in COMMANDS."""

from __future__ import annotations

from diag.commands import accept, app, cluster, compare, env, export, findings, ingest, logs, report, runs, sql

COMMANDS = (ingest, runs, findings, cluster, compare, accept, logs, report, sql, export, app, env)
