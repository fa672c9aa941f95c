"""``profiler_info[_{rank}].json`` and ``profiler_metadata.json``: the run's configuration and environment."""

from __future__ import annotations

from typing import Any

from parsers._base import ParseContext, ParseResult, Probe
from parsers.ascend_communication import load_json_object


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


class ProfilerInfoParser:
    name = "ascend_profiler_info"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        t = probe.text.lstrip()
        return (
            t.startswith("{") and '"config"' in t and ('"experimental_config"' in t or '"common_config"' in t)
        )

    def parse(self, ctx: ParseContext) -> ParseResult:
        info = load_json_object(ctx)
        config = info.get("config") or {}
        exp = config.get("experimental_config") or {}
        ctx.store.update_run(
            ctx.run_id,
            profiler_level=_text(exp.get("_profiler_level")),
            aic_metrics=_text(exp.get("_aic_metrics")),
            export_type=_text(exp.get("_export_type")),
            torch_npu_version=_text(info.get("torch_npu_version")),
            cann_version=_text(info.get("cann_version")),
            rank=_int(info.get("rank_id")),
            config=config,
        )
        return ParseResult()


class ProfilerMetadataParser:
    name = "ascend_profiler_metadata"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        t = probe.text.lstrip()
        return t.startswith("{") and any(
            k in t for k in ('"ENV_VARIABLES"', '"parallel_group_info"', '"distributed_args"')
        )

    def parse(self, ctx: ParseContext) -> ParseResult:
        meta = load_json_object(ctx)
        rank = _int((meta.get("distributed_args") or {}).get("rank"))
        ctx.store.update_run(ctx.run_id, metadata=meta, rank=rank)
        groups = meta.get("parallel_group_info")
        if groups:
            ctx.store.set_job_groups(ctx.run_id, groups)
        return ParseResult()


PARSER = ProfilerInfoParser()
METADATA_PARSER = ProfilerMetadataParser()
