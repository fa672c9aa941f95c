"""``static_op_mem.csv`` (graph mode): the memory the graph compiler plans per operator of each static graph.

Header, from the CANN profiling doc "static_op_mem（静态图算子内存）"
(https://www.hiascend.com/document/detail/zh/CANNCommunityEdition/latest/devaids/Profiling/atlasprofiling_16_0079.html,
English: .../document/detail/en/canncommercial/800/devaids/profiling/atlasprofiling_16_0079.html):
``Device_id, Op Name, Model Name, Graph ID, Node Index Start, Node Index End, Size(KB)``.

- ``Size(KB)``: the doc says "单位KB" without saying 1000; like the other Ascend memory CSVs (operator_memory.csv,
  whose KB MindStudio Insight scales by 1024) it is read as KiB: bytes = KB × 1024.
- ``Node Index Start / End`` are logical times (node order in the graph), not clock times; End = 4294967295 means
  "held to the end of the graph's life" and is stored as NULL.
- The last row of each export is ``Op Name = TOTAL``: the total the graph allocated (planned memory reuses
  addresses across lifetimes, so it can be less than the sum of the ops).  It is stored as is; the analysis keeps
  it apart from the ops (diag/analyses/memory.py ``static_graph``).
- ``Model Name`` is 0 for a static graph without static subgraphs, else the subgraph's root node.
- ``Graph ID`` and ``Device_id`` are kept as text: MindStudio Insight (Ascend msinsight, server memory parser and its
  tests) reads the Graph ID as a string and writes ``NPU:0`` as a Device_id; its op lists leave the TOTAL row out.

torch_npu writes it under ``ASCEND_PROFILER_OUTPUT/`` (msprof: ``static_op_mem_<timestamp>.csv``; the file name
patterns are MindStudio Insight's ``staticOpMemReg``).  Detected by its header, as every CSV here: the
``Node Index Start`` / ``Graph ID`` pair belongs to no other export.  No public real example was found
(corpus, find_files); tests/fixtures/static_op_mem/ is written from the documented header.
"""

from __future__ import annotations

from parsers._csv_table import CsvSpec, CsvTableParser
from parsers._csv_table import alternatives as alt

SPEC = CsvSpec(
    name="ascend_static_op_mem",
    version=1,
    table="static_op_memory",
    # detected without Size(KB), so that a file lacking it fails naming the column instead of going unrecognised
    signature=("op_name", "graph_id", "node_start"),
    required=("op_name", "graph_id", "size"),
    aliases={
        "device": ("Device_id", "Device ID", "Device"),
        "op_name": ("Op Name",),
        "model_name": ("Model Name",),
        "graph_id": ("Graph ID",),
        "node_start": ("Node Index Start",),
        "node_end": ("Node Index End",),
        "size": ("Size(KB)",),
    },
    select={
        "device": alt("device:text"),
        "op_name": alt("op_name:text"),
        "model_name": alt("model_name:text"),
        "graph_id": alt("graph_id:text"),  # text: MindStudio Insight reads it as a string
        "node_index_start": alt("node_start:int"),
        "node_index_end": alt("node_end:int"),  # 4294967295 (to the graph's end) → NULL
        "size_bytes": alt("size:kb"),
    },
)

PARSER = CsvTableParser(SPEC)
