"""What a root cause's own records say: its title, explanation and fix filled from the records, and the
advice an OOM message's figures support.

Templates live in ``rules/log_patterns.toml`` (rule ``title`` / ``explanation`` / ``fix``, else the category
title); the fields they name are read from the records by ``rules/log_fields.toml``.  A ``«…»`` segment is
dropped when a field it names was not found, so the text never states what the record does not show.  OOM
advice comes from the ``figures`` the parser read (bytes) by the rule of ``memory_verdicts`` (``rules/thresholds.toml``
``[oom_advice]``), the one the OOM verdict of ``memory_logs`` uses.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from diag.analyses.advice import advice as platform_advice
from diag.analyses.memory_verdicts import OomFigures, fragmentation_likely, outside_large, size
from diag.i18n import catalog, current_language, t
from diag.store import RULES_DIR

FIELDS = RULES_DIR / "log_fields.toml"
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_OPTIONAL = re.compile(r"«([^«»]*)»")


@dataclass
class Said:
    title: str
    explanation: str
    fix: str
    advice: list[str] = field(default_factory=list)


@lru_cache(maxsize=2)
def field_patterns(path: Path = FIELDS) -> dict[str, dict[str, Any]]:
    """``[field.<name>]`` of log_fields.toml, each with its compiled ``regex`` (None: not read by a pattern)."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)["field"]
    return {k: v | {"regex": re.compile(v["pattern"]) if v["pattern"] else None} for k, v in data.items()}


def read_fields(texts: list[str], preset: dict[str, str] | None = None) -> dict[str, str]:
    """Each field's value: the first text (in order) its pattern matches, first non-empty group."""
    out = {k: v for k, v in (preset or {}).items() if v}
    for name, spec in field_patterns().items():
        if name in out or spec["regex"] is None:
            continue
        for text in texts:
            m = spec["regex"].search(text)
            if m:
                out[name] = next((g for g in m.groups() if g), m.group(0)).strip()
                break
    return out


def render(template: str, fields: dict[str, str]) -> str:
    """``{name}`` → its value; a ``«…»`` segment naming a field not found is dropped."""

    def keep(m: re.Match[str]) -> str:
        inner = m.group(1)
        return inner if all(n in fields for n in _PLACEHOLDER.findall(inner)) else ""

    text = _OPTIONAL.sub(keep, template)
    text = _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), text)
    return re.sub(r"\s{2,}", " ", text).strip()


def explain(
    rule_id: str, category: str, texts: list[str], figures: dict[str, Any], code: str | None = None
) -> Said:
    """Title, explanation and fix of a root cause led by ``rule_id``, filled from its records' ``texts``."""
    from diag.analyses.log_diagnosis import log_rules  # log_diagnosis imports this module

    rules = log_rules()
    rule = rules["rule"].get(rule_id, {})
    fields = read_fields(texts, {"code": code or ""})
    if "runtime_code" in fields and fields["runtime_code"] == fields.get("code"):  # say it once
        fields.pop("runtime_code", None)
    if rule.get("title"):
        title = translated(f"log_rule.{rule_id}.title", rule["title"])
    else:
        english = rules["category"].get(category, {}).get("title", category)
        title = translated(f"log_category.{category}.title", english)
    advice = oom_advice(figures, rule.get("platform", "ascend")) if category == "oom" else []
    fix = render(translated(f"log_rule.{rule_id}.fix", rule.get("fix", "")), fields)
    if advice:
        fix = " ".join([*advice, fix]) if fix else " ".join(advice)
    explanation = render(translated(f"log_rule.{rule_id}.explanation", rule.get("explanation", "")), fields)
    return Said(render(title, fields), explanation, fix, advice)


def translated(key: str, english: str) -> str:
    """A rule text in the current language: the English of the rules file, or the catalog's text of ``key``
    (``diag/i18n/zh.logs.toml``, keyed by rule id, so the rules file stays one language and its editors' own);
    a rule without one falls back to its English."""
    if english and current_language() != "en":
        return catalog(current_language()).get(key) or english
    return english


def oom_advice(figures: dict[str, Any], platform: str = "ascend") -> list[str]:
    """What an OOM message's own figures say: the request against what was free, and — only when reserved −
    allocated is a large share of reserved and could have served the request — fragmentation; the tools and
    settings it names are ``platform``'s (rules/advice.toml).  The rule is memory_logs' (one rule: the verdict of
    ``diag memory`` and this advice agree)."""
    f = OomFigures.of(figures)
    out: list[str] = []
    if f.requested is not None:
        part = t("log_advice.requested", requested=size(f.requested))
        part += t("log_advice.free", free=size(f.free)) if f.free is not None else ""
        part += t("log_advice.capacity", capacity=size(f.capacity)) if f.capacity is not None else ""
        out.append(part[0].upper() + part[1:] + t("log_advice.end"))
    if f.held is not None:
        held, reserved = f.held, f.reserved or 0.0
        vs = t("log_advice.held", reserved=size(reserved), allocated=size(f.allocated), held=size(held))
        if fragmentation_likely(f):
            out.append(
                t("log_advice.fragmentation", vs=vs, advice=platform_advice("oom_fragmentation", platform))
            )
        else:
            out.append(t("log_advice.in_use", vs=vs, share=f"{held / reserved:.1%}"))
    if outside_large(f):
        advice = platform_advice("oom_outside", platform)
        out.append(t("log_advice.outside", outside=size(f.outside), capacity=size(f.capacity), advice=advice))
    return out


KEY_LINE_CHARS = 160


def key_line(raw: str, pattern: str = "", code: str | None = None) -> str:
    """The part of a record that says what it is about: the line (of a multi-line or flattened record) where its
    rule's ``pattern`` matches, else the line naming its ``code``, else its first line — cut to KEY_LINE_CHARS
    around the match, so that a long flattened record shows its op / code, not its first characters."""
    lines = raw.splitlines() or [""]
    flags = re.I if pattern.startswith("(?i)") else 0
    rx = re.compile(pattern.removeprefix("(?i)"), flags) if pattern else None
    for finder in (rx, re.compile(rf"(?<![\w:]){re.escape(code)}\b") if code else None):
        if finder is None:
            continue
        for line in lines:
            if m := finder.search(line):
                return _window(line, max(0, min(m.start() - 40, len(line) - KEY_LINE_CHARS)))
    return _window(lines[0], 0)


def _window(line: str, start: int) -> str:
    """KEY_LINE_CHARS of ``line`` from ``start``, cut at word boundaries and marked ``…`` where cut (a title that
    starts "ngine_place.cc:139]" reads as garbage)."""
    end = start + KEY_LINE_CHARS
    if start > 0:  # to the next blank, at most 40 characters on (never past the match, which is 40 on)
        blank = line.find(" ", start, start + 40)
        start = blank + 1 if blank >= 0 else start
    piece = line[start:end].strip()
    if end < len(line.rstrip()):
        blank = piece.rfind(" ")
        piece = (piece[:blank] if blank > KEY_LINE_CHARS // 2 else piece) + "…"
    return "…" + piece if start > 0 else piece
