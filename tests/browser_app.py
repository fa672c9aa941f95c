"""`diag app` served on a free local port for the browser tests (headless Debian chromium via playwright).

One place for starting the app, waiting for it to answer and stopping it: it holds the database's write lock
until it exits, so a test that reads the database afterwards calls ``stop`` first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_ARGS = [  # headless in a container, and nothing of the browser's own that would call out
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# the sidebar link of each page and the heading it shows (app/main.py PAGES, each page's st.title)
PAGE_HEADINGS = [
    ("Runs", "Runs"),
    ("Upload", "Upload"),
    ("Timeline", "Timeline"),
    ("Stalls", "Stalls"),
    ("Memory", "Memory"),
    ("Fallback ops", "CPU fallback ops"),
    ("Ops", "Ops"),
    ("Findings", "Findings"),
    ("Logs", "Logs"),
    ("Ascend vs CUDA", "Ascend vs CUDA"),
    ("Postmortem", "Postmortem"),
    ("Serving acceptance", "Serving acceptance"),
    ("Cluster", "Cluster"),
    ("Glossary", "Glossary"),
]
# app/main.py PAGES in order: the nav key of each page and the key of its heading (page.<key>.title)
PAGE_KEYS = [
    ("runs", "runs"),
    ("upload", "upload"),
    ("timeline", "timeline"),
    ("stalls", "stalls"),
    ("memory", "memory"),
    ("fallback", "fallback"),
    ("ops", "ops"),
    ("findings", "findings"),
    ("logs", "logs"),
    ("compare", "compare"),
    ("postmortem", "postmortem"),
    ("serving", "serving"),
    ("cluster", "cluster"),
    ("glossary", "glossary"),
]


def page_headings(lang: str) -> list[tuple[str, str]]:
    """PAGE_HEADINGS in ``lang``: (sidebar link, heading) of every page, from the catalogs (diag/i18n)."""
    from diag.i18n import catalog

    texts = catalog(lang)
    return [(texts[f"nav.{nav}"], texts[f"page.{title}.title"]) for nav, title in PAGE_KEYS]


LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"data", "blob", "about", "chrome", "chrome-extension"}


def is_local(url: str) -> bool:
    """A request that stays on this machine (the app itself, or the browser's own data / blob / about URLs)."""
    parsed = urlparse(url)
    return parsed.scheme in LOCAL_SCHEMES or parsed.hostname in LOCAL_HOSTS


def launch(playwright):  # noqa: ANN001, ANN201 — playwright's own types
    return playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)


def require_browser() -> None:
    """Skip the test when Debian's chromium or playwright is missing (a user's machine, a CI without apt)."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    pytest.importorskip("playwright")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not come up")


@dataclass
class Served:
    url: str
    db: Path
    stop: Callable[[], None]


@contextlib.contextmanager
def serve_app(db: Path, uploads: Path, samples: bool = False, timeout: float = 120) -> Iterator[Served]:
    """``diag app --db DB`` (``samples``: an empty database is filled from sample_traces/, the first launch)."""
    port = free_port()
    args = [sys.executable, "-m", "diag.cli", "app", "--db", str(db), "--port", str(port)]
    proc = subprocess.Popen(
        [*args, *([] if samples else ["--no-samples"])],
        cwd=ROOT,
        env={**os.environ, "DIAG_UPLOAD_DIR": str(uploads)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url, timeout=timeout)
        yield Served(url, db, stop)
    finally:
        stop()
