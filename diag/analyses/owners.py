"""Who acts on a conclusion: ``code`` | ``config`` | ``stack`` | ``vendor`` | ``hardware`` (rules/owners.toml).

One resolver per kind of conclusion, called where its JSON / dict is built: ``for_finding`` (device and cluster
findings; a ``log:<category>`` finding resolves as its root cause), ``for_log`` (log root causes, by category and
error codes).  A conclusion that already carries an owner keeps it.  ``group`` orders conclusions or actions under
the owner headings of the rules file.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from diag.i18n import current_language, t

OWNERS = Path(__file__).resolve().parent.parent / "rules" / "owners.toml"
VALUES = ("code", "config", "stack", "vendor", "hardware")
T = TypeVar("T")


@dataclass(frozen=True)
class Owner:
    owner: str | None  # one of VALUES; None: the rules cannot say
    reason: str
    steps: list[dict[str, str]] = field(
        default_factory=list
    )  # [{owner, step}] in the order to try; [] for one

    def fields(self) -> dict[str, Any]:
        """The ``--json`` keys: owner, owner_reason, owner_steps."""
        return {"owner": self.owner, "owner_reason": self.reason, "owner_steps": list(self.steps)}


@lru_cache(maxsize=2)
def owner_rules(path: Path = OWNERS) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def headings() -> list[tuple[str, str]]:
    """(owner key, heading) in display order; ``none`` is the last group."""
    g = owner_rules()["groups"]
    texts = g.get(current_language(), {})  # [groups.zh]: the Chinese headings; English is the table itself
    return [(k, texts.get(k) or g[k]) for k in g["order"]]


def _dtypes(evidence: dict[str, Any]) -> str:
    ops = evidence.get("ops") or []
    return " ".join(str(d).upper() for o in ops if isinstance(o, dict) for d in (o.get("input_dtypes") or []))


def _evidence_matches(want: dict[str, Any], evidence: dict[str, Any]) -> bool:
    return all((k in evidence) if v == "*" else evidence.get(k, object()) == v for k, v in want.items())


def _matches(
    rule: dict[str, Any], kind: str, category: str, evidence: dict[str, Any], codes: list[str]
) -> bool:
    if rule["kind"] != kind or rule["category"] not in ("*", category):
        return False
    if "codes" in rule and not any(re.search(rule["codes"], c) for c in codes):
        return False
    if "dtypes" in rule and not re.search(rule["dtypes"], _dtypes(evidence)):
        return False
    return "evidence" not in rule or _evidence_matches(rule["evidence"], evidence)


def matching_rule(
    kind: str, category: str, evidence: dict[str, Any] | None = None, codes: Iterable[str] = ()
) -> int | None:
    """The position of the first rule of ``kind`` that matches the category, codes and evidence."""
    ev, cs = evidence or {}, [str(c) for c in codes if c]
    return next((i for i, r in enumerate(owner_rules()["rule"]) if _matches(r, kind, category, ev, cs)), None)


def resolve(
    kind: str, category: str, evidence: dict[str, Any] | None = None, codes: Iterable[str] = ()
) -> Owner:
    """The owner, reason and steps of the first matching rule."""
    i = matching_rule(kind, category, evidence, codes)
    if i is None:
        return Owner(None, "")
    rule, lang = owner_rules()["rule"][i], current_language()
    # reason_zh / steps_zh: the same texts in Chinese, the steps in the order of ``steps``
    texts = rule.get(f"steps_{lang}") or [s for _, s in rule["steps"]]
    steps = [{"owner": o, "step": s} for (o, _), s in zip(rule["steps"], texts, strict=True)]
    reason = rule.get(f"reason_{lang}") or rule["reason"]
    return Owner(steps[0]["owner"] if steps else None, reason, steps if len(steps) > 1 else [])


def _code_values(codes: Iterable[Any]) -> list[str]:
    """Codes as a root cause holds them ({code, meaning…}) or as plain strings."""
    return [c.get("code", "") if isinstance(c, dict) else str(c) for c in codes or []]


def for_log(category: str, codes: Iterable[Any] = ()) -> Owner:
    return resolve("log", category, None, _code_values(codes))


def for_finding(category: str, evidence: dict[str, Any] | None = None) -> Owner:
    if category.startswith("log:"):
        return for_log(category[4:], (evidence or {}).get("codes") or [])
    own = (evidence or {}).get("owner")
    if own in VALUES:
        # The rule that made the finding names who acts (rules/memory_advice.toml, env_checks.toml, the version
        # matrix, moe_advice.toml): it knows more than the category does.
        return Owner(
            own,
            str(
                (evidence or {}).get("owner_reason")
                or t("finding_text.owner_named_by_rule", category=category)
            ),
        )
    return resolve("finding", category, evidence)


def of_finding(f: Any) -> Owner:
    """A Finding's (or ClusterFinding's) owner: its own when set, else the rules'."""
    if f.owner is not None:
        return Owner(f.owner, f.owner_reason, list(f.owner_steps))
    return for_finding(f.category, f.evidence)


def attach(d: dict[str, Any], resolved: Callable[[], Owner]) -> dict[str, Any]:
    """``d`` with the owner keys; an owner already in ``d`` is kept (the rules are not asked)."""
    if d.get("owner") is not None:
        d.setdefault("owner_reason", "")
        d["owner_steps"] = d.get("owner_steps") or []
        return d
    return {**d, **resolved().fields()}


def group(items: Iterable[T], owner_of: Callable[[T], str | None]) -> list[tuple[str, str, list[T]]]:
    """(owner key, heading, items) in the rules' order, empty groups left out; items keep their order."""
    keys = [k for k, _ in headings()]
    by: dict[str, list[T]] = {k: [] for k in keys}
    for it in items:
        o = owner_of(it)
        by[o if o in by else "none"].append(it)
    return [(k, h, by[k]) for k, h in headings() if by[k]]
