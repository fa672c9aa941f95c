"""A CSV export mapped onto one store table by header names: the machinery shared by the CSV parsers.

Each CSV format is declared in its own module as a ``CsvSpec``: which header names identify it, the aliases
versions use for the same column, which columns are required, and how each target column is computed.
Columns are always matched by name (their set and order vary with version, level and ``aic_metrics``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from diag.schema import read_name
from diag.store import sql_literal
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

# The strict (first) read types these columns in DuckDB's CSV reader, which converts them ~2× cheaper than a
# TRY_CAST over text, with the exporters' null markers ('N/A', '') as NULL.  A value the reader cannot type
# (text in a number column, an integer past HUGEINT) fails the strict read, and the lenient retry reads every
# column as text with the CONVERTERS above: the same rows and values either way, the retry only slower.
# Integers are read as HUGEINT so that UINT64_MAX, the exporters' 'invalid', still reads and becomes NULL.
TYPED: dict[str, tuple[str, Converter]] = {
    "int": ("HUGEINT", lambda e: f"NULLIF(TRY_CAST({e} AS BIGINT), 4294967295)"),
    "float": ("DOUBLE", lambda e: e),
}
REST_TYPE = "DOUBLE"  # rest_as_list columns: TRY_CAST(text AS DOUBLE) on the lenient read


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
        chosen = self._chosen(found)
        used = set(found.values())
        rest = [h for h in header if h and h not in used] if spec.rest_as_list else []
        types = {} if ctx.lenient else typed_columns(header, chosen, rest)
        targets: list[str] = ["run_id", "file_id"]
        exprs: list[str] = [str(ctx.run_id), str(ctx.file_id)]
        for target, pick in chosen.items():
            targets.append(target)
            if pick is None:
                exprs.append("NULL")
            elif pick[0] in types:
                exprs.append(TYPED[pick[1]][1](ident(pick[0])))
            else:
                exprs.append(CONVERTERS[pick[1]](ident(pick[0])))
        for target, literal in spec.constants.items():
            targets.append(target)
            exprs.append(literal)
        if spec.rest_as_list:
            # A list, not a MAP: building a MAP per row costs ~8x more; the names are stored once per file.
            targets.append(spec.rest_as_list)
            cells = [ident(h) if h in types else f"TRY_CAST({ident(h)} AS DOUBLE)" for h in rest]
            exprs.append("[" + ", ".join(cells) + "]" if rest else "NULL")
        cols = ", ".join(ident(t) for t in targets)
        select = ", ".join(exprs)

        def insert(source: str) -> int:
            row = ctx.con.execute(
                f"INSERT INTO {ident(spec.table)} ({cols}) SELECT {select} FROM {typed_source(source, types)}"
            ).fetchall()[0]
            return int(row[0]) if row else 0

        n, partial = run_csv(ctx.con, ctx.path, ctx.display, header, insert, lenient=ctx.lenient)
        result = ParseResult(partial=partial)
        result.add(read_name(spec.table), n)
        if spec.rest_as_list and rest:
            ctx.con.execute(
                "INSERT INTO pmu_columns (run_id, file_id, names) VALUES (?, ?, ?)",
                [ctx.run_id, ctx.file_id, rest],
            ).fetchall()
        if self._after:
            self._after(ctx, result)
        return result

    def _chosen(self, found: dict[str, str]) -> dict[str, tuple[str, str] | None]:
        """Target column → (header name, converter) of its first alternative the file has, or None."""
        out: dict[str, tuple[str, str] | None] = {}
        for target, options in self.spec.select.items():
            out[target] = next(((found[c], conv) for c, conv in options if c in found), None)
        return out


def typed_columns(
    header: list[str], chosen: dict[str, tuple[str, str] | None], rest: list[str]
) -> dict[str, str]:
    """Header name → the type the strict read gives it: a column every use of which converts the same typed
    way (a column also read as text stays text); names that occur twice in the header stay text."""
    uses: dict[str, set[str]] = {}
    for pick in chosen.values():
        if pick is not None:
            uses.setdefault(pick[0], set()).add(pick[1])
    for h in rest:
        uses.setdefault(h, set()).add("rest")
    out: dict[str, str] = {}
    for name, convs in uses.items():
        if header.count(name) != 1 or len(convs) != 1:
            continue
        conv = next(iter(convs))
        if conv == "rest":
            out[name] = REST_TYPE
        elif conv in TYPED:
            out[name] = TYPED[conv][0]
    return out


def typed_source(source: str, types: dict[str, str]) -> str:
    """``parsers._io.csv_source``'s all-text read with ``types`` given to those columns and 'N/A' read as NULL."""
    if not types:
        return source
    for name, sql_type in types.items():
        for lead in ("{", ", "):
            typed = source.replace(
                f"{lead}{sql_literal(name)}: 'VARCHAR'", f"{lead}{sql_literal(name)}: '{sql_type}'", 1
            )
            if typed != source:
                source = typed
                break
    return source[: source.rindex(")")] + ", nullstr=['N/A', ''])"


def alternatives(*pairs: str) -> tuple[tuple[str, str], ...]:
    """``alternatives('start:ts', 'start_alt:ts')`` → ((canonical, converter), …)."""
    out = []
    for p in pairs:
        canonical, conv = p.rsplit(":", 1)
        out.append((canonical, conv))
    return tuple(out)
