"""The parser protocol: what the registry and the ingest need from one format."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import duckdb

    from diag.store import Store

PROBE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Probe:
    """What sniffing sees of a file: its name, size and first bytes."""

    path: Path
    size: int
    head: bytes

    @classmethod
    def of(cls, path: Path) -> Probe:
        with open(path, "rb") as fh:
            head = fh.read(PROBE_BYTES)
        return cls(path=path, size=path.stat().st_size, head=head)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def text(self) -> str:
        return self.head.decode("utf-8", errors="replace").lstrip("\ufeff")

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0].rstrip("\r")

    def header_fields(self) -> list[str]:
        """The CSV header, split on commas (profiler headers never quote their names)."""
        return [h.strip().strip('"') for h in self.first_line.split(",")]

    def json_start(self) -> str:
        return self.text.lstrip()[:1]


@dataclass
class ParseContext:
    """Everything a parser may touch: the open transaction, the ids to stamp rows with, the run to update."""

    store: Store
    con: duckdb.DuckDBPyConnection
    path: Path  # readable local file (archives are already extracted)
    display: str  # what to call the file in messages
    run_id: int
    file_id: int
    tmpdir: Path
    lenient: bool = False  # a strict CSV read of this file failed: read it again, skipping malformed rows


@dataclass
class ParseResult:
    rows: dict[str, int] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)  # rows of other files this file superseded
    partial: str | None = None  # set when only a prefix of the file could be stored; says where it broke
    notes: list[str] = field(default_factory=list)

    def add(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + int(n)


class Parser(Protocol):
    name: str
    version: int  # bump to make the ingest re-parse files stored by an older version
    platform: str

    def detect(self, probe: Probe) -> bool: ...

    def parse(self, ctx: ParseContext) -> ParseResult: ...
