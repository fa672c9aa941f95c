"""Every table, column, type and unit of the store, declared once.

Conventions: times are int64 nanoseconds (``*_ns``; absolute ones are Unix-epoch ns), sizes are bytes
(``*_bytes``), every data row carries ``run_id`` and ``file_id`` so that one file's rows can be replaced or
removed as a unit.  Nothing else in the code base spells a column list by hand for table creation.
"""

from __future__ import annotations

from dataclasses import dataclass

# 2: device_tasks became a view over device_task_rows and kernels (diag.store.Store.migrate renames the table)
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    per_file: bool = True  # rows belong to one ingested file (carry run_id/file_id)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c.name}" {c.type}' for c in self.columns)
        return f'CREATE TABLE IF NOT EXISTS "{self.name}" (\n  {cols}\n)'


def _c(name: str, type_: str, doc: str = "") -> Column:
    return Column(name, type_, doc)


_OWNER = (
    _c("run_id", "BIGINT NOT NULL", "owning run"),
    _c("file_id", "BIGINT NOT NULL", "source file (ledger)"),
)

TABLES: tuple[Table, ...] = (
    Table(
        "jobs",
        "runs that the data says belong together (diag.grouping): a multi-rank job, or one run with no peers",
        (
            _c("job_id", "BIGINT PRIMARY KEY"),
            _c("job_key", "VARCHAR UNIQUE NOT NULL", "path:<first folder> or group:<members hash>"),
            _c("name", "VARCHAR"),
            _c("source", "VARCHAR", "folder or archive it came from"),
            _c("parallel_groups", "JSON", "parallel_group_info of profiler_metadata.json"),
            _c("grouping", "JSON", "diag.grouping evidence: multi_rank, ranks, basis, guess"),
            _c("created_at", "TIMESTAMP DEFAULT current_timestamp"),
        ),
        per_file=False,
    ),
    Table(
        "runs",
        "one profiling session of one device/rank",
        (
            _c("run_id", "BIGINT PRIMARY KEY"),
            _c("run_key", "VARCHAR UNIQUE NOT NULL", "stable identity of the run"),
            _c("job_id", "BIGINT"),
            _c("name", "VARCHAR", "run folder name, e.g. rank0_ascend_pt"),
            _c("platform", "VARCHAR NOT NULL", "ascend | cuda | rocm"),
            _c("source", "VARCHAR", "run folder (or archive!member)"),
            _c("rank", "INTEGER"),
            _c("device", "INTEGER"),
            _c("start_ns", "BIGINT", "earliest event of any table of the run"),
            _c("end_ns", "BIGINT", "latest event end of any table of the run"),
            _c("profiler_level", "VARCHAR", "Level0 | Level1 | Level2 | Level_none"),
            _c("aic_metrics", "VARCHAR"),
            _c("export_type", "VARCHAR"),
            _c("torch_npu_version", "VARCHAR"),
            _c("cann_version", "VARCHAR"),
            _c("device_name", "VARCHAR", "e.g. Ascend910B, NVIDIA H100 80GB HBM3"),
            _c("versions", "JSON", "tool and library versions (nsys, CUDA, driver, cupti …)"),
            _c("config", "JSON", "profiler_info*.json config block"),
            _c("metadata", "JSON", "profiler_metadata.json"),
            _c("created_at", "TIMESTAMP DEFAULT current_timestamp"),
        ),
        per_file=False,
    ),
    Table(
        "files",
        "the ledger of ingested files",
        (
            _c("file_id", "BIGINT PRIMARY KEY"),
            _c(
                "run_id", "BIGINT", "NULL when the file failed before a run existed, or a log outside any run"
            ),
            _c(
                "scope",
                "VARCHAR",
                "where the file came from: its run's key (profiler_info, a file's bytes), else its folder's "
                "path key (path:<origin>[#capture]); with relpath, what makes a file 'the same'",
            ),
            _c(
                "content_key",
                "VARCHAR",
                "content identity of the file set it came in (runs without profiler_info), else NULL",
            ),
            _c("relpath", "VARCHAR NOT NULL", "path relative to the run folder"),
            _c("source", "VARCHAR NOT NULL", "path as given (archive!member for archives)"),
            _c("sha256", "VARCHAR NOT NULL"),
            _c("size_bytes", "BIGINT"),
            _c("parser", "VARCHAR"),
            _c("parser_version", "INTEGER"),
            _c("status", "VARCHAR NOT NULL", "ok | partial | failed"),
            _c("message", "VARCHAR"),
            _c("rows", "BIGINT", "rows stored from this file, all tables"),
            _c("ingested_at", "TIMESTAMP DEFAULT current_timestamp"),
            _c(
                "stand_in_tasks",
                "BOOLEAN",
                "kernel_details: its rows are the run's device tasks, the run storing none "
                "(Store.refresh_stand_ins; the view device_tasks reads it)",
            ),
        ),
        per_file=False,
    ),
    Table(
        "device_task_rows",
        "the device tasks a timeline stores (Ascend Hardware events, DB TASK, task_time, Kineto, nsys); "
        "read them through the view device_tasks, which adds kernel_details' rows for a run without any",
        _OWNER
        + (
            _c(
                "source",
                "VARCHAR",
                "trace_view | db | task_time | kineto | nsys (kernel_details: the view's)",
            ),
            _c("stream", "VARCHAR", "stream label: 'Stream 2', 'Group <g> Communication'"),
            _c("stream_id", "BIGINT"),
            _c(
                "task_kind",
                "VARCHAR",
                "normalised kind: AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, "
                "COMMUNICATION, MEMCPY, SYNC, DSA, OTHER…",
            ),
            _c("task_type", "VARCHAR", "task type as the source wrote it"),
            _c("name", "VARCHAR"),
            _c("op_type", "VARCHAR"),
            _c("start_ns", "BIGINT"),
            _c("dur_ns", "BIGINT"),
            _c("step", "BIGINT"),
            _c("hw_task_id", "BIGINT", "device Task Id"),
            _c("connection_id", "BIGINT", "links to CANN API / host op"),
            _c("memcpy_bytes", "BIGINT"),
            _c("memcpy_direction", "VARCHAR"),
        ),
    ),
    Table(
        "kernels",
        "one row of kernel_details.csv / op_summary: compute and communication ops with shapes and PMU",
        _OWNER
        + (
            _c("step", "BIGINT"),
            _c("device_id", "INTEGER"),
            _c("model_id", "BIGINT"),
            _c("hw_task_id", "BIGINT"),
            _c("stream_id", "BIGINT"),
            _c("name", "VARCHAR"),
            _c("op_type", "VARCHAR"),
            _c("op_state", "VARCHAR", "dynamic | static"),
            _c(
                "accelerator_core", "VARCHAR", "GE task type: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, HCCL…"
            ),
            _c("task_kind", "VARCHAR", "normalised kind, as in device_tasks"),
            _c("start_ns", "BIGINT"),
            _c("dur_ns", "BIGINT"),
            _c("wait_ns", "BIGINT"),
            _c("block_dim", "BIGINT", "Block Dim / Block Num"),
            _c("mix_block_dim", "BIGINT"),
            _c("hf32_eligible", "VARCHAR"),
            _c("input_shapes", "VARCHAR", "';'-separated tensors, ','-separated dims, outer quotes removed"),
            _c("input_dtypes", "VARCHAR"),
            _c("input_formats", "VARCHAR"),
            _c("output_shapes", "VARCHAR"),
            _c("output_dtypes", "VARCHAR"),
            _c("output_formats", "VARCHAR"),
            _c("context_id", "VARCHAR"),
            _c("pmu_values", "DOUBLE[]", "every other (PMU) column's value, named by pmu_columns.names"),
        ),
    ),
    Table(
        "pmu_columns",
        "names of the PMU columns of one kernel_details file, in the order of kernels.pmu_values",
        _OWNER + (_c("names", "VARCHAR[]"),),
    ),
    Table(
        "host_ops",
        "a framework op, Python function, enqueue/dequeue or CANN API call on the host",
        _OWNER
        + (
            _c("pid", "BIGINT"),
            _c("tid", "BIGINT"),
            _c("process", "VARCHAR", "Python | CANN | Python GC …"),
            _c("category", "VARCHAR", "cpu_op | python_function | enqueue | dequeue | cann_api | gc …"),
            _c("name", "VARCHAR"),
            _c("start_ns", "BIGINT"),
            _c("dur_ns", "BIGINT"),
            _c("correlation", "BIGINT", "connection_id / correlation_id"),
            _c("api_level", "VARCHAR", "CANN API level: acl, runtime, node, hccl, model"),
            _c("input_dims", "VARCHAR"),
            _c("input_types", "VARCHAR"),
            _c("call_stack", "VARCHAR"),
        ),
    ),
    Table(
        "op_details",
        "operator_details.csv: host op instances with host and linked device durations",
        _OWNER
        + (
            _c("name", "VARCHAR"),
            _c("input_shapes", "VARCHAR"),
            _c("call_stack", "VARCHAR"),
            _c("host_self_ns", "BIGINT"),
            _c("host_total_ns", "BIGINT"),
            _c("device_self_ns", "BIGINT"),
            _c("device_total_ns", "BIGINT"),
            _c("device_self_aicore_ns", "BIGINT"),
            _c("device_total_aicore_ns", "BIGINT"),
        ),
    ),
    Table(
        "links",
        "a flow event pair (host op → device task, enqueue → dequeue, fwd → bwd)",
        _OWNER
        + (
            _c("flow_cat", "VARCHAR", "async_npu | HostToDevice | async_task_queue | fwdbwd …"),
            _c("flow_id", "VARCHAR"),
            _c("src_pid", "BIGINT"),
            _c("src_tid", "BIGINT"),
            _c("src_ts_ns", "BIGINT"),
            _c("dst_pid", "BIGINT"),
            _c("dst_tid", "BIGINT"),
            _c("dst_ts_ns", "BIGINT"),
        ),
    ),
    Table(
        "overlap_slices",
        "exporter-computed Overlap Analysis slices",
        _OWNER
        + (
            _c("kind", "VARCHAR", "Computing | Communication | Communication(Not Overlapped) | Free"),
            _c("start_ns", "BIGINT"),
            _c("dur_ns", "BIGINT"),
        ),
    ),
    Table(
        "steps",
        "step ranges (ProfilerStep#N on the host)",
        _OWNER + (_c("step", "BIGINT"), _c("start_ns", "BIGINT"), _c("end_ns", "BIGINT")),
    ),
    Table(
        "step_trace",
        "the exporter's own per-step breakdown (step_trace_time.csv)",
        _OWNER
        + (
            _c("device_id", "INTEGER"),
            _c("step", "BIGINT", "NULL when the trace had no ProfilerStep"),
            _c("computing_ns", "BIGINT"),
            _c("comm_not_overlapped_ns", "BIGINT"),
            _c("overlapped_ns", "BIGINT"),
            _c("communication_ns", "BIGINT"),
            _c("free_ns", "BIGINT"),
            _c("stage_ns", "BIGINT"),
            _c("bubble_ns", "BIGINT"),
            _c("comm_not_overlapped_excl_receive_ns", "BIGINT"),
            _c("preparing_ns", "BIGINT"),
        ),
    ),
    Table(
        "comm_ops",
        "a collective / p2p op as communication.json reports it",
        _OWNER
        + (
            _c("step", "BIGINT"),
            _c("kind", "VARCHAR", "collective | p2p"),
            _c("op_name", "VARCHAR"),
            _c("group_name", "VARCHAR"),
            _c("start_ns", "BIGINT"),
            _c("elapse_ns", "BIGINT"),
            _c("transit_ns", "BIGINT"),
            _c("wait_ns", "BIGINT"),
            _c("sync_ns", "BIGINT"),
            _c("idle_ns", "BIGINT"),
            _c("wait_ratio", "DOUBLE"),
            _c("sync_ratio", "DOUBLE"),
        ),
    ),
    Table(
        "comm_bandwidth",
        "per op and transport: bytes moved, time and bandwidth (communication.json)",
        _OWNER
        + (
            _c("step", "BIGINT"),
            _c("kind", "VARCHAR"),
            _c("op_name", "VARCHAR"),
            _c("group_name", "VARCHAR"),
            _c("transport", "VARCHAR", "HCCS | RDMA | PCIE | SDMA | SIO …"),
            _c("size_bytes", "BIGINT", "decimal MB × 10^6"),
            _c("transit_ns", "BIGINT"),
            _c("bandwidth_gbps", "DOUBLE", "GB/s as the exporter computed it"),
            _c("large_packet_ratio", "DOUBLE"),
        ),
    ),
    Table(
        "comm_matrix",
        "per link (src → dst rank): transport, bytes and bandwidth (communication_matrix.json)",
        _OWNER
        + (
            _c("step", "BIGINT"),
            _c("kind", "VARCHAR"),
            _c("op_key", "VARCHAR", "e.g. allreduce-top1@<group>"),
            _c("group_name", "VARCHAR"),
            _c("src_rank", "INTEGER"),
            _c("dst_rank", "INTEGER"),
            _c("transport", "VARCHAR"),
            _c("size_bytes", "BIGINT"),
            _c("transit_ns", "BIGINT"),
            _c("bandwidth_gbps", "DOUBLE"),
            _c("op_name", "VARCHAR"),
        ),
    ),
    Table(
        "memory",
        "memory samples: memory_record.csv (per component), npu_module_mem.csv (per CANN module), Kineto [memory] "
        "events, nsys CUDA_GPU_MEMORY_USAGE_EVENTS / _POOL_EVENTS",
        _OWNER
        + (
            _c("source", "VARCHAR", "memory_record | npu_module_mem | kineto | nsys"),
            _c(
                "component",
                "VARCHAR",
                "APP, PTA, GE, PTA+GE, WORKSPACE; or a CANN module; PyTorch (kineto: the caching allocator's "
                "totals); CUDA (nsys: device bytes allocated, running total) or CUDA pool (nsys: stream-ordered "
                "pools, reserved = their size)",
            ),
            _c("ts_ns", "BIGINT"),
            _c("allocated_bytes", "BIGINT"),
            _c("reserved_bytes", "BIGINT"),
            _c("active_bytes", "BIGINT"),
            _c("stream_ptr", "VARCHAR"),
            _c("device", "VARCHAR", "e.g. NPU:0, cuda:0"),
        ),
    ),
    Table(
        "op_memory",
        "operator_memory.csv / OP_MEMORY, Kineto [memory] and nsys alloc/free pairs: one allocation by an operator",
        _OWNER
        + (
            _c("name", "VARCHAR"),
            _c("size_bytes", "BIGINT", "negative: allocated before the window"),
            _c("alloc_ns", "BIGINT"),
            _c("release_ns", "BIGINT", "NULL: released after the window"),
            _c("active_release_ns", "BIGINT"),
            _c("dur_ns", "BIGINT"),
            _c("active_dur_ns", "BIGINT"),
            _c("alloc_total_allocated_bytes", "BIGINT"),
            _c("alloc_total_reserved_bytes", "BIGINT"),
            _c("alloc_total_active_bytes", "BIGINT"),
            _c("release_total_allocated_bytes", "BIGINT"),
            _c("release_total_reserved_bytes", "BIGINT"),
            _c("release_total_active_bytes", "BIGINT"),
            _c("stream_ptr", "VARCHAR"),
            _c("device", "VARCHAR"),
        ),
    ),
    Table(
        "static_op_memory",
        "static_op_mem.csv (graph mode): memory the graph compiler plans per operator; the row op_name = TOTAL is "
        "the graph's total (reuse makes it less than the ops' sum)",
        _OWNER
        + (
            _c("device", "VARCHAR", "Device_id"),
            _c("op_name", "VARCHAR", "TOTAL: the graph's total allocation"),
            _c("model_name", "VARCHAR", "static subgraph's root node; 0: a static graph without subgraphs"),
            _c("graph_id", "VARCHAR", "Graph ID, as written (MindStudio Insight reads it as a string)"),
            _c("node_index_start", "BIGINT", "logical time (node order) of the allocation"),
            _c("node_index_end", "BIGINT", "logical time of the release; NULL: held to the graph's end"),
            _c("size_bytes", "BIGINT", "Size(KB) × 1024"),
        ),
    ),
    Table(
        "op_stats",
        "op_statistic.csv: per op type and core type",
        _OWNER
        + (
            _c("device_id", "INTEGER"),
            _c("op_type", "VARCHAR"),
            _c("core_type", "VARCHAR"),
            _c("count", "BIGINT"),
            _c("total_ns", "BIGINT"),
            _c("min_ns", "BIGINT"),
            _c("avg_ns", "BIGINT"),
            _c("max_ns", "BIGINT"),
            _c("ratio_pct", "DOUBLE"),
        ),
    ),
    Table(
        "api_stats",
        "api_statistic.csv: per CANN API",
        _OWNER
        + (
            _c("device_id", "VARCHAR", "'host' for host data"),
            _c("level", "VARCHAR"),
            _c("api_name", "VARCHAR"),
            _c("total_ns", "BIGINT"),
            _c("count", "BIGINT"),
            _c("avg_ns", "BIGINT"),
            _c("min_ns", "BIGINT"),
            _c("max_ns", "BIGINT"),
            _c("variance", "DOUBLE", "as written (µs²)"),
        ),
    ),
    Table(
        "l2_cache",
        "l2_cache.csv: per task L2 hit / victim rate",
        _OWNER
        + (
            _c("stream_id", "BIGINT"),
            _c("hw_task_id", "BIGINT"),
            _c("hit_rate", "DOUBLE"),
            _c("victim_rate", "DOUBLE"),
            _c("op_name", "VARCHAR"),
        ),
    ),
    Table(
        "log_records",
        "one record of a CANN / torch_npu log (a multi-line record kept whole), classified at ingest",
        (
            _c("run_id", "BIGINT", "the run of the same folder, when there is one"),
            _c("file_id", "BIGINT NOT NULL"),
            _c("record_no", "BIGINT", "1-based record index in the file"),
            _c("line_no", "BIGINT", "first line of the record (1-based)"),
            _c("line_count", "INTEGER"),
            _c("ts_ns", "BIGINT", "log local time as if UTC, ns (CANN logs carry no time zone)"),
            _c("level", "VARCHAR", "ERROR | WARNING | INFO | DEBUG | EVENT | TRACE"),
            _c("module", "VARCHAR", "HCCL, GE, RUNTIME, ASCENDCL, DRV, TORCHAIR, PTA…"),
            _c("pid", "BIGINT"),
            _c("tid", "BIGINT"),
            _c("process_name", "VARCHAR"),
            _c("device_id", "INTEGER"),
            _c("rank", "INTEGER"),
            _c("source_loc", "VARCHAR", "CANN source file:line of the log call"),
            _c("code", "VARCHAR", "error code: EZ9999, EI0002, ERR00100, W11001, 507015…"),
            _c(
                "origin",
                "VARCHAR",
                "the process / source the record came from: a console prefix ('VllmWorker TP1 pid=961', "
                "'rank6'), the plog's pid, else NULL (the file itself)",
            ),
            _c("codes", "VARCHAR[]", "every error / return code the record's text names, in order"),
            _c(
                "figures",
                "JSON",
                "numbers the text states, by name with their unit (OOM: requested_bytes, capacity_bytes, "
                "allocated_bytes, reserved_bytes, free_bytes…)",
            ),
            _c("message", "VARCHAR"),
            _c("raw", "VARCHAR", "the record's text as in the file"),
            _c(
                "category", "VARCHAR", "classification rule's category (device_exception, hccl_timeout, oom…)"
            ),
            _c("rule_id", "VARCHAR"),
            _c("severity", "VARCHAR"),
        ),
    ),
    Table(
        "serving_runs",
        "one serving-benchmark run (vLLM / SGLang result block, AISBench tables, --save-result JSON); "
        "latencies in ms, throughputs in tok/s or req/s, as the tools print them",
        (
            _c("run_id", "BIGINT", "the profile run of the same folder, when there is one"),
            _c("file_id", "BIGINT NOT NULL"),
            _c("serving_id", "BIGINT", "stable id of this benchmark run (diag accept --serving)"),
            _c("block_no", "INTEGER", "1-based index of the block in its file"),
            _c("line_no", "INTEGER", "first line of the block (1-based)"),
            _c("tool", "VARCHAR", "vllm | sglang | aisbench"),
            _c("format", "VARCHAR", "text | box_table | json"),
            _c("platform", "VARCHAR", "ascend | cuda, as stated in the file; NULL when not stated"),
            _c("hardware", "VARCHAR", "as stated in the file (JSON metadata); NULL when not stated"),
            _c("model", "VARCHAR"),
            _c("backend", "VARCHAR", "endpoint / backend the tool drove, e.g. vllm, vllm-api-stream-chat"),
            _c("dataset", "VARCHAR"),
            _c(
                "request_rate_rps", "DOUBLE", "configured request rate; NULL when unlimited (inf) or unstated"
            ),
            _c("max_concurrency", "INTEGER", "configured maximum concurrency; NULL when not set"),
            _c("input_len", "INTEGER", "configured input length (tokens), when stated"),
            _c("output_len", "INTEGER", "configured output length (tokens), when stated"),
            _c("num_prompts", "INTEGER", "configured number of requests, when stated"),
            _c("successful_requests", "BIGINT"),
            _c("failed_requests", "BIGINT", "NULL when the tool version does not print it"),
            _c("duration_s", "DOUBLE", "benchmark duration, seconds"),
            _c("total_input_tokens", "BIGINT"),
            _c("total_output_tokens", "BIGINT"),
            _c("request_throughput_rps", "DOUBLE", "req/s"),
            _c("input_throughput_tps", "DOUBLE", "input tok/s"),
            _c("output_throughput_tps", "DOUBLE", "output tok/s"),
            _c("total_throughput_tps", "DOUBLE", "input + output tok/s"),
            _c("peak_output_throughput_tps", "DOUBLE", "tok/s"),
            _c("peak_concurrent_requests", "DOUBLE"),
            _c("mean_concurrency", "DOUBLE", "measured average concurrency (SGLang, AISBench)"),
            _c("ttft_mean_ms", "DOUBLE"),
            _c("ttft_median_ms", "DOUBLE"),
            _c("ttft_p99_ms", "DOUBLE"),
            _c("tpot_mean_ms", "DOUBLE"),
            _c("tpot_median_ms", "DOUBLE"),
            _c("tpot_p99_ms", "DOUBLE"),
            _c("itl_mean_ms", "DOUBLE"),
            _c("itl_median_ms", "DOUBLE"),
            _c("itl_p99_ms", "DOUBLE"),
            _c("e2el_mean_ms", "DOUBLE"),
            _c("e2el_median_ms", "DOUBLE"),
            _c("e2el_p99_ms", "DOUBLE"),
            _c(
                "latency_ms", "JSON", "every printed statistic: {metric: {mean, median, std, min, max, p50…}}"
            ),
            _c("fields", "JSON", "every row of the block as written: {label: value}"),
            _c(
                "partial",
                "VARCHAR",
                "a block cut short or without its header: where it was cut and the figures it lacks; NULL if whole",
            ),
        ),
    ),
    Table(
        "kernel_stats",
        "per-kernel summaries that come without events (nsys stats cuda_gpu_kern_sum and the like)",
        _OWNER
        + (
            _c("report", "VARCHAR", "report name, e.g. cuda_gpu_kern_sum"),
            _c("name", "VARCHAR"),
            _c("op_class", "VARCHAR"),
            _c("count", "BIGINT"),
            _c("total_ns", "BIGINT"),
            _c("avg_ns", "DOUBLE"),
            _c("med_ns", "DOUBLE"),
            _c("min_ns", "BIGINT"),
            _c("max_ns", "BIGINT"),
            _c("stddev_ns", "DOUBLE"),
            _c("time_pct", "DOUBLE"),
        ),
    ),
    Table(
        "kernel_metrics",
        "Nsight Compute metrics: one row per kernel launch and metric",
        _OWNER
        + (
            _c("launch_id", "BIGINT", "ncu's ID of the profiled launch"),
            _c("kernel_name", "VARCHAR"),
            _c("section", "VARCHAR"),
            _c("metric", "VARCHAR"),
            _c("unit", "VARCHAR"),
            _c("value", "DOUBLE", "in the unit given"),
            _c("value_text", "VARCHAR", "as written (n/a, enums)"),
        ),
    ),
    Table(
        "postmortem_notes",
        "free text of a postmortem, edited in the app: one row per scope (a run, a job, or every log)",
        (
            _c("scope", "VARCHAR PRIMARY KEY", "run:<run_id> | job:<job_id> | logs"),
            _c("run_id", "BIGINT"),
            _c("job_id", "BIGINT"),
            _c("title", "VARCHAR"),
            _c("summary", "VARCHAR"),
            _c("owner", "VARCHAR"),
            _c("follow_ups", "VARCHAR"),
            _c("updated_at", "TIMESTAMP", "when it was last saved (UTC)"),
        ),
        per_file=False,
    ),
    Table(
        "expert_load",
        "MoE expert load: tokens routed to each expert of each MoE layer (expert hotspot files, parsers/moe_*)",
        _OWNER
        + (
            _c("source", "VARCHAR", "msinsight_hotspot (…/{prefill|decode}_<rank>.csv)"),
            _c("layer", "INTEGER", "MoE layer index as the file counts it (dense layers not counted)"),
            _c("expert", "INTEGER", "global expert id (the file's rank × experts per rank + column)"),
            _c("rank", "INTEGER", "EP rank that holds the expert; NULL when not known"),
            _c("phase", "VARCHAR", "prefill | decode | NULL"),
            _c("step", "BIGINT", "collection step, NULL when the file has one snapshot"),
            _c("tokens", "BIGINT", "tokens routed to the expert (visits)"),
        ),
    ),
    Table(
        "expert_placement",
        "MoE expert placement: which EP rank holds which expert of each layer ({phase}_global_deployment.json)",
        _OWNER
        + (
            _c("phase", "VARCHAR", "prefill | decode"),
            _c("layer", "INTEGER"),
            _c("expert", "INTEGER", "global expert id"),
            _c("rank", "INTEGER", "device_id of the deployment (EP rank)"),
            _c("slot", "INTEGER", "position in the rank's device_expert list"),
            _c("replica", "INTEGER", "0 for the first copy of an expert in the layer, 1… for redundant ones"),
        ),
    ),
    Table(
        "counters",
        "counter samples of the trace (AI Core Freq, NPU MEM, HBM, LLC, QoS …)",
        _OWNER
        + (
            _c("process", "VARCHAR"),
            _c("name", "VARCHAR"),
            _c("series", "VARCHAR", "key inside args, e.g. MHz, KB"),
            _c("ts_ns", "BIGINT"),
            _c("value", "DOUBLE"),
        ),
    ),
)

