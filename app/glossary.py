"""CUDA ↔ Ascend terms for tooltips and the Glossary page, read from diag/rules/glossary.toml."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from diag.i18n import is_chinese
from diag.store import RULES_DIR

GLOSSARY_PATH: Path = RULES_DIR / "glossary.toml"


@dataclass(frozen=True)
class Term:
    term: str
    zh: str
    meaning: str
    cuda: str
    aliases: tuple[str, ...] = ()
    meaning_zh: str = ""
    cuda_zh: str = ""

    def counterpart(self) -> str:
        """The CUDA counterpart in the current language (as written where the Chinese is missing)."""
        return self.cuda_zh if is_chinese() and self.cuda_zh else self.cuda

    def explained(self) -> str:
        """The meaning in the current language (English where the Chinese is missing)."""
        return self.meaning_zh if is_chinese() and self.meaning_zh else self.meaning

    def tooltip(self) -> str:
        """The one-line help text: meaning, then the CUDA counterpart (and the Chinese term) when there is one."""
        if is_chinese() and self.meaning_zh:
            zh = f" ({self.zh})" if self.zh and self.zh != self.term else ""
            return f"**{self.term}**{zh}：{self.meaning_zh}" + (
                f" CUDA 对应：{self.counterpart()}。" if self.cuda else ""
            )
        text = f"**{self.term}**: {self.meaning}"
        if self.cuda:
            text += f" CUDA counterpart: {self.cuda}."
        if self.zh and self.zh != self.term:
            text += f" (中文: {self.zh})"
        return text


@cache
def terms(path: Path = GLOSSARY_PATH) -> tuple[Term, ...]:
    with open(path, "rb") as fh:
        raw = tomllib.load(fh)["term"]
    return tuple(
        Term(
            t["term"],
            t.get("zh", ""),
            t["meaning"],
            t.get("cuda", ""),
            tuple(t.get("aliases", ())),
            t.get("meaning_zh", ""),
            t.get("cuda_zh", ""),
        )  # fmt: skip
        for t in raw
    )


@cache
def _index() -> dict[str, Term]:
    index: dict[str, Term] = {}
    for t in terms():
        for name in (t.term, *t.aliases):
            index.setdefault(name.casefold(), t)
    return index


def lookup(term: str) -> Term | None:
    return _index().get(term.strip().casefold())


def help_for(term: str) -> str:
    """The tooltip text of ``term`` (or of the term it is an alias of); '' for a word the glossary lacks, so that
    ``help=help_for(…)`` shows no tooltip rather than a wrong one."""
    found = lookup(term)
    return found.tooltip() if found else ""


def helps_for(columns: dict[str, str]) -> dict[str, str]:
    """Column label → tooltip, for labels whose glossary term is given (``{"AI_CPU tasks": "AI_CPU"}``)."""
    return {label: text for label, term in columns.items() if (text := help_for(term))}
