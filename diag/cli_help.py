"""``diag --help`` in the reader's language (#24).

Typer reads a command's help (its docstring) and each option's ``help=`` once, when the commands are defined —
before ``--lang`` or ``$DIAG_LANG`` is known — so the texts in the code stay English and the translation is put
in when the help is *drawn*: the root group (``LocalizedGroup``) wraps each subcommand's ``format_help``, and while
it draws in Chinese the command's texts, its options' texts and the panel titles ("Options", "[default: …]")
are swapped for the catalog's (``diag/i18n/<lang>.cli.toml``), then put back. In English nothing is touched, so
``diag --help`` reads exactly as Typer builds it.

Keys: ``cli.cmd.<command>.help`` (the root is ``diag``), ``cli.opt.<command>.<param>``, else the shared
``cli.opt.common.<param>`` (``--db``, ``--json``, ``--help``…). A translation is used only while the English
catalog's text of its key is the code's English help (spaces aside): when someone rewrites an English help,
the old Chinese is not shown for the new meaning (English is, and ``tests/test_i18n_cli.py`` names the key).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from typer.core import TyperGroup

from diag.i18n import catalog, current_language

ROOT = "diag"
BREAK_AFTER = re.compile(r"[，；：、](?! )")
# typer's own words in a help screen (module constants of typer.rich_utils, read while it draws)
PANEL_TEXTS = {
    "OPTIONS_PANEL_TITLE": "cli.panel.options",
    "COMMANDS_PANEL_TITLE": "cli.panel.commands",
    "ARGUMENTS_PANEL_TITLE": "cli.panel.arguments",
    "DEFAULT_STRING": "cli.panel.default",
    "ENVVAR_STRING": "cli.panel.envvar",
    "REQUIRED_LONG_STRING": "cli.panel.required",
}


def _same(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").split()) == " ".join((b or "").split())


def translated(key: str, english: str | None) -> str | None:
    """The current language's text of ``key`` when the English catalog's text of it is ``english`` (the help as
    the code writes it); None otherwise (no key, a stale translation, or English)."""
    if not english or current_language() == "en" or not _same(catalog("en").get(key), english):
        return None
    text = catalog(current_language()).get(key)
    return None if text is None else breakable(text)


def breakable(text: str) -> str:
    """A space after each Chinese comma, semicolon, colon and 、: rich wraps a help column only at spaces and
    cuts a longer run with "…" (a Chinese sentence has none)."""
    return BREAK_AFTER.sub(lambda m: m.group() + " ", text)


def option_keys(command: str, param: str) -> tuple[str, str]:
    return f"cli.opt.{command}.{param}", f"cli.opt.common.{param}"


def option_text(command: str, param: Any) -> str | None:
    english = getattr(param, "help", None)
    return next((x for key in option_keys(command, param.name) if (x := translated(key, english))), None)


def _swap(obj: Any, attr: str, text: str | None, undo: list[tuple[Any, str, Any]]) -> None:
    if text is not None:
        undo.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, text)


@contextlib.contextmanager
def in_language(command: Any, name: str, ctx: Any) -> Iterator[None]:
    """While the block draws ``command``'s help: its texts, its options', its subcommands' (a group lists them)
    and typer's panel words in the current language; put back afterwards."""
    undo: list[tuple[Any, str, Any]] = []
    if current_language() != "en":
        # imported here: it loads rich's Markdown (0.1 s) that a command which draws no help never needs
        from typer import rich_utils

        _swap(command, "help", translated(f"cli.cmd.{name}.help", command.help), undo)
        for param in command.get_params(ctx):  # with the help option click adds
            _swap(param, "help", option_text(name, param), undo)
        for sub_name, sub in getattr(command, "commands", {}).items():
            _swap(sub, "help", translated(f"cli.cmd.{sub_name}.help", sub.help), undo)
        for attr, key in PANEL_TEXTS.items():
            _swap(rich_utils, attr, catalog(current_language()).get(key), undo)
    try:
        yield
    finally:
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


def _localized_format_help(command: Any, name: str) -> None:
    draw = command.format_help  # the bound method of the command's class

    def format_help(ctx: Any, formatter: Any) -> None:
        with in_language(command, name, ctx):
            draw(ctx, formatter)

    command.format_help = format_help
    command._diag_localized = True


class LocalizedGroup(TyperGroup):
    """The ``diag`` group: its help and every subcommand's help drawn in the current language."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None and not getattr(command, "_diag_localized", False):
            _localized_format_help(command, cmd_name)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        with in_language(self, ROOT, ctx):
            super().format_help(ctx, formatter)
