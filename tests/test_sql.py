"""The shared SQL converters: exact µs → ns whichever internal path answers."""

from __future__ import annotations

import random

import duckdb
import pytest

from parsers._sql import dur_us_to_ns, us_text_to_ns

EDGES = [
    "0.02", "1e-5", "2e-05", "-0.0005", "0.0005", "0.0015", "123.4565", "999999.9999999995", "999999.999999999",
    "-999999.9999999996", "999999999.9999999995", "1000000000.5", "12345678901234.567", "0.0000000005",
    "0.00000000049", "0.00000000051", "  12.5 ", "1.5E3", "-0", "0", "7", "9.9999999995", "9999999999.0005",
    "-9999999999.0005", "99999999.99999999949", "4.9999999995e-4", "9223372036854775.807", "N/A", "", "  ",
    "abc", "1_000",
]  # fmt: skip


def _values() -> list[str]:
    rng = random.Random(7)
    out = list(EDGES)
    for _ in range(50_000):
        digits = rng.randint(0, 12)
        decimals = rng.randint(0, 11)
        text = str(rng.randint(0, 10**digits))
        if decimals:
            text += "." + "".join(rng.choice("0123456789") for _ in range(decimals))
        out.append(rng.choice(("", "-")) + text)
    return out


def test_fast_path_equals_the_wide_decimal_everywhere() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest(?::VARCHAR[]) AS v", [_values()]).fetchall()
    clean = "NULLIF(NULLIF(trim(v), 'N/A'), '')"
    wide = f"CAST(round(TRY_CAST({clean} AS DECIMAL(38,9)) * 1000) AS BIGINT)"
    fast = us_text_to_ns(clean, strict=False)
    diffs = con.execute(f"SELECT v, {wide}, {fast} FROM t WHERE {wide} IS DISTINCT FROM {fast}").fetchall()
    assert diffs == []
    got = dict(con.execute(f"SELECT v, {dur_us_to_ns('v', strict=False)} FROM t").fetchall())
    assert got["0.0005"] == 1 and got["-0.0005"] == -1 and got["123.4565"] == 123457  # half away from zero
    assert got["999999.9999999995"] == 1_000_000_000  # past the int64 path's range: the wide cast answers
    assert got["12345678901234.567"] == 12_345_678_901_234_567
    assert got["N/A"] is None and got["abc"] is None


def test_strict_conversion_still_refuses_junk() -> None:
    with pytest.raises(duckdb.ConversionException):
        duckdb.connect().execute(f"SELECT {dur_us_to_ns(repr('abc'))}").fetchall()
