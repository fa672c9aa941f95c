"""One module per CLI command; each exposes ``register(app)``. Adding a command is one line in COMMANDS."""

from __future__ import annotations

import diag.commands.env as env  # diag env (#21)
from diag.commands import accept, app, cluster, compare, export, findings, ingest, logs, report, runs, sql
from diag.commands import memory as memory_cmd  # diag memory (#19)
from diag.commands import moe as moe_cmd  # diag moe (#22)

COMMANDS = (ingest, runs, findings, cluster, compare, accept, logs, report, sql, export, app)
COMMANDS = (*COMMANDS, memory_cmd, env, moe_cmd)  # a line of its own: commands added in parallel merge apart
