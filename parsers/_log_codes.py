"""Every error / return code a log record's text names (``codes``) and its primary ``code``, with Polars.

The shapes of codes are data (``diag/rules/log_codes.toml``).  ``codes`` lists each code once, in the order of
its first appearance in the record's raw text (header and continuation lines alike); NULL when the text names
none.  The primary ``code`` is the first code of the most specific kind: a code that says what failed, then a
generic wrapper (EZ9999 / EH9999 / EE9999 "Inner Error", ERR00100 "PTA call acl api failed", ERR99999), never a
``primary = false`` shape (a task's hex retCode).  So ``EZ9999: … runtime result = 507018`` has
``codes = [EZ9999, 507018]`` and ``code = 507018``.
"""

from __future__ import annotations

import csv
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from parsers._log_regex import ascii_regex

CODES_PATH = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_codes.toml"


@dataclass(frozen=True)
class CodeShapes:
    """The code shapes of the rules file, combined into one alternation (group i + 1 = shape i's code)."""

    combined: str
    primary: tuple[bool, ...]
    wrapper: str
    prefixes: tuple[str, ...] = ()  # per shape: put before its code (HCCL:9); "" for none
    bases: tuple[int, ...] = ()  # per shape: 16 = a hex code, stored in decimal (0x…0009 → HCCL:9)
    aliases: dict[str, str] | None = None  # a code as printed (CUDA:700, CUDA:<message>) → the catalog's code


def _catalog_aliases(path: Path, prefix: str) -> tuple[list[str], dict[str, str]]:
    """A shape's ``aliases`` catalog: its messages, longest first (for ``{messages}``), and number / message →
    code (the first row of a shared message wins: CUDA 200 and 300 both print "device kernel image is invalid")."""
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    alias: dict[str, str] = {}
    for row in rows:
        for key in filter(None, (row["number"], row["message"])):
            alias.setdefault(prefix + key, row["code"])
    return sorted({r["message"] for r in rows if r["message"]}, key=len, reverse=True), alias


@lru_cache(maxsize=2)
def load_code_shapes(path: Path = CODES_PATH) -> CodeShapes:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    parts, aliases = [], {}
    for shape in data["shape"]:
        rx = shape["pattern"]
        if "aliases" in shape:  # CUDA / NCCL: codes printed by number or message, named by the catalog
            messages, alias = _catalog_aliases(path.parent / shape["aliases"], shape.get("prefix", ""))
            rx, aliases = rx.replace("{messages}", "|".join(map(re.escape, messages))), aliases | alias
        if re.compile(rx).groups != 1 or "(?P<code>" not in rx:
            raise ValueError(f"{path.name}: shape {shape['id']!r} needs exactly one group, (?P<code>…)")
        parts.append(f"(?:{rx.replace('(?P<code>', '(')})")
    primary = tuple(bool(s.get("primary", True)) for s in data["shape"])
    prefixes = tuple(str(s.get("prefix", "")) for s in data["shape"])
    bases = tuple(int(s.get("base", 10)) for s in data["shape"])
    return CodeShapes(
        ascii_regex("|".join(parts)),
        primary,
        ascii_regex(data["wrapper"]),
        prefixes,
        bases=bases,
        aliases=aliases,
    )


def _shape_code(shapes: CodeShapes, i: int, prefix: str) -> pl.Expr:
    """Shape ``i``'s code of a hit (from the ``_groups`` of its one capturing pass), hex codes in decimal,
    behind its prefix."""
    code = pl.col("_groups").struct.field(str(i + 1))
    if (shapes.bases or (10,) * (i + 1))[i] == 16:
        code = code.str.to_integer(base=16, strict=False).cast(pl.String)
    return pl.lit(prefix) + code if prefix else code


def with_codes(rec: pl.DataFrame, shapes: CodeShapes | None = None) -> pl.DataFrame:
    """``codes`` (every code in ``raw``, in order) and ``code`` (the primary one, else the form's own)."""
    shapes = shapes or load_code_shapes()
    hits = np.flatnonzero(rec["raw"].str.contains(shapes.combined).fill_null(False).to_numpy())
    if not len(hits):
        return rec.with_columns(codes=pl.lit(None, pl.List(pl.String)))
    found = (
        rec[hits]
        .select(idx=pl.Series(hits, dtype=pl.UInt32), hit=pl.col("raw").str.extract_all(shapes.combined))
        .explode("hit")
        .with_row_index("pos")
        # every shape's group in one pass of the alternation (one str.extract per shape was a pass each)
        .with_columns(_groups=pl.col("hit").str.extract_groups(shapes.combined))
    )
    prefixes = shapes.prefixes or ("",) * len(shapes.primary)
    groups = [_shape_code(shapes, i, prefixes[i]) for i in range(len(shapes.primary))]
    secondary = [i for i, p in enumerate(shapes.primary) if not p]
    code = pl.coalesce(groups)
    found = found.with_columns(
        code=code.replace(shapes.aliases) if shapes.aliases else code,
        kind=pl.when(pl.any_horizontal([groups[i].is_not_null() for i in secondary] or [pl.lit(False)]))
        .then(3)
        .otherwise(pl.when(pl.coalesce(groups).str.contains(shapes.wrapper)).then(2).otherwise(1)),
    ).filter(pl.col("code").is_not_null())
    firsts = found.unique(["idx", "code"], keep="first", maintain_order=True)
    per_rec = firsts.group_by("idx", maintain_order=True).agg(
        codes=pl.col("code"),
        primary=pl.when(pl.col("kind") < 3).then("code").sort_by("kind", "pos").first(),
    )
    full = pl.DataFrame({"idx": np.arange(rec.height, dtype=np.uint32)}).join(
        per_rec, on="idx", how="left", maintain_order="left"
    )
    return (
        rec.with_columns(codes=full["codes"], _primary=full["primary"])
        .with_columns(code=pl.coalesce("_primary", "code"))
        .drop("_primary")
    )
