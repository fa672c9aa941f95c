"""A CSV export mapped onto one store table by header names: the machinery shared by the CSV parsers.

Each CSV format is declared in its own module as a ``CsvSpec``: which header names identify it, the aliases
versions use for the same column, which columns are required, and how each target column is computed.
Columns are always matched by name (their set and order vary with version, level and ``aic_metrics``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from parsers import _sql
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import csv_header, resolve_columns, run_csv
from parsers._sql import ident

Converter = Callable[[str], str]

MB = 1024 * 1024  # memory CSVs: MB = 1024² bytes
KB = 1024

CONVERTERS: dict[str, Converter] = {
    "ts": _sql.ts_us_to_ns,
    "ts?": lambda e: _sql.ts_us_to_ns(e, strict=False),
    "dur": _sql.dur_us_to_ns,
    "dur?": lambda e: _sql.dur_us_to_ns(e, strict=False),
    "int": _sql.as_bigint,
    "float": _sql.as_double,
    "text": _sql.as_text,
    "shapes": _sql.unquote_shapes,
    "kind": _sql.task_kind,
    "mb": lambda e: _sql.scaled_int(e, float(MB)),
    "kb": lambda e: _sql.scaled_int(e, float(KB)),
}


@dataclass(frozen=True)
class CsvSpec:
    name: str
    version: int
    table: str
    signature: tuple[str, ...]  # canonical columns that must all be present for detection
    aliases: dict[str, tuple[str, ...]]  # canonical name -> other spellings seen across versions
    select: dict[str, tuple[tuple[str, str], ...]]  # target column -> ((canonical, converter), …) first found
    required: tuple[str, ...] = ()
    constants: dict[str, str] = field(default_factory=dict)  # target column -> SQL literal
    rest_as_list: str | None = None  # target DOUBLE[] column for every unmapped column (names -> pmu_columns)
    excludes: tuple[str, ...] = ()  # header names whose presence means another format
    platform: str = "ascend"


class CsvTableParser:
    def __init__(
        self, spec: CsvSpec, after: Callable[[ParseContext, ParseResult], None] | None = None
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.version = spec.version
        self.platform = spec.platform
        self._after = after

    def detect(self, probe: Probe) -> bool:
        header = probe.header_fields()
        if len(header) < 2:
            return False
        lowered = {h.lower() for h in header}
        if any(x.lower() in lowered for x in self.spec.excludes):
            return False
        for canonical in self.spec.signature:
            names = self.spec.aliases.get(canonical) or (canonical,)
            if not any(n.lower() in lowered for n in names):
                return False
        return True

    def parse(self, ctx: ParseContext) -> ParseResult:
        spec = self.spec
        header = csv_header(ctx.path, ctx.display)
        found = resolve_columns(header, spec.aliases, spec.required or spec.signature, ctx.display)
        targets: list[str] = ["run_id", "file_id"]
        exprs: list[str] = [str(ctx.run_id), str(ctx.file_id)]
        for target, options in spec.select.items():
            expr = "NULL"
            for canonical, conv in options:
                if canonical in found:
                    expr = CONVERTERS[conv](ident(found[canonical]))
                    break
            targets.append(target)
            exprs.append(expr)
        for target, literal in spec.constants.items():
            targets.append(target)
            exprs.append(literal)
        rest: list[str] = []
        if spec.rest_as_list:
            # A list, not a MAP: building a MAP per row costs ~8x more; the names are stored once per file.
            used = set(found.values())
            rest = [h for h in header if h and h not in used]
            targets.append(spec.rest_as_list)
            exprs.append(
                "[" + ", ".join(f"TRY_CAST({ident(h)} AS DOUBLE)" for h in rest) + "]" if rest else "NULL"
            )
        cols = ", ".join(ident(t) for t in targets)
        select = ", ".join(exprs)

        def insert(source: str) -> int:
            row = ctx.con.execute(
                f"INSERT INTO {ident(spec.table)} ({cols}) SELECT {select} FROM {source}"
            ).fetchall()[0]
            return int(row[0]) if row else 0

        n, partial = run_csv(ctx.con, ctx.path, ctx.display, header, insert, lenient=ctx.lenient)
        result = ParseResult(partial=partial)
        result.add(spec.table, n)
        if spec.rest_as_list and rest:
            ctx.con.execute(
                "INSERT INTO pmu_columns (run_id, file_id, names) VALUES (?, ?, ?)",
                [ctx.run_id, ctx.file_id, rest],
            ).fetchall()
        if self._after:
            self._after(ctx, result)
        return result


def alternatives(*pairs: str) -> tuple[tuple[str, str], ...]:
    """``alternatives('start:ts', 'start_alt:ts')`` → ((canonical, converter), …)."""
    out = []
    for p in pairs:
        canonical, conv = p.rsplit(":", 1)
        out.append((canonical, conv))
    return tuple(out)
