"""``diag app``: the Streamlit app on the database; a fresh database is first filled from sample_traces/."""

from __future__ import annotations

import ipaddress
import os
import sys
import tomllib
from pathlib import Path
from typing import Annotated

import typer

from diag.commands._common import DEFAULT, DbOption, LakeOption, console, lake_catalog
from diag.i18n import t
from diag.store import Store

REPO = Path(__file__).resolve().parent.parent.parent
APP_MAIN = REPO / "app" / "main.py"
SAMPLES = REPO / "sample_traces"
# Ingested first, so that run 1 — the run every page opens on — is the Ascend rank 0 whose AI_CPU ops the
# bundled incident log (sample_traces/incident/) explains: the first launch shows a finding on every page.
FIRST_SAMPLES = (SAMPLES / "generated" / "llm_decode_tp2", SAMPLES / "incident")


# where Streamlit reads secrets from (the app runs with the repository as its working folder)
SECRETS_FILES = (REPO / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml")


def login_configured() -> bool:
    """Whether Streamlit's login is set up: an ``[auth]`` section in one of its secrets files (see app/auth.py)."""
    for path in SECRETS_FILES:
        try:
            if "auth" in tomllib.loads(path.read_text(encoding="utf-8")):
                return True
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
    return False


def exposure_warning(address: str, port: int) -> str | None:
    """A warning when the app would be reachable from other machines with no login of its own."""
    try:
        local = address == "localhost" or ipaddress.ip_address(address).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        local = False
    if local or login_configured():
        return None
    return (
        f"warning: serving on {address}:{port} with no login: anyone who can reach that port can read every run "
        "and upload files. Keep --address 127.0.0.1 behind a proxy that asks for a password (deploy/README.md), "
        "or configure [auth] in .streamlit/secrets.toml"
    )


def ensure_samples(db: str) -> int:
    """Ingest the bundled sample traces when the database holds no run; returns runs added."""
    with Store(db) as store:
        if store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0]:
            return 0
        from diag.ingest import Ingestor  # the parsers only when the samples are ingested

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
    lake: LakeOption = None,
) -> None:
    """Start the web app (Streamlit) on the database (or, read-only, on a Parquet lake)."""
    out = console()
    lake_env = {}
    if lake is not None:  # the lake's catalog, read-only: no samples loaded into it, no uploads stored
        db, no_samples, lake_env = lake_catalog(db, lake), True, {"DIAG_LAKE": str(Path(lake).resolve())}
    if not no_samples and SAMPLES.is_dir():
        added = ensure_samples(db)
        if added:
            out.print(t("cli.app_samples_loaded", n=added, samples=SAMPLES, db=db))
    env = {**os.environ, "DIAG_DB": str(Path(db).resolve()), **lake_env}
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
    out.print(t("cli.app_serving", address=address, port=port, db=db))
    warning = exposure_warning(address, port)
    if warning:
        console(stderr=True).print(warning, markup=False)
    sys.stdout.flush()
    os.chdir(REPO)
    os.execve(sys.executable, cmd, env)  # become the server: signals and exit codes reach Streamlit directly


def register(app_: typer.Typer) -> None:
    app_.command("app")(app)
