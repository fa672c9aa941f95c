"""Who may use the app. With an ``[auth]`` section in ``.streamlit/secrets.toml`` (an OIDC provider: see
deploy/README.md) every page needs a login through Streamlit's ``st.login``; without one the app has no
login at all, and the sidebar says so: it must then stay on 127.0.0.1 or behind a proxy that authenticates
(deploy/Caddyfile). A configured login that cannot work (Authlib missing) locks the app rather than opening it.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st
from streamlit.auth_util import is_authlib_installed

from diag.i18n import t

NO_LOGIN_NOTE = (
    "No login configured in the app: unless a proxy in front asks for a password, anyone who can reach this "
    "address can read every run and upload. Keep it on 127.0.0.1, or see deploy/README.md."
)


def auth_section() -> Mapping | None:
    """The ``[auth]`` section of the app's secrets, or None when there is none (or no secrets file)."""
    try:
        return st.secrets.get("auth")
    except (FileNotFoundError, KeyError):  # StreamlitSecretNotFoundError is a FileNotFoundError
        return None


def providers(section: Mapping) -> list[str | None]:
    """The providers to offer: None for the one configured in ``[auth]`` itself, else each ``[auth.<name>]``."""
    if "client_id" in section:
        return [None]
    return [name for name, value in section.items() if isinstance(value, Mapping)]


def require_login() -> None:
    """Stop the script run here unless the viewer may see the app."""
    section = auth_section()
    if section is None:
        st.sidebar.caption(t("app.no_login"))  # NO_LOGIN_NOTE in the current language
        return
    if not is_authlib_installed():
        st.error(
            "Login is configured ([auth] in secrets.toml) but Authlib is not installed: pip install 'Authlib>=1.3.2'."
        )
        st.stop()
    if not st.user.is_logged_in:
        st.title("diag")
        st.write("Sign in to use diag.")
        for provider in providers(section):
            label = "Log in" if provider is None else f"Log in with {provider}"
            st.button(
                label,
                key=f"login-{provider}",
                on_click=st.login,
                args=() if provider is None else (provider,),
            )
        st.stop()
    who = st.user.get("email") or st.user.get("name") or "signed in"
    st.sidebar.text(f"signed in: {who}")  # text, not Markdown: the name comes from the provider
    st.sidebar.button("Log out", on_click=st.logout)
