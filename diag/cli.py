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


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True),
) -> None:
    if version:
        typer.echo(f"diag {__version__}")
        raise typer.Exit()


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
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise


if __name__ == "__main__":
    sys.exit(main())
