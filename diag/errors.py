"""One error hierarchy; the CLI turns each into a one-line message and an exit code."""

from __future__ import annotations

from pathlib import Path


class DiagError(Exception):
    """Base of every error diag reports to a user."""

    exit_code = 1


class BadInputError(DiagError):
    """A file that cannot be read as what it claims to be. Always names the file and the reason."""

    exit_code = 2

    def __init__(self, path: str | Path, reason: str, offset: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.offset = offset
        where = f" (at byte {offset})" if offset is not None else ""
        super().__init__(f"{self.path}: {reason}{where}")


class UnsupportedFormatError(BadInputError):
    """No parser recognises the file."""


class FileTooLargeError(BadInputError):
    """The file exceeds the configured size cap."""


class ArchiveError(BadInputError):
    """An archive that is unsafe or broken (path traversal, links, bombs, too many members)."""


class StoreError(DiagError):
    """The database cannot be opened or written."""

    exit_code = 3


class DatabaseBusyError(StoreError):
    """Another process holds the database's write lock for longer than the wait allowed."""

    exit_code = 4