# A run's device tasks: the stored ones, or — for a run that has none (kernel_details without a trace) — its
# kernel_details rows, projected as tasks (the GE task type as kind, 'Stream <id>' as lane).  A view, not a
# second copy of every kernel row: the copy cost a tenth of a CSV ingest, and a trace or task_time file ingested
# later had to delete it.  Which files stand in is a ledger flag (files.stand_in_tasks, set per run when it
# changes) rather than a NOT EXISTS over device_task_rows: that anti-join hashed every stored task on each query
# (~0.1 s per 1M tasks); the flag is a semi-join on the small ledger.  Rows of source 'kernel_details' in
# device_task_rows are the copies an older diag stored (a lake's Parquet keeps them): never read.
DEVICE_TASKS_VIEW = """CREATE OR REPLACE VIEW device_tasks AS
       SELECT * FROM device_task_rows WHERE source IS DISTINCT FROM 'kernel_details'
       UNION ALL
       SELECT k.run_id, k.file_id, 'kernel_details' AS source,
              CASE WHEN k.stream_id IS NULL THEN k.accelerator_core ELSE 'Stream ' || k.stream_id END AS stream,
              k.stream_id, coalesce(k.task_kind, 'OTHER') AS task_kind, k.accelerator_core AS task_type, k.name,
              k.op_type, k.start_ns, k.dur_ns, k.step, k.hw_task_id, CAST(NULL AS BIGINT) AS connection_id,
              CAST(NULL AS BIGINT) AS memcpy_bytes, CAST(NULL AS VARCHAR) AS memcpy_direction
       FROM kernels k
       WHERE k.file_id IN (SELECT file_id FROM files WHERE stand_in_tasks)"""

