"""The device table (``diag/rules/devices.toml``): memory capacity, HBM bandwidth and dense peak TFLOPS of each
Ascend NPU / NVIDIA GPU, and which device a text or a stored run names.

A ``[[device]]`` row is one device as the framework sees it (one NPU die, one GPU). A ``[[family]]`` row is a
name that does not say which member it is ("Ascend910B", "H100"): it keeps only the figures all its members
share (so an unknown variant gets no peak it may not have) and its memory when the members agree.

Matching: each row's ``pattern`` is a regex over lower-case text, as a whole word (an optional leading "8x" is
allowed). Where several rows match the same place in a text, the longest match wins ("a100-sxm4-40gb" over
"a100"), then the row that comes first in the file.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb

from diag.i18n import t

DEVICES_PATH = Path(__file__).parent / "rules" / "devices.toml"
GIB = 1 << 30

# Which file of a run wrote runs.device_name, by the parser that stored it (first found wins).
_NAME_SOURCES = (  # parser → the text key (device_source.*) naming where it records the device
    ("ascend_profiler_db", "npu_info"),
    ("kineto_trace", "kineto"),
    ("nsys_sqlite", "nsys"),
)


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    platform: str  # ascend | cuda
    memory_bytes: int | None  # what the framework sees as the device's total memory
    hbm_gbps: float | None  # peak memory bandwidth, GB/s (10^9 bytes/s)
    tflops: dict[str, float] = field(default_factory=dict, hash=False)  # dense peak per dtype: fp16, bf16 …
    source: str = ""
    note: str = ""
    pattern: str = ""
    nominal_gib: float | None = None  # the datasheet's capacity ("64 GB" of HBM = 64 GiB)
    members: tuple[str, ...] = ()  # for a family row: the device keys it may be
    # the Ascend vector unit's peak per dtype (AI Vector cores), for ops that run there
    vector_tflops: dict[str, float] = field(default_factory=dict, hash=False)
    vector_source: str = ""

    @property
    def memory_gib(self) -> float | None:
        return self.memory_bytes / GIB if self.memory_bytes else None

    @property
    def capacity_bytes(self) -> int | None:
        """What the framework sees where known, else the nominal size (a family whose members differ: None)."""
        if self.memory_bytes:
            return self.memory_bytes
        return int(self.nominal_gib * GIB) if self.nominal_gib else None

    def peak_tflops(self, dtype: str | None) -> float | None:
        """Dense peak for a dtype as a file spells it ("DT_BF16", "FLOAT16", "torch.float8_e4m3fn"), else None."""
        key = dtype_key(dtype)
        return self.tflops.get(key) if key else None

    def vector_peak_tflops(self, dtype: str | None) -> float | None:
        """The vector unit's peak for a dtype (Ascend AI Vector cores), else None."""
        key = dtype_key(dtype)
        return self.vector_tflops.get(key) if key else None


@cache
def _word(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9])(?:\d+x)?(?:{pattern})(?![a-z0-9])")


def _row(raw: dict[str, Any]) -> Device:
    tflops = {k.removeprefix("tflops_"): float(v) for k, v in raw.items() if k.startswith("tflops_")}
    vector = {
        k.removeprefix("vector_tflops_"): float(v) for k, v in raw.items() if k.startswith("vector_tflops_")
    }
    memory = raw.get("memory_bytes")
    return Device(
        key=raw["key"],
        name=raw["name"],
        platform=raw["platform"],
        memory_bytes=int(memory) if memory else None,
        hbm_gbps=float(raw["hbm_gbps"]) if raw.get("hbm_gbps") else None,
        tflops=tflops,
        source=raw.get("source", ""),
        note=raw.get("note", ""),
        pattern=raw.get("pattern", ""),
        nominal_gib=raw.get("nominal_gib") or None,  # as written (64 stays an int in JSON)
        vector_tflops=vector,
        vector_source=raw.get("vector_source", ""),
    )


