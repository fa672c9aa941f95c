"""SQL value expressions shared by the parsers: exact µs→ns, N/A as null, unit conversions.

Ascend text exports write absolute times as epoch µs with 3 decimals (= ns), sometimes with a trailing TAB,
and use ``N/A`` as the null marker.  A float64 cannot hold such a timestamp to the ns, so times and
durations go through DECIMAL (exact, rounded half away from zero to the ns).
"""

from __future__ import annotations

from diag.store import sql_literal

_WS = "' ' || chr(9) || chr(13) || chr(10)"


def ident(name: str) -> str:
    """Quote a column name as written in a header (they hold spaces, parentheses, %)."""
    return '"' + name.replace('"', '""') + '"'


def clean(expr: str) -> str:
    """Trimmed text with the exporters' null markers ('', 'N/A') as NULL (timestamps carry a trailing TAB)."""
    return f"NULLIF(NULLIF(trim({expr}, {_WS}), 'N/A'), '')"


def bare(expr: str) -> str:
    """The null markers as NULL, untrimmed: for columns the exporters never pad (numeric casts ignore spaces)."""
    return f"NULLIF(NULLIF({expr}, 'N/A'), '')"


def ts_us_to_ns(expr: str, strict: bool = True) -> str:
    """Absolute µs timestamp (decimal string) → exact int64 ns.

    The exporters' usual form has exactly 3 decimals ('1736405443881410.320'): dropping the dot is the
    exact answer and ~8× cheaper than a DECIMAL cast, which remains the path for every other form.
    """
    cast = "CAST" if strict else "TRY_CAST"
    v = clean(expr)
    return (
        f"CASE WHEN {v}[-4] = '.' AND NOT contains({v}, 'e') THEN {cast}(replace({v}, '.', '') AS BIGINT) "
        f"ELSE {_in_range(v, strict, f'CAST(round({cast}({v} AS DECIMAL(38,9)) * 1000) AS BIGINT)')} END"
    )


# |µs| under which × 1000 stays inside DECIMAL(38,9): past it DuckDB raises an overflow, not a NULL
_MAX_US = "1e20"


def _in_range(v: str, strict: bool, exact: str) -> str:
    """``exact`` (µs → ns through DECIMAL), lenient when not ``strict``: 1e30 or a value past int64 is NULL."""
    if strict:
        return exact
    lenient = exact.replace("CAST(round(", "TRY_CAST(round(", 1)
    return f"CASE WHEN abs(TRY_CAST({v} AS DOUBLE)) < {_MAX_US} THEN {lenient} END"


def dur_us_to_ns(expr: str, strict: bool = True) -> str:
    """µs (decimal text, maybe '2e-05') → int64 ns, rounded half away from zero, exactly."""
    return us_text_to_ns(clean(expr), strict)


def us_text_to_ns(v: str, strict: bool = True) -> str:
    """µs text → int64 ns through DECIMAL(·,9), exactly.

    DECIMAL(15,9) computes in int64 and is ~6x cheaper than DECIMAL(38,9)'s int128; it holds |µs| < 1e6, and
    where it does not (a longer span, junk text) the wide cast decides.  Both round the same way
    (tests/test_sql.py compares them on 50k values), so which one answered never shows.
    """
    cast = "CAST" if strict else "TRY_CAST"
    wide = _in_range(v, strict, f"CAST(round({cast}({v} AS DECIMAL(38,9)) * 1000) AS BIGINT)")
    return f"coalesce(CAST(round(TRY_CAST({v} AS DECIMAL(15,9)) * 1000) AS BIGINT), {wide})"


def scaled_int(expr: str, factor: float, strict: bool = False) -> str:
    """A decimal quantity in some unit → int64 in the base unit (ms→ns: 1e6, MB→bytes: 1048576)."""
    cast = "CAST" if strict else "TRY_CAST"
    return f"CAST(round({cast}({clean(expr)} AS DOUBLE) * {factor!r}) AS BIGINT)"


def as_bigint(expr: str, sentinel_null: bool = True) -> str:
    """Integer column; UINT32_MAX / UINT64_MAX are the exporters' 'invalid' sentinels (and do not fit BIGINT)."""
    value = f"TRY_CAST({bare(expr)} AS BIGINT)"
    return f"NULLIF({value}, 4294967295)" if sentinel_null else value


def as_double(expr: str) -> str:
    return f"TRY_CAST({bare(expr)} AS DOUBLE)"


def as_text(expr: str) -> str:
    return bare(expr)


def unquote_shapes(expr: str) -> str:
    """Shape cells carry a literal pair of quotes inside the CSV quoting: '"4096,12288"' → '4096,12288'."""
    return f"NULLIF(trim({bare(expr)}, '\"'), '')"


def _task_kind_rules() -> list[tuple[str, str]]:
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "diag" / "rules" / "task_kinds.csv"
    with open(path, encoding="utf-8") as fh:
        rows = [r for r in csv.reader(line for line in fh if not line.startswith("#"))]
    return [(r[0].strip().upper(), r[1].strip()) for r in rows[1:] if len(r) >= 2]


def task_kind(expr: str) -> str:
    """Normalised task kind, from the rules file diag/rules/task_kinds.csv compiled into one CASE.

    (A CASE costs nothing per row; a join or correlated lookup per row was the slowest part of an insert.)
    """
    v = f"upper({clean(expr)})"
    whens = " ".join(f"WHEN {sql_literal(t)} THEN {sql_literal(k)}" for t, k in _task_kind_rules())
    return f"CASE WHEN {clean(expr)} IS NULL THEN NULL ELSE (CASE {v} {whens} ELSE 'OTHER' END) END"
