"""``diag app``: the Streamlit app on the database; a fresh database is first filled from sample_traces/."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from diag.commands._common import DEFAULT, DbOption, console
from diag.ingest import Ingestor
from diag.store import Store

REPO = Path(__file__).resolve().parent.parent.parent
APP_MAIN = REPO / "app" / "main.py"
SAMPLES = REPO / "sample_traces"
# Ingested first, so that run 1 — the run every page opens on — is the Ascend rank 0 whose AI_CPU ops the
# bundled incident log (sample_traces/incident/) explains: the first launch shows a finding on every page.
FIRST_SAMPLES = (SAMPLES / "generated" / "llm_decode_tp2", SAMPLES / "incident")


def ensure_samples(db: str) -> int:
    """Ingest the bundled sample traces when the database holds no run; returns runs added."""
    with Store(db) as store:
        if store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0]:
            return 0
        ingestor = Ingestor(store)
        try:
            first = [p for p in FIRST_SAMPLES if p.is_dir()]
            if first:
                ingestor.ingest(first)
            ingestor.ingest([SAMPLES])  # the rest; the files of the first are found unchanged
        finally:
            ingestor.close()
        return int(store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0])


def app(
    db: DbOption = DEFAULT,
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 8501,
    address: Annotated[str, typer.Option("--address", help="Address to bind.")] = "127.0.0.1",
    no_samples: Annotated[
        bool, typer.Option("--no-samples", help="Do not load sample_traces/ into an empty database.")
    ] = False,
) -> None:
    """Start the web app (Streamlit) on the database."""
    out = console()
    if not no_samples and SAMPLES.is_dir():
        added = ensure_samples(db)
        if added:
            out.print(f"loaded {added} sample run(s) from {SAMPLES} into {db}")
    env = {**os.environ, "DIAG_DB": str(Path(db).resolve())}
    cap_mb = max(1, int(os.environ.get("DIAG_MAX_UPLOAD_BYTES", str(2 << 30))) // (1 << 20))
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_MAIN),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--server.maxUploadSize",
        str(cap_mb),
        "--server.enableXsrfProtection",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    out.print(f"diag app on http://{address}:{port} (database {db})")
    sys.stdout.flush()
    os.chdir(REPO)
    os.execve(sys.executable, cmd, env)  # become the server: signals and exit codes reach Streamlit directly


def register(app_: typer.Typer) -> None:
    app_.command("app")(app)
