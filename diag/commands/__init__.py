"""One module per CLI command; each exposes ``register(app)``. Adding a command is one line in COMMANDS."""

from __future__ import annotations

import diag.commands.env as env  # diag env (#21): its own line, so that the line below stays under the limit
from diag.commands import accept, app, cluster, compare, export, findings, ingest, logs, report, runs, sql
from diag.commands import memory as memory_cmd

COMMANDS = (ingest, runs, findings, cluster, compare, accept, logs, report, sql, export, app)
COMMANDS = (*COMMANDS, memory_cmd)  # a line of its own: commands added in parallel merge apart
COMMANDS = (*COMMANDS, env)
from diag.commands import moe as moe_cmd  # noqa: E402 - a line of its own: commands added in parallel merge apart

COMMANDS = (*COMMANDS, moe_cmd)  # diag moe (#22)
