"""Nsight Compute CSV (``ncu --csv``, ``ncu --import x.ncu-rep --csv``) → ``kernel_metrics``.

Two layouts:

* ``--page details`` (the default): long, one row per metric — ``ID``, ``Kernel Name``, ``Section Name``,
  ``Metric Name``, ``Metric Unit``, ``Metric Value`` (newer ncu adds ``Rule Name``, ``Rule Type``, ``Rule
  Description``, ``Estimated Speedup Type``, ``Estimated Speedup``; metric rows then stop after the value,
  rule rows have no metric).  A rule row is stored as metric ``rule:<Rule Name>``, its speedup as the value,
  its speedup type as the unit and ``<Rule Type>: <description>`` as the text.
* ``--page raw``: wide, one row per profiled launch and one column per metric, the units on the second
  line.  Unpivoted to the same long form; the section is ``raw``.

Units are kept as written (ncu auto-scales per row: ``Mbyte``, ``us``, ``Ghz``); ``value`` is the number in
that unit (thousands separators dropped), NULL for ``n/a`` and text; ``value_text`` is the cell as written.
``==PROF==`` / ``==WARNING==`` lines before the table are skipped; a file holding only ncu messages (a failed
run writes just ``==ERROR== …``) is refused with that message.
"""

from __future__ import annotations

import csv

import duckdb

from diag.errors import BadInputError
from diag.store import file_literal, q, sql_literal
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import check_not_empty, encoding_error, one_line

ID_COLUMNS = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
    "Grid Size", "Device", "CC", "Kernel Time", "Invocations",
)  # fmt: skip
LONG_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")
_OPTS = (
    "delim=',', quote='\"', escape='\"', auto_detect=false, null_padding=true, "
    "max_line_size=4194304, buffer_size=16777216"
)


def _number(expr: str) -> str:
    return f"TRY_CAST(replace(nullif(trim({expr}), 'n/a'), ',', '') AS DOUBLE)"


def _lines(head: str) -> tuple[int, list[str], list[str]]:
    """(lines before the header, the header, ncu's own message lines) from the start of a file."""
    messages, skip = [], 0
    lines = head.splitlines()
    for line in lines:
        if line.startswith("=="):
            messages.append(line.strip())
            skip += 1
            continue
        if not line.strip():
            skip += 1
            continue
        return skip, [h.strip() for h in next(csv.reader([line]), [])], messages
    return skip, [], messages


def _layout(header: list[str]) -> str | None:
    if "ID" not in header or "Kernel Name" not in header:
        return None
    if all(c in header for c in LONG_COLUMNS):
        return "details"
    extra = [h for h in header if h not in ID_COLUMNS]
    return "raw" if extra and "Metric Name" not in header else None


