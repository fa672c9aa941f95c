"""Which GPU vendor recorded a PyTorch-profiler trace (rules/platforms.toml).

Kineto writes AMD (ROCm/HIP) runs with the CUDA categories (``cuda_runtime``, ``kernel``, ``gpu_memcpy``), so the
vendor is read from what they hold: the device names, the runtime calls' names (``hipLaunchKernel`` …) or the
tracer named in the metadata.  Any one of them is enough; a trace with none stays ``cuda``.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import duckdb

from diag.store import q, sql_literal

PLATFORM_RULES = Path(__file__).resolve().parent.parent / "diag" / "rules" / "platforms.toml"
RUNTIME_CATS = ("cuda_runtime", "Runtime", "runtime", "cuda_driver")


@functools.cache
def platform_rules() -> dict[str, Any]:
    with open(PLATFORM_RULES, "rb") as fh:
        return tomllib.load(fh)


def is_rocm(
    con: duckdb.DuckDBPyConnection, events: str, meta: dict[str, Any], props: list[dict[str, Any]]
) -> bool:
    """True when the trace (its events in table ``events``: columns cat, name) was recorded on AMD GPUs."""
    rules = platform_rules()["rocm"]
    names = " ".join(str(p.get(k) or "") for p in props for k in ("name", "gcnArchName"))
    if any(re.search(r, names, re.I) for r in rules["device_name"]):
        return True
    prefixes = " OR ".join(f"starts_with(lower(name), {sql_literal(p)})" for p in rules["runtime_prefix"])
    cats = ", ".join(sql_literal(c) for c in RUNTIME_CATS)
    if q(con, f"SELECT count(*) FROM {events} WHERE cat IN ({cats}) AND ({prefixes})")[0][0]:
        return True
    meta_text = json.dumps({k: v for k, v in meta.items() if k != "deviceProperties"}, default=str).lower()
    return any(w in meta_text for w in rules["meta_words"])
