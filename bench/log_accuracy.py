"""Log diagnosis accuracy on the wild corpus (``tests/fixtures/logs_wild/``), per half (issue #16).

Every ``INDEX_*.csv`` of the folder lists excerpts of real logs pasted in public threads, with the category an
expert gives them (``expected_category``) and the line that names the root cause (``key_line``). Each file is
ingested ALONE into a fresh temporary store (the in-process ``diag.ingest.Ingestor``), and diag's answer is the
top root cause of the latest incident episode, as ``diag logs`` shows it (``log_diagnosis.log_scope``).

The half of a file is fixed by its name (``half_of``): rules may be written against the ``train`` half only; the
``held`` half measures how diagnosis generalizes.

Definitions (per half):

* diag's answer ("got"): the category of the top root cause (the most severe one, as ``diag logs`` ranks them)
  when its severity is high, medium or low; "nothing" when there is none or it is only info / noise.
  "flagged": the top root cause is at medium or high severity.
* category accuracy: share of non-noise files whose answer is right: ``got == expected_category``; an expected
  ``unclassified`` is right when diag says so (a category containing "unclassified", an honest "unclassified
  error (code X)") or flags nothing (diag says less rather than guessing).  An expected ``noise`` is right when
  nothing is flagged (noise files are counted apart: they feed the false positives).
* key-line accuracy: share of files with a ``key_line`` where it is a substring of the raw text of the first
  evidence record of the top root cause (whatever its severity); a capture tool's prefix at the start of a key line
  (a compose bar, a kubectl stamp: ``parsers/_log_grammar.CAPTURE_PREFIX``) is not looked for, records keep the
  process's line without it.
* false positives: files expected ``noise`` that get a flagged root cause, plus files whose top cause is flagged
  with a *named* category that is wrong (an ``unclassified`` file answered with a named category counts).  An
  honest "unclassified error (code X)" on a file that has a category is a miss, not a false positive: it claims
  nothing wrong (the brief: "unclassified error (code X)" beats a wrong category).

    python bench/log_accuracy.py [--half train|held|all] [--index w1] [--json] [--figures-only] [--by-category]
        [--wrap clock|rfc3339|compose|crlf|gb18030]

A rule writer measures the held half with ``--half held --figures-only``: the counts without the names of the
files it misses (the plain text and the JSON otherwise list them).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from bench/: the repository's parsers
from parsers._log_grammar import CAPTURE_PREFIX  # noqa: E402

try:  # imported as bench.log_accuracy by the tests, run as a script from bench/
    from bench.log_wrappers import WRAPPERS, wrapped_copy
except ImportError:
    from log_wrappers import WRAPPERS, wrapped_copy  # type: ignore[no-redef]

WILD = ROOT / "tests" / "fixtures" / "logs_wild"
_CAPTURED = re.compile("^" + CAPTURE_PREFIX)  # a capture tool's prefix at the start of a line
FLAGGED = ("high", "medium")
HALVES = ("train", "held")


def half_of(file: str) -> str:
    """``held`` or ``train``, fixed by the file's name so that no one picks which files are held aside."""
    return "held" if int(hashlib.sha256(file.encode()).hexdigest()[:8], 16) % 2 == 1 else "train"


def index_rows(folder: Path = WILD, index: str | None = None) -> list[dict[str, str]]:
    """Every row of every ``INDEX_*.csv`` in ``folder`` (only ``INDEX_<index>.csv`` when given), in name order."""
    rows: list[dict[str, str]] = []
    for index_file in sorted(folder.glob(f"INDEX_{index or '*'}.csv")):
        with index_file.open(encoding="utf-8", newline="") as fh:
            rows.extend(csv.DictReader(fh))
    return rows


@dataclass
class Outcome:
    file: str
    half: str
    expected: str
    got: str  # the top root cause's category (high / medium / low severity), else 'nothing'
    severity: str | None  # the top root cause's severity (flagged or not); None: no root cause
    category_ok: bool
    key_line_ok: bool | None  # None: no key line expected (noise)
    false_positive: bool


def diagnose(path: Path) -> tuple[str | None, str | None, str]:
    """(category, severity, first evidence raw text) of diag's top root cause of ``path`` ingested alone."""
    from diag.analyses.log_diagnosis import log_scope
    from diag.ingest import Ingestor
    from diag.store import Store

    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "wild.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            ingestor.run(*ingestor.collect([path]), jobs=1)
        finally:
            ingestor.close()
        # a rule the regex engine refuses fails the whole ingest: never read that as "nothing found"
        failed = store.con.execute("SELECT message FROM files WHERE status = 'failed'").fetchall()
        if failed:
            raise RuntimeError(f"{path.name}: ingest failed: {failed[0][0]}")
        causes = log_scope(store).causes
    if not causes:
        return None, None, ""
    top = causes[0]
    return top.category, top.severity, top.evidence[0].raw if top.evidence else ""


def _category_matches(expected: str, got: str, flagged: bool) -> bool:
    if expected == "noise":
        return not flagged
    if expected == "unclassified":
        return not flagged or "unclassified" in got
    return got == expected


def judge(row: dict[str, str], folder: Path = WILD, wrap: str = "none") -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        category, severity, raw = diagnose(wrapped_copy(folder / row["file"], wrap, Path(tmp)))
    flagged = severity in FLAGGED
    got = category if category and severity in (*FLAGGED, "low") else "nothing"
    expected, key = row["expected_category"], row["key_line"]
    # a record keeps the process's line without what a capture tool put before it (a compose bar, a kubectl
    # stamp), so a key line copied from such a capture is looked for without it
    key = _CAPTURED.sub("", key) if key else key
    ok = _category_matches(expected, got, flagged)
    return Outcome(
        file=row["file"],
        half=half_of(row["file"]),
        expected=expected,
        got=got,
        severity=severity,
        category_ok=ok,
        key_line_ok=(key in raw) if key else None,
        false_positive=flagged and not ok and (expected == "noise" or "unclassified" not in got),
    )


