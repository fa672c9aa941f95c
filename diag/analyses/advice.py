"""Suggestions per platform (rules/advice.toml): a CUDA or ROCm run is never given torch_npu advice, nor the reverse."""

from __future__ import annotations

import functools
import tomllib
from typing import Any

from diag.i18n import current_language
from diag.store import RULES_DIR

ADVICE = RULES_DIR / "advice.toml"


@functools.cache
def _advice_rules() -> dict[str, Any]:
    with open(ADVICE, "rb") as fh:
        return tomllib.load(fh)


def advice(key: str, platform: str) -> str:
    """The suggestion of finding ``key`` for a run of ``platform`` in the current language (``<platform>_zh`` beside
    the English ``<platform>``); a missing text is an error rather than another platform's advice."""
    rule = _advice_rules()[key]
    return str(rule.get(f"{platform}_{current_language()}") or rule[platform])
