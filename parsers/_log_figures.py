"""Numbers a log record states (OOM and memory messages), by name, as a JSON object: ``log_records.figures``.

The message shapes are data (``diag/rules/log_figures.toml``): a regex per wording whose named groups are the
figures; ``*_bytes`` groups are sizes as written ("57.55 GiB") and are stored in bytes, ``*_gib`` groups (bare
numbers of GiB) as ``*_bytes`` too.  ``figures`` is NULL for a record that states none, else e.g. ``{"requested_bytes": 2147483648, "device": 0, "capacity_bytes": …}``.
Only records whose text matches a shape are looked at (a few per log), with Polars.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from parsers._log_regex import ascii_regex

FIGURES_PATH = Path(__file__).resolve().parent.parent / "diag" / "rules" / "log_figures.toml"
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
_SIZE = re.compile(r"^(-?\d+(?:\.\d+)?) ?([A-Za-z]*)$")


@dataclass(frozen=True)
class FigureShape:
    id: str
    pattern: str
    names: tuple[str, ...]  # its named groups, in the pattern's order


@dataclass(frozen=True)
class FigureRules:
    shapes: tuple[FigureShape, ...]
    units: dict[str, int]

    @property
    def any(self) -> str:
        """One regex that finds a record any shape may match (the groups made non-capturing)."""
        return "|".join("(?:" + _NAMED_GROUP.sub("(?:", s.pattern) + ")" for s in self.shapes)


@lru_cache(maxsize=2)
def load_figure_rules(path: Path = FIGURES_PATH) -> FigureRules:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    shapes = []
    for s in data["shape"]:
        names = tuple(re.compile(s["pattern"]).groupindex)
        if not names:
            raise ValueError(f"{path.name}: shape {s['id']!r} has no named group")
        shapes.append(FigureShape(s["id"], ascii_regex(s["pattern"]), names))
    return FigureRules(tuple(shapes), {k: int(v) for k, v in data["units"].items()})


def figure_key(name: str) -> str:
    """The stored key of a group: ``*_gib`` (a bare number of GiB, as "(19.77/22.05 GiB)" or vLLM's "took 56.60
    GB", which is GiB) is stored as ``*_bytes``."""
    return name.removesuffix("_gib") + "_bytes" if name.endswith("_gib") else name


def _value(name: str, text: pl.Expr, units: dict[str, int]) -> pl.Expr:
    """A figure's JSON value: bytes (an integer) for a *_bytes size or *_gib number, else the number as written
    (thousands separators dropped: "158,656")."""
    if name.endswith("_gib"):
        number = text.cast(pl.Float64, strict=False) * units["GiB"]
        return number.round(0).cast(pl.Int64, strict=False).cast(pl.String)
    if not name.endswith("_bytes"):
        text = text.str.replace_all(",", "")
        whole = text.str.contains(r"^-?\d+$")
        number = text.cast(pl.Float64, strict=False).cast(pl.String)
        return pl.when(whole).then(text.cast(pl.Int64, strict=False).cast(pl.String)).otherwise(number)
    number = text.str.extract(_SIZE.pattern, 1).cast(pl.Float64, strict=False)
    unit = text.str.extract(_SIZE.pattern, 2).replace_strict(units, default=None, return_dtype=pl.Int64)
    unit = pl.when(text.str.extract(_SIZE.pattern, 2) == "").then(pl.lit(1, pl.Int64)).otherwise(unit)
    return (number * unit).round(0).cast(pl.Int64, strict=False).cast(pl.String)


def _shape_figures(raw: pl.DataFrame, shape: FigureShape, order: int, units: dict[str, int]) -> pl.DataFrame:
    """(idx, order, key, value) for each figure one shape finds in the records ``raw`` (idx, raw)."""
    sub = raw.filter(pl.col("raw").str.contains(shape.pattern))
    if sub.is_empty():
        return pl.DataFrame(
            schema={"idx": pl.UInt32, "order": pl.Int32, "key": pl.String, "value": pl.String}
        )
    groups = sub.select("idx", x=pl.col("raw").str.extract_groups(shape.pattern)).unnest("x")
    long = groups.select(
        "idx",
        kv=pl.concat_list(
            pl.struct(key=pl.lit(figure_key(n)), value=_value(n, pl.col(n), units)) for n in shape.names
        ),
    ).explode("kv")
    return (
        long.unnest("kv")
        .filter(pl.col("value").is_not_null() & ~pl.col("value").is_in(["NaN", "inf", "-inf"]))
        .select("idx", pl.lit(order, pl.Int32).alias("order"), "key", "value")
    )


def with_figures(rec: pl.DataFrame, rules: FigureRules | None = None) -> pl.DataFrame:
    """``figures``: a JSON object of every figure the shapes find in ``raw`` (an earlier shape's key wins)."""
    rules = rules or load_figure_rules()
    hits = np.flatnonzero(rec["raw"].str.contains(rules.any).fill_null(False).to_numpy())
    if not len(hits):
        return rec.with_columns(figures=pl.lit(None, pl.String))
    raw = rec[hits].select(idx=pl.Series(hits, dtype=pl.UInt32), raw=pl.col("raw"))
    found = pl.concat([_shape_figures(raw, s, i, rules.units) for i, s in enumerate(rules.shapes)])
    pairs = found.unique(["idx", "key"], keep="first", maintain_order=True)
    per_rec = pairs.group_by("idx", maintain_order=True).agg(
        figures=pl.format('"{}":{}', "key", "value").str.join(",")
    )
    full = pl.DataFrame({"idx": np.arange(rec.height, dtype=np.uint32)}).join(
        per_rec, on="idx", how="left", maintain_order="left"
    )
    figures = full.select(pl.concat_str(pl.lit("{"), "figures", pl.lit("}"))).to_series()
    return rec.with_columns(figures=figures)
