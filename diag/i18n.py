"""中文 / English: the texts a person reads, looked up by a stable key in one catalog per language.

The catalogs are data (``diag/i18n/en.toml``, ``diag/i18n/zh.toml``); a TOML table ``[page.memory]`` with
``title = …`` is the key ``page.memory.title``. ``t(key, **fmt)`` gives the text in the current language, falling
back to English, then to the key itself (a missing text shows as its key, never as an error).

The language: ``set_language`` (the CLI's ``--lang``, the app's sidebar switch), else ``$DIAG_LANG``, else the
locale (``LC_ALL`` / ``LC_MESSAGES`` / ``LANG`` = ``zh_CN.UTF-8`` → ``zh``), else English. It is held per thread
of execution (a ContextVar): Streamlit runs each session's script on its own thread, so one session's choice never
leaks into another's. Numbers and units are formatted by ``diag.commands._format`` the same in both languages;
``--json`` keys never change.
"""

from __future__ import annotations

import os
import tomllib
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

CATALOG_DIR = Path(__file__).resolve().parent / "i18n"
LANGUAGES = ("en", "zh")
DEFAULT_LANGUAGE = "en"
_LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")  # POSIX precedence: LC_ALL wins over LC_MESSAGES over LANG
_chosen: ContextVar[str | None] = ContextVar("diag_language", default=None)


def normalize(lang: str | None) -> str | None:
    """``zh``, ``zh_CN.UTF-8``, ``zh-Hans`` → ``zh``; ``en_US`` → ``en``; anything else (``C``, ``POSIX``, "") → None."""
    if not lang:
        return None
    base = lang.strip().replace("-", "_").split(".")[0].split("_")[0].lower()
    return base if base in LANGUAGES else None


def language_from_environment(environ: dict[str, str] | None = None) -> str:
    """``$DIAG_LANG``, else the first locale variable that is set, else English."""
    env = os.environ if environ is None else environ
    if found := normalize(env.get("DIAG_LANG")):
        return found
    for var in _LOCALE_VARS:
        if env.get(var):  # the first one set decides, as in POSIX: LC_ALL=C means C, whatever LANG says
            return normalize(env[var]) or DEFAULT_LANGUAGE
    return DEFAULT_LANGUAGE


def set_language(lang: str | None) -> str:
    """Choose the language (None: back to the environment's); returns the one now in effect."""
    if lang is not None and normalize(lang) is None:
        raise ValueError(f"unknown language {lang!r} (zh, en)")
    _chosen.set(normalize(lang))
    return current_language()


def current_language() -> str:
    return _chosen.get() or language_from_environment()


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = str(value)
    return out


def catalog_files(lang: str) -> list[Path]:
    """``<lang>.toml`` and its parts ``<lang>.<part>.toml`` (findings, logs, pages…: one file per area, so texts
    of different areas are kept — and reviewed — apart)."""
    return [CATALOG_DIR / f"{lang}.toml", *sorted(CATALOG_DIR.glob(f"{lang}.*.toml"))]


@cache
def catalog(lang: str) -> dict[str, str]:
    """Every key of one language's catalog, flat: ``{"page.memory.title": "Memory", …}``; a key defined in two
    files of one language is an error (which text wins would depend on file order)."""
    merged: dict[str, str] = {}
    for path in catalog_files(lang):
        with open(path, "rb") as fh:
            part = _flatten(tomllib.load(fh))
        if clash := sorted(merged.keys() & part.keys()):
            raise ValueError(f"{path.name}: keys already defined in another {lang} catalog file: {clash[:5]}")
        merged.update(part)
    return merged


def t(key: str, /, **fmt: Any) -> str:
    """The text of ``key`` in the current language, its ``{placeholders}`` filled from ``fmt``."""
    text = catalog(current_language()).get(key) or catalog(DEFAULT_LANGUAGE).get(key) or key
    return text.format(**fmt) if fmt else text


SEVERITIES = ("high", "medium", "low", "info")
ROLES = (
    "cause",
    "symptom",
    "consequence",
    "wrapper",
)  # a log root cause's role (diag.analyses.log_diagnosis)


def severity_word(severity: str) -> str:
    """A stored severity (``high`` … ``info``, the word --json keeps) as the reader's language says it."""
    return t(f"page.logs.severity.{severity}") if severity in SEVERITIES else severity


def role_word(role: str) -> str:
    """A log root cause's stored role (``cause`` …, the word --json keeps) in the reader's language."""
    return t(f"page.logs.role.{role}") if role in ROLES else role


def is_chinese() -> bool:
    return current_language() == "zh"
