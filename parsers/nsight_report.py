"""Nsight binary reports (``.nsys-rep``, ``.qdrep``, ``.ncu-rep``): refused with the export command to run.

They are NVIDIA's proprietary formats, readable only by the NVIDIA tools; diag reads their exports.  A file
with such a name whose content is something diag reads (an export renamed by hand) is claimed by that
format's parser first: this one sits after them in the registry and refuses only binary content.
"""

from __future__ import annotations

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe

NSYS_SUFFIXES = (".nsys-rep", ".qdrep")
NCU_SUFFIXES = (".ncu-rep",)


def export_hint(name: str) -> str | None:
    """The one-line reason and command for a report named ``name``, or None for other names."""
    low = name.lower()
    stem = name[: name.rfind(".")] if "." in name else name
    if low.endswith(NSYS_SUFFIXES):
        kind = (
            "Nsight Systems report"
            if low.endswith(".nsys-rep")
            else "Nsight Systems report (pre-2021 .qdrep)"
        )
        return (
            f"{kind}: a binary format only NVIDIA's tools read; export it and ingest the export: "
            f"`nsys export --type sqlite -o {stem}.sqlite {name}`"
        )
    if low.endswith(NCU_SUFFIXES):
        return (
            "Nsight Compute report: a binary format only NVIDIA's tools read; export it and ingest the CSV: "
            f"`ncu --import {name} --csv --page details > {stem}.csv`"
        )
    return None


def _is_binary(head: bytes) -> bool:
    if not head or b"\x00" in head[:4096]:
        return True
    try:
        head[:4096].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < 4092  # a multi-byte character cut by the 4 KiB window is still text
    return False


class NsightReportParser:
    name = "nsight_report"
    version = 1
    platform = "cuda"
    run_per_file = True

    def detect(self, probe: Probe) -> bool:
        return export_hint(probe.name) is not None and _is_binary(probe.head)

    def parse(self, ctx: ParseContext) -> ParseResult:
        raise BadInputError(ctx.display, export_hint(ctx.path.name) or "Nsight binary report")


PARSER = NsightReportParser()