VIEWS: tuple[str, ...] = (
    DEVICE_TASKS_VIEW,
    # Device tasks with what kernel_details knows of them (matched on run, start and name): the GE task type
    # (the trace says AI_CORE for vector kernels), op type, shapes and dtypes. Analyses read this view.
    # (run, start, name) identifies a kernel: a device runs one task of a name at a given ns.
    """CREATE OR REPLACE VIEW tasks AS
       SELECT d.*, coalesce(k.task_kind, d.task_kind) AS kind, coalesce(d.op_type, k.op_type) AS op,
              k.accelerator_core, k.input_shapes, k.input_dtypes, k.output_dtypes, k.op_state
       FROM device_tasks d
       LEFT JOIN kernels k
         ON d.source = 'trace_view' AND k.run_id = d.run_id AND k.start_ns = d.start_ns AND k.name = d.name""",
    # kernel PMU metrics in long form: one row per kernel and metric (e.g. aic_mac_ratio, aiv_vec_time(us)).
    """CREATE OR REPLACE VIEW kernel_pmu AS
       SELECT k.run_id, k.file_id, k.name, k.op_type, k.start_ns, m.metric, m.value
       FROM kernels k JOIN pmu_columns c USING (file_id),
            LATERAL (SELECT unnest(c.names) AS metric, unnest(k.pmu_values) AS value) m""",
)

VIEW_NAMES: tuple[str, ...] = tuple(v.split("VIEW ", 1)[1].split()[0] for v in VIEWS)

TABLE_BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
DATA_TABLES: tuple[str, ...] = tuple(t.name for t in TABLES if t.per_file)
# What readers call a per-file table (counts, the lake's Parquet folders, `diag export`): device_task_rows is
# read as device_tasks, the name its rows had before the view, so a lake written by an older diag reads as is.
READ_AS: dict[str, str] = {"device_task_rows": "device_tasks"}


def read_name(table: str) -> str:
    return READ_AS.get(table, table)


# Tables whose rows hold a time interval or instant, for a run's span.
SPAN_COLUMNS: dict[str, tuple[str, str]] = {  # (device_tasks' stand-ins are kernels: counted there)
    "device_task_rows": ("start_ns", "start_ns + dur_ns"),
    "host_ops": ("start_ns", "start_ns + dur_ns"),
    "kernels": ("start_ns", "start_ns + dur_ns"),
    "overlap_slices": ("start_ns", "start_ns + dur_ns"),
}
