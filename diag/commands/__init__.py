"""One module per CLI command; each exposes ``register(app)``. Adding a command is one line in COMMANDS."""

from __future__ import annotations

from diag.commands import app, export, findings, ingest, logs, runs, sql

COMMANDS = (ingest, runs, findings, logs, sql, export, app)
