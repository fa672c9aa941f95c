"""Memory-from-logs accuracy on real excerpts (``tests/fixtures/memory_logs/``), per half (issue #19).

``INDEX.csv`` lists, per file and question (``what``: ``oom``, ``kv`` or ``setting``), what an expert reads in the
excerpt: the verdict and the figures (sizes as written, "60.97 GiB"; "a+b" where the message states the parts, as
CUDA's reserved = allocated + reserved-but-unallocated).  All files are ingested into one temporary store as logs of
no profile and each is asked through ``log_file`` (``diag.analyses.memory_logs``):

* ``oom``: the headline OOM event of the file (the one stating the most figures; the first on ties): its
  ``verdict`` and the seven figures (``requested_bytes`` … ``process_in_use_bytes``; one not listed must be null);
* ``kv``: ``kv_cache()``'s verdict (an empty expected verdict: null) and its figures (those not listed: null);
* ``setting``: the set of ``kind=value`` of ``memory_log_lines()``.

"Wrong claims" counts rows where diag states something false: a named verdict that is not the expected one, or a
figure with a wrong value; saying less (a null figure, ``unknown``, nothing) is a miss, not a wrong claim.

A row is right when the verdict is right AND the figures are exact (bytes equal).  The half of a file is fixed by
its name (``bench.log_accuracy.half_of``): shapes and kinds may be written against the ``train`` half only; the
``held`` half measures how they generalize.

    python bench/memory_log_accuracy.py [--half train|held|all] [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "fixtures" / "memory_logs"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_SIZE = re.compile(r"^(-?\d+(?:\.\d+)?) (B|KiB|MiB|GiB)$")


def expected_value(text: str) -> int | float | str:
    """A figure as the INDEX writes it: "60.97 GiB" → bytes (rounded as the parser rounds), "a+b" → the sum of
    the parts' bytes, "0.9" → 0.9, "6001" → 6001; anything else stays text (a setting's value)."""
    if "+" in text and all(_SIZE.match(p.strip()) for p in text.split("+")):
        return sum(int(expected_value(p.strip())) for p in text.split("+"))
    if m := _SIZE.match(text.strip()):
        return round(float(m.group(1)) * UNITS[m.group(2)])
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d+", text):
        return float(text)
    return text


def expected_figures(text: str) -> dict[str, Any]:
    pairs = [p.split("=", 1) for p in text.split(";") if p.strip()]
    return {k.strip(): expected_value(v.strip()) for k, v in pairs}


def index_rows(folder: Path = FOLDER) -> list[dict[str, str]]:
    with (folder / "INDEX.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def headline(events: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """The event that states the most figures (the first of those)."""
    if not events:
        return None
    return max(events, key=lambda e: sum(e.get(k) is not None for k in keys))  # max keeps the first on ties


def answer(store: Any, row: dict[str, str]) -> tuple[str | None, dict[str, Any]]:  # noqa: ANN401
    """(verdict, figures) diag gives for one INDEX row."""
    from diag.analyses import memory_logs as ml

    name = row["file"]
    if row["what"] == "oom":
        event = headline(ml.oom_events(store, log_file=name), ml.OOM_KEYS)
        return (event["verdict"], {k: event[k] for k in ml.OOM_KEYS}) if event else ("nothing", {})
    if row["what"] == "kv":
        kv = ml.kv_cache(store, log_file=name)
        return (kv["verdict"], {k: kv[k] for k in ml.KV_KEYS}) if kv else ("nothing", {})
    lines = ml.memory_log_lines(store, log_file=name)
    return None, {line["kind"]: line["value"] for line in lines}


def judge(store: Any, row: dict[str, str]) -> dict[str, Any]:  # noqa: ANN401
    from bench.log_accuracy import half_of

    try:
        verdict, got = answer(store, row)
    except ValueError:  # the file was not read as a log (detection): diag says nothing about it
        verdict, got = "nothing", {}
    want = expected_figures(row["expected_figures"])
    if row["what"] == "setting":  # a setting's value is compared as written
        want = {k: str(v) for k, v in want.items()}
    if row["what"] != "setting":  # every figure of the question: the ones not listed are null
        want = {k: want.get(k) for k in got} if got else want
    wrong = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
    if row["what"] == "setting":
        wrong |= {k: (None, v) for k, v in got.items() if k not in want}
    expected_verdict = row["expected_verdict"] or None
    return {
        "file": row["file"], "what": row["what"], "half": half_of(row["file"]), "expected": expected_verdict,
        "got": verdict, "verdict_ok": verdict == expected_verdict, "figures_ok": not wrong, "wrong": wrong,
    }  # fmt: skip


def outcomes(folder: Path = FOLDER) -> list[dict[str, Any]]:
    """One judgement per INDEX row, every file ingested once into a temporary store (logs of no profile)."""
    from diag.ingest import Ingestor
    from diag.store import Store

    rows = index_rows(folder)
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "memory_logs.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            ingestor.run(
                *ingestor.collect([folder / f for f in dict.fromkeys(r["file"] for r in rows)]), jobs=1
            )
        finally:
            ingestor.close()
        return [judge(store, r) for r in rows]


def _claims_wrong(result: dict[str, Any]) -> bool:
    """A named verdict other than the expected one, or a figure stated with a wrong value (saying less — a null
    figure, ``unknown``, nothing — is a miss, not a wrong claim)."""
    verdict = result["got"]
    named = verdict not in ("unknown", "nothing", None) and verdict != result["expected"]
    return named or any(got is not None for _, got in result["wrong"].values())


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    right = [r for r in results if r["verdict_ok"] and r["figures_ok"]]
    return {
        "rows": len(results),
        "right": len(right),
        "accuracy": len(right) / len(results) if results else None,
        "verdict_right": sum(r["verdict_ok"] for r in results),
        "figures_exact": sum(r["figures_ok"] for r in results),
        "wrong_claims": sum(_claims_wrong(r) for r in results),
        "misses": [r for r in results if not (r["verdict_ok"] and r["figures_ok"])],
    }


def measure(half: str = "all", folder: Path = FOLDER) -> dict[str, dict[str, Any]]:
    halves = ("train", "held") if half == "all" else (half,)
    results = outcomes(folder)
    return {h: summarize([r for r in results if r["half"] == h]) for h in halves}


def print_text(figures: dict[str, dict[str, Any]]) -> None:
    for half, f in figures.items():
        pct = "—" if f["accuracy"] is None else f"{100 * f['accuracy']:.1f} %"
        print(f"== {half}: {f['rows']} rows, right (verdict and figures) {f['right']} = {pct}; "
              f"verdict right {f['verdict_right']}, figures exact {f['figures_exact']}, "
              f"wrong claims {f['wrong_claims']}")  # fmt: skip
        for m in f["misses"]:
            wrong = ", ".join(f"{k}: want {w}, got {g}" for k, (w, g) in m["wrong"].items())
            print(
                f"  {m['file']} [{m['what']}]: verdict {m['expected']} / got {m['got']}"
                + (f"; {wrong}" if wrong else "")
            )
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("train", "held", "all"), default="all")
    parser.add_argument("--json", action="store_true", help="one JSON object: figures per half")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    figures = measure(args.half)
    if args.json:
        print(json.dumps(figures, indent=2, default=str))
    else:
        print_text(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
