"""A job's grouping in words (diag.grouping's evidence, ``jobs.grouping``) and how a rank is named, in the
current language. The basis lines are stored in English (``--json`` and older stores keep them); each is read by
its form and said again in the language in effect."""

from __future__ import annotations

import re
from typing import Any

from diag.i18n import is_chinese, t


def rank_or_run(rank: int | None, run_id: int) -> str:
    """How a run is named where a rank is expected: never its run id presented as a rank."""
    return t("grouping.rank", rank=rank) if rank is not None else t("grouping.run_rank_unknown", run=run_id)


# The stored basis lines (jobs.grouping, English: --json and older stores keep them) read in the current
# language: each form _evidence / _alone writes, with its text key; a line of no known form shows as stored.
_STORED_FORMS = [
    (re.compile(r"rank ids from (?P<source>.+) \((?P<n>\d+) of (?P<total>\d+) runs\)"), "grouping.rank_ids"),
    (re.compile(r"capture windows overlap (?P<pct>\d+)% \(least overlapping pair\)"), "grouping.overlap"),
    (re.compile(r"same platform (?P<platform>\w+)(?P<rest>(?:, .*)?)"), "grouping.same_platform"),
    (re.compile(r"HCCL group (?P<name>.+) \((?P<gid>[^()]*)\) lists ranks (?P<ranks>.+)"), "grouping.hccl_group"),
    (re.compile(r"rank unknown \(no rank in the run's metadata or name\)"), "grouping.rank_unknown"),
    (re.compile(r"no absolute capture time to match peers on"), "grouping.no_time"),
    (re.compile(r"no run of the same platform with a known rank and an overlapping capture window"),
     "grouping.no_peer_run"),
    (re.compile(r"no peer: the overlapping captures (?P<why>.+)"), "grouping.no_peer"),
    (re.compile(r"ambiguous: runs (?P<a>\d+) and (?P<b>\d+) are linked through others but (?P<why>.+)"),
     "grouping.ambiguous_linked"),
    (re.compile(r"ambiguous: (?P<n>\d+) overlapping (?P<platform>\w+) captures of rank (?P<rank>-?\d+) with "
                r"compatible runs; which belong together the data cannot say"), "grouping.ambiguous_rank"),
    (re.compile(r"ambiguous: (?P<why>.+)"), "grouping.ambiguous"),
]  # fmt: skip

# Why two runs cannot be ranks of one job (diag.grouping.why_apart), the ``why`` inside the lines above.
_APART_FORMS = [
    (re.compile(r"rank unknown"), "grouping.apart.rank_unknown"),
    (re.compile(r"different platforms"), "grouping.apart.platforms"),
    (re.compile(r"both are rank (?P<rank>-?\d+)"), "grouping.apart.same_rank"),
    (re.compile(r"different (?P<field>[a-z ]+) \((?P<a>.*) vs (?P<b>.*)\)"), "grouping.apart.field"),
    (re.compile(r"rank (?P<rank>-?\d+) is outside world size (?P<world>\d+)"), "grouping.apart.world"),
    (re.compile(r"HCCL group (?P<gid>.+) has different members"), "grouping.apart.group"),
    (re.compile(r"no absolute capture time"), "grouping.apart.no_time"),
    (re.compile(r"capture windows overlap (?P<pct>\d+)%"), "grouping.apart.overlap"),
]  # fmt: skip


_FIELD_NAMES = (
    "world_size",
    "profiler_level",
    "aic_metrics",
    "device_name",
    "torch_npu_version",
    "cann_version",
)


def _shared_fields(rest: str) -> str:
    """ ", world size 2, cann version 8.0.RC3" (the fields _evidence lists) with each name in the language."""
    for name in _FIELD_NAMES:
        rest = rest.replace(
            f", {name.replace('_', ' ')} ", t("grouping.field_sep") + t(f"grouping.field.{name}") + " "
        )
    return rest


def _apart(why: str) -> str:
    """A why_apart reason in the language; a reason of no known form shows as stored."""
    for pattern, key in _APART_FORMS:
        if m := pattern.fullmatch(why):
            found = m.groupdict()
            if "field" in found:
                name = found["field"].replace(" ", "_")
                found["field"] = t(f"grouping.field.{name}") if name in _FIELD_NAMES else found["field"]
            return t(key, **found)
    return why


def _stored_line(line: str) -> str:
    if not is_chinese():
        return line
    for pattern, key in _STORED_FORMS:
        if m := pattern.fullmatch(line):
            found = m.groupdict()
            if "rest" in found:
                found["rest"] = _shared_fields(found["rest"])
            if "why" in found:
                found["why"] = _apart(found["why"])
            return t(key, **found)
    return line


def describe_grouping(grouping: dict[str, Any] | None) -> str:
    """How the job's runs were grouped, in words: the evidence, and whether it is a guess."""
    if grouping is None:
        return t("grouping.by_folder")
    if not grouping.get("multi_rank"):
        return t("grouping.one_run", why=_stored_line(str(grouping.get("why_alone"))))
    head = t("grouping.head_guess") if grouping.get("guess") else t("grouping.head")
    return t(
        "grouping.described",
        head=head,
        basis=t("grouping.sep").join(map(_stored_line, grouping.get("basis") or [])),
    )