def _family(raw: dict[str, Any], by_key: dict[str, Device]) -> Device:
    """A family row: the members' shared figures only (memory, bandwidth, each peak where all agree)."""
    members = [by_key[k] for k in raw["members"]]

    def shared(values: list[Any]) -> Any:
        return values[0] if values and all(v == values[0] for v in values) else None

    dtypes = set.intersection(*(set(m.tflops) for m in members)) if members else set()
    tflops = {d: v for d in sorted(dtypes) if (v := shared([m.tflops[d] for m in members])) is not None}
    vdtypes = set.intersection(*(set(m.vector_tflops) for m in members)) if members else set()
    vector = {
        d: v for d in sorted(vdtypes) if (v := shared([m.vector_tflops[d] for m in members])) is not None
    }
    return Device(
        key=raw["key"],
        name=raw["name"],
        platform=raw["platform"],
        memory_bytes=shared([m.memory_bytes for m in members]),
        hbm_gbps=shared([m.hbm_gbps for m in members]),
        tflops=tflops,
        source="; ".join(dict.fromkeys(m.source for m in members)),
        note=raw.get("note", ""),
        pattern=raw["pattern"],
        nominal_gib=shared([m.nominal_gib for m in members]),
        members=tuple(raw["members"]),
        vector_tflops=vector,
    )


@cache
def _raw(path: Path) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


@cache
def _dtype_aliases(path: Path = DEVICES_PATH) -> dict[str, str]:
    return {alias: key for key, aliases in _raw(path).get("dtypes", {}).items() for alias in aliases}


def dtype_key(dtype: str | None) -> str | None:
    """The peak key (fp16, bf16, fp32, tf32, int8, fp8) of a dtype spelling, else None."""
    if not dtype:
        return None
    low = dtype.strip().lower()
    for prefix in ("torch.", "c10::", "dt_", "acl_"):
        low = low.removeprefix(prefix)
    return _dtype_aliases().get(low)


@cache
def _load(path: Path) -> tuple[Device, ...]:
    raw = _raw(path)
    rows = [_row(r) for r in raw.get("device", [])]
    by_key = {d.key: d for d in rows}
    return tuple(rows) + tuple(_family(f, by_key) for f in raw.get("family", []))


def devices(path: Path = DEVICES_PATH) -> tuple[Device, ...]:
    """Every row of the device table (devices, then families), loaded once."""
    return _load(Path(path))


def device(key: str) -> Device | None:
    return next((d for d in devices() if d.key == key), None)


def find_devices(text: str | None) -> list[Device]:
    """Devices named in ``text``, in the order they appear; overlapping names resolved to the most specific."""
    if not text:
        return []
    low = text.lower()
    hits: list[tuple[int, int, int, Device]] = []  # start, -length, table order, device
    for order, dev in enumerate(devices()):
        if dev.pattern:
            hits += [
                (m.start(), -(m.end() - m.start()), order, dev) for m in _word(dev.pattern).finditer(low)
            ]
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Device]] = []
    for start, neg_len, _, dev in sorted(hits, key=lambda h: (h[1], h[2], h[0])):
        end = start - neg_len
        if any(start < e and s < end for s, e in taken):
            continue
        taken.append((start, end))
        if dev.key not in [d.key for _, d in found]:
            found.append((start, dev))
    return [d for _, d in sorted(found, key=lambda f: f[0])]


def match_device(text: str | None) -> Device | None:
    """The one device ``text`` names (the first, when it names several), else None."""
    found = find_devices(text)
    return found[0] if found else None


def device_for_run(con: Any, run_id: int) -> tuple[Device | None, str]:
    """The run's device from its stored device name, and a phrase saying where that came from."""
    cur: duckdb.DuckDBPyConnection = con.cursor()
    row = cur.execute("SELECT device_name FROM runs WHERE run_id = ?", [run_id]).fetchone()
    name = row[0] if row else None
    if not name:
        return None, t("device_source.not_recorded")
    parsers = {
        p for (p,) in cur.execute("SELECT DISTINCT parser FROM files WHERE run_id = ?", [run_id]).fetchall()
    }
    key = next((key for parser, key in _NAME_SOURCES if parser in parsers), "profile")
    where = t(f"device_source.{key}")
    dev = match_device(name)
    if dev is None:
        return None, t("device_source.not_in_table", name=name, where=where)
    return dev, t("device_source.named", name=name, where=where) + (
        t("device_source.no_variant") if dev.members else ""
    )
