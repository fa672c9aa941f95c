"""MoE expert deployment (placement) files: which EP rank holds which experts of each MoE layer.

Format (as MindStudio Insight reads it; ``Ascend/msinsight`` commit 4e16fca1f118458ce8820e9fe9c3cd323db35707,
``server/src/modules/summary/parser/ExpertDeploymentParser.cpp``, name pattern ``EXPERT_DEPLOYMENT_FILE_REG =
(prefill|decode)_global_deployment\\.json$``; real example
``server/src/test/test_data/expert_deployment/prefill_global_deployment.json``, its first 2 layers copied to
``tests/fixtures/moe/msinsight``)::

    {"moe_layer_count": 58,
     "layer_list": [{"layer_id": 0, "device_count": 64,
                     "device_list": [{"device_id": 0, "device_expert": [0, 237, 88, 240, 85]}, …]}, …]}

``device_expert`` lists the global expert ids a device (EP rank) holds; an id held by several devices is a
redundant expert (the real file: 64 devices × 5 slots for 256 experts).  One row per (layer, device, slot);
``replica`` numbers the copies of an expert in a layer in device order (0 = first).
"""

from __future__ import annotations

import json
import re

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe

NAME = re.compile(r"(prefill|decode)_global_deployment\.json$")
INT32_MAX = 2**31 - 1


class ExpertDeploymentParser:
    name = "moe_deployment"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        return bool(NAME.search(probe.name)) and probe.json_start() == "{" and '"layer_list"' in probe.text

    def parse(self, ctx: ParseContext) -> ParseResult:
        match = NAME.search(ctx.path.name) or NAME.search(ctx.display)
        phase = match.group(1) if match else None
        try:
            doc = json.loads(ctx.path.read_bytes().decode("utf-8-sig"))
            layer_list = doc["layer_list"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise BadInputError(ctx.display, f"not an expert deployment JSON: {type(exc).__name__}") from None
        if not isinstance(layer_list, list):
            raise BadInputError(ctx.display, "layer_list is not a list")
        rows: list[tuple[int, int, int, int]] = []  # layer, expert, rank, slot
        for i, layer in enumerate(layer_list):
            try:
                for device in layer["device_list"]:
                    for slot, expert in enumerate(device["device_expert"]):
                        rows.append((int(layer["layer_id"]), int(expert), int(device["device_id"]), slot))
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise BadInputError(
                    ctx.display, f"layer_list[{i}]: {exc!r} missing or not a number"
                ) from None
        if any(not 0 <= v <= INT32_MAX for row in rows for v in row):
            raise BadInputError(
                ctx.display, "a layer, device or expert id out of range (negative or beyond 2^31)"
            )
        if not rows:
            raise BadInputError(ctx.display, "layer_list names no expert")
        cols = list(zip(*rows, strict=True))
        ctx.con.execute(
            """INSERT INTO expert_placement (run_id, file_id, phase, layer, expert, rank, slot, replica)
               SELECT $run, $file, $phase, l, e, r, s,
                      row_number() OVER (PARTITION BY l, e ORDER BY r, s) - 1
               FROM (SELECT unnest($l) AS l, unnest($e) AS e, unnest($r) AS r, unnest($s) AS s)""",
            {"run": ctx.run_id, "file": ctx.file_id, "phase": phase,
             "l": list(cols[0]), "e": list(cols[1]), "r": list(cols[2]), "s": list(cols[3])},
        )  # fmt: skip
        result = ParseResult()
        result.add("expert_placement", len(rows))
        return result


PARSER = ExpertDeploymentParser()