def summarize(outcomes: list[Outcome]) -> dict[str, object]:
    """Figures of one half: counts, category / key-line accuracy (0–1), false positives, misses."""
    graded = [o for o in outcomes if o.expected != "noise"]
    keyed = [o for o in outcomes if o.key_line_ok is not None]
    cat_ok = sum(o.category_ok for o in graded)
    key_ok = sum(bool(o.key_line_ok) for o in keyed)
    return {
        "files": len(outcomes),
        "noise_files": len(outcomes) - len(graded),
        "category_accuracy": cat_ok / len(graded) if graded else None,
        "category_hits": cat_ok,
        "key_line_accuracy": key_ok / len(keyed) if keyed else None,
        "key_line_hits": key_ok,
        "false_positives": sum(o.false_positive for o in outcomes),
        "by_category": by_category(outcomes),
        "misses": [asdict(o) for o in outcomes if not o.category_ok or o.key_line_ok is False],
    }


def by_category(outcomes: list[Outcome]) -> dict[str, dict[str, object]]:
    """Per expected category: files, category hits, key-line hits and what the misses were answered with
    (``got`` counts) -- class-level figures that name no file, so a rule writer may read them for the held half."""
    table: dict[str, dict[str, object]] = {}
    for o in sorted(outcomes, key=lambda o: o.expected):
        row = table.setdefault(
            o.expected, {"files": 0, "category_hits": 0, "key_line_hits": 0, "answered_instead": {}}
        )
        row["files"] += 1  # type: ignore[operator]
        row["category_hits"] += o.category_ok  # type: ignore[operator]
        row["key_line_hits"] += bool(o.key_line_ok)  # type: ignore[operator]
        if not o.category_ok:
            instead = row["answered_instead"]
            instead[o.got] = instead.get(o.got, 0) + 1  # type: ignore[union-attr,index,attr-defined]
    return table


def measure(
    half: str = "all", folder: Path = WILD, index: str | None = None, wrap: str = "none"
) -> dict[str, dict[str, object]]:
    """Per half asked (``train``, ``held`` or both for ``all``): ``summarize`` of its files (of one index's
    files when ``index`` is given: ``w1`` reads ``INDEX_w1.csv``), each rewritten first as the capture tool
    ``wrap`` would have saved it (``log_wrappers.WRAPPERS``)."""
    halves = HALVES if half == "all" else (half,)
    rows = [r for r in index_rows(folder, index) if half_of(r["file"]) in halves]
    outcomes = [judge(r, folder, wrap) for r in rows]
    return {h: summarize([o for o in outcomes if o.half == h]) for h in halves}


def _pct(x: object) -> str:
    return "-" if x is None else f"{100 * float(x):.1f} %"  # type: ignore[arg-type]


def print_text(figures: dict[str, dict[str, object]], show_categories: bool = False) -> None:
    for half, f in figures.items():
        print(f"== {half}: {f['files']} files ({f['noise_files']} noise)")
        print(f"category accuracy  {_pct(f['category_accuracy'])}  ({f['category_hits']})")
        print(f"key-line accuracy  {_pct(f['key_line_accuracy'])}  ({f['key_line_hits']})")
        print(f"false positives    {f['false_positives']}")
        if show_categories:
            print(f"{'expected category':<22} {'files':>5} {'cat':>4} {'key':>4}  answered instead")
            for name, row in f["by_category"].items():  # type: ignore[union-attr]
                instead = ", ".join(
                    f"{g} {n}" for g, n in sorted(row["answered_instead"].items(), key=lambda x: -x[1])
                )
                print(
                    f"{name:<22} {row['files']:>5} {row['category_hits']:>4} {row['key_line_hits']:>4}  {instead}"
                )
        misses = f.get("misses")
        if misses:
            print(f"{'file':<48} {'expected':<18} {'got':<18} key line")
            for m in misses:  # type: ignore[attr-defined]
                key = {True: "found", False: "not found", None: "-"}[m["key_line_ok"]]
                print(f"{m['file']:<48} {m['expected']:<18} {m['got']:<18} {key}")
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("train", "held", "all"), default="all")
    parser.add_argument("--index", help="only the files of INDEX_<INDEX>.csv (e.g. w1); default: every index")
    parser.add_argument("--json", action="store_true", help="one JSON object: figures per half")
    parser.add_argument(
        "--figures-only",
        action="store_true",
        help="no list of misses (file names): how a rule writer measures the held half without learning its files",
    )
    parser.add_argument(
        "--by-category",
        action="store_true",
        help="a table per expected category (files, hits, answered instead)",
    )
    parser.add_argument(
        "--wrap",
        choices=["none", *sorted(WRAPPERS)],
        default="none",
        help="rewrite every file as a capture tool saves it first (kubectl / docker stamps, compose prefix, CRLF, GB18030)",
    )
    args = parser.parse_args(argv)
    figures = measure(args.half, index=args.index, wrap=args.wrap)
    if args.figures_only:
        figures = {half: {k: v for k, v in f.items() if k != "misses"} for half, f in figures.items()}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print_text(figures, show_categories=args.by_category)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
