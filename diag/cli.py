"""The ``diag`` command: builds the Typer app from COMMANDS and turns DiagErrors into one-line messages."""

from __future__ import annotations

import os
import sys

import typer

from diag import __version__
from diag.cli_help import LocalizedGroup
from diag.commands import COMMANDS
from diag.commands import bugreport as bugreport_command
from diag.commands import ops as ops_command
from diag.commands import scaling as scaling_command
from diag.commands._common import add_lake_option
from diag.commands._format import CONTROL_CHARS
from diag.errors import DiagError
from diag.i18n import LANGUAGES, set_language, t

app = typer.Typer(
    name="diag",
    cls=LocalizedGroup,  # --help drawn in the chosen language (diag/cli_help.py)
    help="Why is LLM inference slow or broken on Ascend NPUs, and how does it differ from CUDA?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    # an eager option's own callback runs while the arguments are parsed, before click asks for a command
    if value:
        typer.echo(f"diag {__version__}")
        raise typer.Exit()


def _set_language(value: str | None) -> str | None:
    # eager: the language is chosen before any other option's message (and before the command runs)
    if value is not None and value not in LANGUAGES:
        raise typer.BadParameter(t("cli.bad_lang", value=value))
    set_language(value)  # None: $DIAG_LANG, else the locale, else English (diag.i18n)
    return value


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
    lang: str | None = typer.Option(
        None,
        "--lang",
        help="Language of the messages and reports: zh | en (default: $DIAG_LANG, else the locale, else en).",
        is_eager=True,
        callback=_set_language,
    ),
) -> None:
    pass


for command in COMMANDS:
    command.register(app)
ops_command.register(app)  # diag ops (#20)
bugreport_command.register(app)  # diag bugreport (#21)
scaling_command.register(app)  # diag scaling (#20)
add_lake_option(app)  # --lake DIR on every read command (#23); after every registration


def main(argv: list[str] | None = None) -> int:
    set_language(None)  # $DIAG_LANG / the locale until --lang (an eager option) says otherwise
    try:
        code = app(args=argv, prog_name="diag", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except DiagError as exc:
        sys.stderr.write(f"diag: error: {_one_line(str(exc))}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(t("cli.interrupted") + "\n")
        return 130
    except Exception as exc:  # click usage errors and the like
        if _is_click_error(exc):
            sys.stderr.write(usage_error_text(exc))
            return int(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("DIAG_DEBUG"):
            raise
        # a bug, not the user's doing: one line that says so and how to see more, never a traceback
        sys.stderr.write(
            f"diag: internal error: {_one_line(f'{type(exc).__name__}: {exc}')} "
            "(set DIAG_DEBUG=1 for the traceback)\n"
        )
        return INTERNAL_ERROR


INTERNAL_ERROR = 70  # EX_SOFTWARE (sysexits.h): distinct from 1 (a DiagError) and 2 (usage)


def _one_line(text: str) -> str:
    """One line, its control characters (an escape sequence in a file name) shown as ``\\xNN``."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", " ".join(text.split()))


def usage_error_text(exc: Exception) -> str:
    """``diag: error: <click's message>`` on one line, then (for a usage error) where to find help:

        diag: error: No such option: --jsn (Possible options: --json)
        Try 'diag runs --help' for help.

    ``diag`` alone prints the help on stdout, as click does for a group called without a command (exit 2)."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        help_text = ctx.get_help()  # typer's rich help prints itself and returns ""
        sys.stdout.write(help_text + "\n" if help_text else "")
        return ""
    message = _one_line(exc.format_message())  # type: ignore[attr-defined]
    text = f"diag: error: {message}\n"
    if ctx is not None:
        text += t("cli.try_help", command=ctx.command_path) + "\n"
    elif hasattr(exc, "ctx"):  # a usage error the parser raised before it knew the command
        text += t("cli.try_help", command="diag") + "\n"
    return text


def _is_click_error(exc: BaseException) -> bool:
    """A usage error of click *or* of the click copy vendored inside typer (``typer._click``): both define a
    ``ClickException`` with ``show()`` and ``exit_code`` (2 for a bad option or value), but they are different
    classes, so an ``isinstance`` against one misses the other and a typo became a traceback."""
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


if __name__ == "__main__":
    sys.exit(main())
