"""MoE expert hotspot files: tokens routed to each expert, one file per phase and EP rank.

Format (as MindStudio Insight reads it; ``Ascend/msinsight`` commit 4e16fca1f118458ce8820e9fe9c3cd323db35707,
``server/src/modules/summary/parser/ExpertHotspotParser.cpp``, name pattern ``EXPERT_HOTSPOT_FILE_REG =
(prefill|decode)_([0-9]{1,4})\\.csv$`` in ``server/src/modules/communication/parser/ClusterDef.h``; real examples
``server/src/test/test_data/expert_hotspot/{prefill_0,decode_0}.csv``, copied to ``tests/fixtures/moe/msinsight``):

* the file name gives the model stage (``prefill`` | ``decode``) and the EP rank: ``decode_12.csv``;
* no header; one line per MoE layer (dense layers are not counted), one comma-separated column per expert the
  rank holds, each cell the number of tokens routed to ("visits" of) that expert;
* the dumps are appended, so a file may hold several collections one after another: Insight keeps the last
  ``num_moe_layers`` lines (``model_gen_config.json`` next to the files); so do we, and without that file every
  line is one layer;
* without a deployment file the global expert id is ``rank × experts per rank + column``
  (``ExpertHotspotManager::FillHotspotData``); that is the id stored, with the file's rank as the holder.

The matrix is layers × local experts (a few thousand cells at most): it is split here and inserted in one
statement.  Detection needs the name pattern *and* a first line of comma-separated integers.
"""

from __future__ import annotations

import json
import re

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe

NAME = re.compile(r"(prefill|decode)_([0-9]{1,4})\.csv$")
ROW = re.compile(r"^\s*\d{1,19}(\s*,\s*\d{1,19})*\s*,?\s*$")  # ≤ 19 digits: a 64-bit count
MODEL_CONFIG = "model_gen_config.json"
INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1


def _layers_kept(ctx: ParseContext) -> int | None:
    """``num_moe_layers`` of the model_gen_config.json next to the file, when there is one."""
    config = ctx.path.with_name(MODEL_CONFIG)
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("num_moe_layers")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


class ExpertHotspotParser:
    name = "moe_hotspot"
    version = 1
    platform = "ascend"  # written by vLLM-Ascend / MindIE EPLB tooling

    def detect(self, probe: Probe) -> bool:
        if not NAME.search(probe.name):
            return False
        first = probe.first_line
        return bool(first.strip()) and bool(ROW.match(first))

    def parse(self, ctx: ParseContext) -> ParseResult:
        match = NAME.search(ctx.path.name) or NAME.search(ctx.display)
        if match is None:
            raise BadInputError(ctx.display, "not named {prefill|decode}_<rank>.csv: phase and rank unknown")
        phase, rank = match.group(1), int(match.group(2))
        text = ctx.path.read_bytes().decode("utf-8-sig", errors="replace")
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        for n, line in lines:
            if not ROW.match(line):
                raise BadInputError(ctx.display, f"line {n}: not a row of token counts: {line[:60]!r}")
        keep = _layers_kept(ctx)
        if keep is not None:
            lines = lines[-keep:]
        if not lines:
            raise BadInputError(ctx.display, "no rows of token counts")
        rows = [[int(c) for c in line.strip().rstrip(",").split(",")] for _, line in lines]
        if max(max(r) for r in rows) > INT64_MAX:
            raise BadInputError(
                ctx.display, "a token count beyond 64-bit integers: not an expert hotspot file"
            )
        per_rank = len(rows[0])
        if (rank + 1) * per_rank > INT32_MAX:
            raise BadInputError(ctx.display, f"rank {rank} × {per_rank} experts is beyond an expert id")
        for (n, _), row in zip(lines, rows, strict=True):
            if len(row) != per_rank:
                raise BadInputError(
                    ctx.display, f"line {n}: {len(row)} experts, the first line has {per_rank}"
                )
        layers = [layer for layer, row in enumerate(rows) for _ in row]
        experts = [rank * per_rank + i for row in rows for i in range(len(row))]
        tokens = [v for row in rows for v in row]
        ctx.con.execute(
            """INSERT INTO expert_load (run_id, file_id, source, layer, expert, rank, phase, step, tokens)
               SELECT $run, $file, 'msinsight_hotspot', l, e, $rank, $phase, NULL, t
               FROM (SELECT unnest($layers) AS l, unnest($experts) AS e, unnest($tokens) AS t)""",
            {"run": ctx.run_id, "file": ctx.file_id, "rank": rank, "phase": phase,
             "layers": layers, "experts": experts, "tokens": tokens},
        )  # fmt: skip
        result = ParseResult()
        result.add("expert_load", len(tokens))
        return result


PARSER = ExpertHotspotParser()
