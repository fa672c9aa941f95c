"""Text spliced into SQL where DuckDB takes no parameter: quoted literals, and file paths DuckDB reads as
exactly that file (read_csv / read_json expand globs)."""

from __future__ import annotations

import os
import re
from typing import Literal, NewType


def sql_literal(text: str) -> str:
    """``text`` as a quoted SQL string literal, for the places DuckDB takes no parameter (paths in read_csv /
    read_json / COPY TO / SET, names in a columns spec or a CASE built once)."""
    return "'" + text.replace("'", "''") + "'"


_GLOB_CHARS = re.compile(r"([*?\[])")


def file_literal(path: str | os.PathLike[str]) -> str:
    """A file path as a SQL literal DuckDB reads as exactly that file: absolute (a relative ``~/x`` would be
    expanded to ``$HOME``) and with its glob characters bracketed (``rank[0]`` would otherwise match ``rank0``,
    ``run*`` every run), for read_csv / read_json, which take no parameter and expand globs."""
    absolute = os.path.abspath(os.fspath(path))
    return sql_literal(_GLOB_CHARS.sub(r"[\1]", absolute))


# Closed sets and SQL fragments that analyses splice into SQL text. Their annotations say they are never user
# text (tests/test_upload_safety.py refuses a `str` parameter spliced into SQL): a value outside the set is
# refused where it enters (ops.op_table's `by`, op_classes' platform check, the schema's table names).
OpsBy = Literal["op", "kernel", "class"]
OpClassPlatform = Literal["ascend", "cuda"]
FigureTable = Literal["kernels", "tasks", "kernel_stats", "none"]
SqlFragment = NewType("SqlFragment", str)  # SQL built by diag itself (a CTE, a sub-query), never user text
