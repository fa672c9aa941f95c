"""The ``diag`` command: builds the Typer app from COMMANDS and turns DiagErrors into one-line messages."""

from __future__ import annotations

import sys

import typer

from diag import __version__
from diag.commands import COMMANDS
from diag.errors import DiagError

app = typer.Typer(
    name="diag",
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


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    pass


for command in COMMANDS:
    command.register(app)


def main(argv: list[str] | None = None) -> int:
    try:
        code = app(args=argv, standalone_mode=False)
        return code if isinstance(code, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except DiagError as exc:
        sys.stderr.write(f"diag: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("diag: interrupted\n")
        return 130
    except Exception as exc:  # click usage errors and the like
        if _is_click_error(exc):
            exc.show()  # type: ignore[attr-defined]
            return int(exc.exit_code)  # type: ignore[attr-defined]
        raise


def _is_click_error(exc: BaseException) -> bool:
    """A usage error of click *or* of the click copy vendored inside typer (``typer._click``): both define a
    ``ClickException`` with ``show()`` and ``exit_code`` (2 for a bad option or value), but they are different
    classes, so an ``isinstance`` against one misses the other and a typo became a traceback."""
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


if __name__ == "__main__":
    sys.exit(main())
