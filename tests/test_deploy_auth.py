"""Team deployment: a login gates the app when ``[auth]`` is configured, the sidebar says when none is, and the
reverse-proxy files in deploy/ keep the app itself on 127.0.0.1 behind a password."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import auth
from tests.conftest import ROOT, open_page

OIDC = {
    "redirect_uri": "https://diag.example.com/oauth2callback",
    "cookie_secret": "x" * 32,
    "client_id": "diag",
    "client_secret": "s",
    "server_metadata_url": "https://id.example.com/.well-known/openid-configuration",
}


def _app(monkeypatch: pytest.MonkeyPatch, db: Path, secrets: dict, user: dict):  # noqa: ANN202
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DIAG_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    for key, value in secrets.items():
        at.secrets[key] = value
    at.user = user
    at.run()
    assert not at.exception, at.exception
    return at


def test_without_auth_the_sidebar_says_the_app_has_no_login(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    at = open_page(monkeypatch, tmp_path / "empty.duckdb")
    assert auth.NO_LOGIN_NOTE in [c.value for c in at.sidebar.caption]
    assert at.title[0].value != "diag"  # the Runs page ran


def test_with_auth_nothing_but_the_login_shows_until_signed_in(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setattr(auth, "is_authlib_installed", lambda: True)
    at = _app(monkeypatch, tmp_path / "empty.duckdb", {"auth": OIDC}, {"is_logged_in": False})
    assert [t.value for t in at.title] == ["diag"]
    assert [b.label for b in at.button] == ["Log in"]
    assert [m.value for m in at.markdown] == ["Sign in to use diag."]
    assert [c.value for c in at.sidebar.caption] == []  # not even the database path


def test_with_named_providers_one_button_each(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setattr(auth, "is_authlib_installed", lambda: True)
    section = {"redirect_uri": OIDC["redirect_uri"], "cookie_secret": OIDC["cookie_secret"], "okta": OIDC}
    at = _app(monkeypatch, tmp_path / "empty.duckdb", {"auth": section}, {"is_logged_in": False})
    assert [b.label for b in at.button] == ["Log in with okta"]


def test_signed_in_user_sees_the_app_and_a_logout(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setattr(auth, "is_authlib_installed", lambda: True)
    user = {"is_logged_in": True, "email": "[x](http://evil)@example.com"}
    at = _app(monkeypatch, tmp_path / "empty.duckdb", {"auth": OIDC}, user)
    assert [t.value for t in at.sidebar.text] == ["signed in: [x](http://evil)@example.com"]
    assert "Log out" in [b.label for b in at.sidebar.button]
    assert at.title[0].value != "diag"


def test_login_configured_without_authlib_locks_the_app(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setattr(auth, "is_authlib_installed", lambda: False)
    at = _app(monkeypatch, tmp_path / "empty.duckdb", {"auth": OIDC}, {"is_logged_in": False})
    assert [e.value for e in at.error] == [
        "Login is configured ([auth] in secrets.toml) but Authlib is not installed: pip install 'Authlib>=1.3.2'."
    ]
    assert len(at.title) == 0


# -- diag app ------------------------------------------------------------------------------------------------
def _start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys, address: str) -> str:  # noqa: ANN001
    from diag.commands import app as app_command

    monkeypatch.setattr(app_command.os, "execve", lambda *_: None)
    monkeypatch.setattr(app_command.os, "chdir", lambda _: None)
    app_command.app(db=str(tmp_path / "db.duckdb"), port=8501, address=address, no_samples=True)
    return capsys.readouterr().err


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1"])
def test_diag_app_on_loopback_prints_no_warning(monkeypatch, tmp_path: Path, capsys, address: str) -> None:  # noqa: ANN001
    assert _start(monkeypatch, tmp_path, capsys, address) == ""


def test_diag_app_on_all_interfaces_without_login_warns(monkeypatch, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from diag.commands import app as app_command

    monkeypatch.setattr(app_command, "SECRETS_FILES", (tmp_path / "none.toml",))
    err = _start(monkeypatch, tmp_path, capsys, "0.0.0.0")
    assert err.splitlines()[0] == (
        "warning: serving on 0.0.0.0:8501 with no login: anyone who can reach that port can read every run and "
        "upload files. Keep --address 127.0.0.1 behind a proxy that asks for a password (deploy/README.md), or "
        "configure [auth] in .streamlit/secrets.toml"
    )
    secrets = tmp_path / "secrets.toml"
    secrets.write_text((DEPLOY / "secrets.toml.example").read_text())
    monkeypatch.setattr(app_command, "SECRETS_FILES", (tmp_path / "none.toml", secrets))
    assert _start(monkeypatch, tmp_path, capsys, "0.0.0.0") == ""


# -- deploy/ -------------------------------------------------------------------------------------------------
DEPLOY = ROOT / "deploy"


def _blocks(text: str, comment: str) -> list[str]:
    """The config's lines without comments; asserts its braces balance (a structural check: no caddy or nginx
    binary here to validate it)."""
    lines = [line.split(comment, 1)[0].strip() for line in text.splitlines()]
    depth = 0
    for line in lines:
        depth += line.count("{") - line.count("}")
        assert depth >= 0, line
    assert depth == 0
    return [line for line in lines if line]


def test_caddyfile_checks_a_password_before_proxying_to_loopback() -> None:
    lines = _blocks((DEPLOY / "Caddyfile").read_text(), "#")
    assert lines[0] == "{$DIAG_SITE:localhost} {"
    auth = lines.index("basic_auth {")
    assert lines[auth + 1] == "{$DIAG_USER:diag} {$DIAG_PASSWORD_HASH}"
    assert [line for line in lines if line.startswith("reverse_proxy")] == ["reverse_proxy 127.0.0.1:8501"]
    assert auth < lines.index("reverse_proxy 127.0.0.1:8501")


def test_nginx_conf_asks_a_password_and_passes_the_websocket() -> None:
    lines = _blocks((DEPLOY / "nginx.conf").read_text(), "#")
    for line in lines:  # every directive ends in ";" or opens / closes a block
        assert line.endswith((";", "{", "}")), line
    assert 'auth_basic "diag";' in lines and "auth_basic_user_file /etc/nginx/diag.htpasswd;" in lines
    assert [line for line in lines if line.startswith("proxy_pass")] == ["proxy_pass http://127.0.0.1:8501;"]
    assert "proxy_set_header Upgrade $http_upgrade;" in lines
    assert "proxy_set_header Connection $connection_upgrade;" in lines
    assert "client_max_body_size 2g;" in lines  # diag's own upload cap (2 GiB) decides, not nginx's 1 MB
    assert [line for line in lines if line.startswith("listen")] == ["listen 80;", "listen 443 ssl;"]


def test_compose_publishes_only_the_proxy_and_the_app_binds_loopback() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    assert '    command: ["diag", "app", "--address", "127.0.0.1", "--port", "8501"]' in text.splitlines()
    assert '    network_mode: "service:diag"' in text.splitlines()
    published = re.findall(r'^\s+- "(\d+):(\d+)"$', text, flags=re.M)
    assert published == [("80", "80"), ("443", "443")]
    assert "8501:" not in text


def test_secrets_example_is_a_login_streamlit_accepts() -> None:
    import tomllib

    section = tomllib.loads((DEPLOY / "secrets.toml.example").read_text())["auth"]
    assert {"redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url"} <= set(
        section
    )
    assert section["redirect_uri"].endswith("/oauth2callback")  # what Streamlit's callback route requires
    assert auth.providers(section) == [None]


def test_secrets_never_reach_the_image() -> None:
    assert ".streamlit/secrets.toml" in (ROOT / ".dockerignore").read_text().split()
    header = (ROOT / "Dockerfile").read_text().split("FROM", 1)[0]
    assert "docker run -p 127.0.0.1:8501:8501 -v diag-data:/data diag" in header