class NcuCsvParser:
    name = "ncu_csv"
    version = 1
    platform = "cuda"
    run_per_file = True

    def detect(self, probe: Probe) -> bool:
        if b"\x00" in probe.head[:4096]:
            return False
        _, header, messages = _lines(probe.text)
        if header:
            return _layout(header) is not None
        return any(m.startswith(("==PROF==", "==ERROR==")) for m in messages)

    def capture_of(self, probe: Probe) -> str | None:
        """The profiled process a CSV page is an export of (host, pid, process name of its first launch):
        the details / raw / per-section pages of one ``.ncu-rep`` share it; None when the page names none."""
        skip, header, _ = _lines(probe.text)
        if "Process ID" not in header or "Host Name" not in header:
            return None
        rows = csv.reader(probe.text.splitlines()[skip + 1 :])
        first = next((r for r in rows if r and r[0].strip() and len(r) >= len(header) // 2), None)
        if first is None or len(first) <= max(header.index("Process ID"), header.index("Host Name")):
            return None
        cell = dict(zip(header, (f.strip() for f in first), strict=False))
        if not cell.get("Process ID"):
            return None
        return f"ncu:{cell['Host Name']}:{cell['Process ID']}:{cell.get('Process Name', '')}"

    def parse(self, ctx: ParseContext) -> ParseResult:
        check_not_empty(ctx.path, ctx.display)
        with open(ctx.path, "rb") as fh:
            head = fh.read(1 << 20)
        try:
            text = head.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:
                raise encoding_error(ctx.path, ctx.display) or BadInputError(
                    ctx.display, "not UTF-8"
                ) from None
            text = head[: exc.start].decode("utf-8-sig")
        skip, header, messages = _lines(text)
        layout = _layout(header) if header else None
        if layout is None:
            said = next((m for m in messages if m.startswith("==ERROR==")), messages[0] if messages else "")
            raise BadInputError(ctx.display, f"ncu wrote no metrics table: {said[:200]}".rstrip(": "))
        result = ParseResult()
        src = self._source(ctx, header, skip)
        try:
            sql = self._details(ctx, src, header) if layout == "details" else self._raw(ctx, src, header)
            n = q(ctx.con, sql)[0][0]
        except duckdb.Error as exc:
            raise BadInputError(ctx.display, f"cannot read as ncu CSV: {one_line(exc)}") from None
        result.add("kernel_metrics", n)
        return result

    @staticmethod
    def _source(ctx: ParseContext, header: list[str], skip: int) -> str:
        names: list[str] = []
        for h in header:  # duplicate header names would collide: keep both, the second as 'name_2'
            name, i = h or "column", 1
            while name in names:
                i += 1
                name = f"{h}_{i}"
            names.append(name)
        spec = "{" + ", ".join(f"{sql_literal(n)}: 'VARCHAR'" for n in names) + "}"
        return f"read_csv({file_literal(ctx.path)}, {_OPTS}, header=true, skip={skip}, columns={spec})"

    @staticmethod
    def _details(ctx: ParseContext, src: str, header: list[str]) -> str:
        rule = "nullif(trim(\"Metric Name\"), '') IS NULL AND nullif(trim(\"Rule Name\"), '') IS NOT NULL"
        has_rules = "Rule Name" in header
        metric = (
            f"""CASE WHEN {rule} THEN 'rule:' || "Rule Name" ELSE "Metric Name" END"""
            if has_rules
            else '"Metric Name"'
        )
        unit = (
            f"""CASE WHEN {rule} THEN nullif("Estimated Speedup Type", '') ELSE "Metric Unit" END"""
            if has_rules
            else '"Metric Unit"'
        )
        value = (
            f"""CASE WHEN {rule} THEN {_number('"Estimated Speedup"')} ELSE {_number('"Metric Value"')} END"""
            if has_rules
            else _number('"Metric Value"')
        )
        text = (
            f"""CASE WHEN {rule} THEN "Rule Type" || ': ' || coalesce("Rule Description", '') ELSE "Metric Value" END"""
            if has_rules
            else '"Metric Value"'
        )
        keep = f"""WHERE nullif(trim("Metric Name"), '') IS NOT NULL{f" OR ({rule})" if has_rules else ""}"""
        return f"""INSERT INTO kernel_metrics (run_id, file_id, launch_id, kernel_name, section, metric, unit, value,
                   value_text)
               SELECT {ctx.run_id}, {ctx.file_id}, TRY_CAST("ID" AS BIGINT), "Kernel Name", "Section Name",
                      {metric}, {unit}, {value}, {text}
               FROM {src} {keep}"""

    @staticmethod
    def _raw(ctx: ParseContext, src: str, header: list[str]) -> str:
        metrics = [h for h in header if h and h not in ID_COLUMNS]
        cols = ", ".join('"' + m.replace('"', '""') + '"' for m in metrics)
        return f"""INSERT INTO kernel_metrics (run_id, file_id, launch_id, kernel_name, section, metric, unit, value,
                   value_text)
               WITH t AS (SELECT * FROM {src}),
                    units AS (UNPIVOT (SELECT {cols} FROM t WHERE nullif(trim("ID"), '') IS NULL)
                              ON {cols} INTO NAME metric VALUE unit),
                    v AS (UNPIVOT (SELECT "ID", "Kernel Name", {cols} FROM t WHERE nullif(trim("ID"), '') IS NOT NULL)
                          ON {cols} INTO NAME metric VALUE value_text)
               SELECT {ctx.run_id}, {ctx.file_id}, TRY_CAST(v."ID" AS BIGINT), v."Kernel Name", 'raw', v.metric,
                      nullif(units.unit, ''), {_number("v.value_text")}, v.value_text
               FROM v LEFT JOIN units USING (metric)"""


PARSER = NcuCsvParser()
