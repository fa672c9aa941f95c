"""The Dockerfile stays in step with requirements.txt, the package layout and ``diag app`` (no Docker engine
here: the file is read, not built)."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from diag.commands import app as app_command
from tests.conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def args_of(name: str) -> list[str]:
    return [a for w, a in instructions() if w == name]


def exec_form(value: str) -> list[str]:
    return json.loads(value) if value.startswith("[") else shlex.split(value)


def test_slim_python_311_base() -> None:
    assert instructions()[0][0] == "FROM" and re.fullmatch(
        r"python:3\.11(\.\d+)?-slim(-\w+)?", args_of("FROM")[0]
    )


def test_installs_exactly_requirements_txt_and_the_package() -> None:
    pips = [a for a in args_of("RUN") if "pip install" in a]
    assert [p for p in pips if "-r " in p] == ["pip install -r requirements.txt"]
    assert [p for p in pips if "-r " not in p] == ["pip install --no-deps -e ."]  # the README's `-e .`
    assert any(a.split()[0] == "requirements.txt" for a in args_of("COPY"))
    assert not any("requirements-dev" in a for _, a in instructions())
    # the README installs the same: requirements.txt and the package
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install -r requirements.txt -e ." in readme


def test_copies_every_package_and_what_diag_app_reads() -> None:
    copied = {a.split()[0].rstrip("/") for a in args_of("COPY")}
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    wanted = {p.rstrip("*") for p in packages["include"]}  # diag, parsers, app
    repo = app_command.REPO
    wanted |= {
        app_command.APP_MAIN.relative_to(repo).parts[0],
        app_command.SAMPLES.relative_to(repo).as_posix(),
        ".streamlit",
        "pyproject.toml",
    }
    assert wanted <= copied, wanted - copied


def test_runs_the_app_as_a_non_root_user() -> None:
    words = [w for w, _ in instructions()]
    user = args_of("USER")
    assert user and user[-1] not in ("root", "0") and words.index("USER") < words.index("CMD")
    assert any("useradd" in a and user[-1] in a for a in args_of("RUN"))


def test_cmd_is_diag_app_on_8501_and_the_health_check_asks_streamlit() -> None:
    cmd = exec_form(args_of("CMD")[-1])
    assert cmd[:2] == ["diag", "app"]
    flags = dict(zip(cmd[2::2], cmd[3::2], strict=True))
    assert flags == {"--address": "0.0.0.0", "--port": "8501"}
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["diag"] == "diag.cli:main"
    from diag.cli import app as cli

    assert "app" in {c.name or c.callback.__name__ for c in cli.registered_commands}
    assert args_of("EXPOSE") == ["8501"]
    health = args_of("HEALTHCHECK")[-1]
    assert "http://127.0.0.1:8501/_stcore/health" in health and "CMD" in health


def test_database_lives_on_the_volume() -> None:
    env = " ".join(args_of("ENV"))
    db = re.search(r"DIAG_DB=(\S+)", env)
    uploads = re.search(r"DIAG_UPLOAD_DIR=(\S+)", env)
    volumes = json.loads(args_of("VOLUME")[-1])
    assert db and uploads and volumes
    assert any(Path(db[1]).parent == Path(v) for v in volumes)
    assert any(Path(v) in Path(uploads[1]).parents for v in volumes)


@pytest.mark.parametrize("pattern", [".git", ".venv", "*.duckdb", "tests"])
def test_dockerignore_keeps_the_context_small(pattern: str) -> None:
    assert pattern in (ROOT / ".dockerignore").read_text().split()


def test_readme_documents_docker_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docker build -t diag ." in readme
    assert re.search(
        r"docker run [^\n]*-p (?:127\.0\.0\.1:)?8501:8501[^\n]*-v [^\n]*:/data[^\n]* diag", readme
    )
