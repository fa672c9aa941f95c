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
