"""Literals a rule's regex cannot match without: one Aho-Corasick pass over a block finds, per record, the rules
that may match it, so that each rule's regex runs only on its own candidates (``parsers/_log_rules.classify``).

``required_literals(pattern)`` returns strings such that every match of ``pattern`` contains at least one of
them, compared ASCII-case-blind; ``None`` when no such set is known (the rule is then tried on every record).
Sound rather than complete: a literal is only ever shortened or dropped, never guessed.

* Read with Python's ``re`` parser (the rules are written for both ``re`` and Rust's regex); a pattern it
  cannot read gives ``None``.
* A sequence needs every item: its literal set is that of the item with the longest shortest literal; an
  alternation needs one branch: the union of its branches' sets (``None`` if one branch has none); a group or a
  repeat of at least one needs its content; anything else (classes, anchors, optional repeats) needs nothing.
* Only ASCII survives (any substring of a needed literal is needed too): the longest ASCII run of a literal is
  kept.  Where case is folded, Rust's Unicode case folding also matches ``k`` to the Kelvin sign and ``s`` to
  the long s (the only non-ASCII folds of ASCII letters), which ASCII-case-blind matching misses: the caller
  tries a folded rule on every record holding one of ``FOLDED_INTO_ASCII``.
* A literal shorter than ``MIN_LITERAL`` would hit nearly every record: such a set counts as none.
"""

from __future__ import annotations

import re
from functools import lru_cache

LEVELS = "ERROR|WARNING|INFO|DEBUG|EVENT|TRACE"  # the plog levels (parsers._log_grammar, parsers.cann_log)
# What a capture tool puts before a saved line (parsers._log_grammar.CAPTURE_PREFIX, parsers.cann_log._CONSOLE_CUT): an
# RFC 3339 stamp (kubectl logs --timestamps, docker logs -t) or a log viewer's clock, and docker compose's bar.
CAPTURE_STAMP = r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) |\d\d:\d\d:\d\d\.\d{3} )"
CAPTURE_BAR = r"[\w.-]{1,64} +\| "

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _parser
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _parser  # type: ignore[no-redef]

MIN_LITERAL = 3
_ASCII_RUN = re.compile(r"[\x00-\x7f]+")
FOLDED_INTO_ASCII = ("\u212a", "\u017f")  # KELVIN SIGN (k under (?i)), LATIN SMALL LETTER LONG S (s)


def _usable(text: str) -> str | None:
    """The longest part of ``text`` that ASCII-case-blind matching finds wherever the regex finds ``text``."""
    best = max(_ASCII_RUN.findall(text), key=len, default="")
    return best.lower() if len(best) >= MIN_LITERAL else None


def _weakest(lits: frozenset[str]) -> int:
    return min(map(len, lits))


def _of_sequence(items: list) -> frozenset[str] | None:
    """The best literal set of a sequence of parsed items (every item is needed)."""
    choices: list[frozenset[str]] = []
    run: list[str] = []

    def close_run() -> None:
        if run and (lit := _usable("".join(run))):
            choices.append(frozenset([lit]))
        run.clear()

    for op, arg in items:
        if op is _c.LITERAL:
            run.append(chr(arg))
            continue
        close_run()
        if (lits := _of_item(op, arg)) is not None:
            choices.append(lits)
    close_run()
    return max(choices, key=_weakest, default=None)


def _of_item(op, arg) -> frozenset[str] | None:  # noqa: ANN001 - re's parse tree
    if op is _c.SUBPATTERN:
        return _of_sequence(
            list(arg[-1])
        )  # (group, flags added, flags removed, content): case is ignored anyway
    if op is _c.BRANCH:
        out: set[str] = set()
        for branch in arg[1]:
            lits = _of_sequence(list(branch))
            if lits is None:
                return None
            out |= lits
        return frozenset(out)
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        low, _high, content = arg
        return _of_sequence(list(content)) if low >= 1 else None
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _of_sequence(list(arg))
    return None  # a class, an anchor, a look-around, a back-reference: nothing certain


@lru_cache(maxsize=512)
def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Lower-case ASCII strings of which every match of ``pattern`` contains one (ASCII case aside), or None."""
    try:
        parsed = _parser.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    lits = _of_sequence(list(parsed))
    return tuple(sorted(lits)) if lits else None
