"""CUDA kernels as rows of the utilization SQL: each Kineto kernel with the shapes of the aten op that launched it.

A CUDA kernel carries no shapes; the framework op around the host call that launched it does when the profile was
taken with ``record_shapes=True`` (Kineto cpu_op ``Input Dims`` / ``Input type``). The launch is found as
``diag.analyses.framework_ops`` finds it (flows, or the runtime call's correlation id); the shapes are those of the
**innermost** op there that a ``[[cuda_shapes]]`` row of ``diag/rules/op_cost.toml`` names (``aten::addmm`` inside
``aten::linear``: the op closest to the kernel), turned into the kernel_details layout the formulas read — inputs
in the row's order, the output shape from the row's expression, the dtypes from ``[cuda_types]``. A call's shapes
go to its longest kernel only, so its FLOPs are counted once; every other kernel is a row without shapes (calls
and time, no figures).
"""

from __future__ import annotations

from diag.analyses.framework_ops import launches_sql
from diag.sql_text import SqlFragment

__all__ = ["cuda_kernel_rows_sql", "has_cuda_kernels_only"]


def _rules() -> tuple[list[dict], dict[str, str]]:
    from diag.analyses.op_util import op_cost_rules  # the one reader of op_cost.toml

    rules = op_cost_rules()
    return rules.get("cuda_shapes", []), rules.get("cuda_types", {})


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _case(rules: list[dict], expr: str) -> str:
    """CASE over the aten op name: ``expr(rule)`` for the first rule whose pattern matches."""
    whens = " ".join(f"WHEN regexp_matches(op, {_quote(r['op'])}) THEN {expr.format(**r)}" for r in rules)
    return f"CASE {whens} END"


def cuda_kernel_rows_sql() -> SqlFragment:
    """SELECT (run ``$run``) of every CUDA kernel as the utilization SQL reads a kernels row: name, op (the aten op's
    short name on the call's main kernel, else NULL), dur_ns, input/output shapes and dtypes, file_id, pmu_values,
    core, start_ns."""
    rules, types = _rules()
    pattern = "|".join(f"(?:{r['op']})" for r in rules) or "^$"
    type_map = "MAP {" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in types.items()) + "}"
    order = {r["op"]: "[" + ", ".join(str(int(i)) for i in r["inputs"]) + "]" for r in rules}
    ins = _case([r | {"order": order[r["op"]]} for r in rules], "list_transform({order}, lambda i: d[i])")
    tys = _case([r | {"order": order[r["op"]]} for r in rules], "list_transform({order}, lambda i: ty[i])")
    out = _case(rules, "({output})")
    shape_text = "array_to_string(list_transform({}, lambda x: array_to_string(x, ',')), ';')"
    return SqlFragment(f"""
        WITH {launches_sql()},
             fw AS (SELECT tid, start_ns, dur_ns, name, input_dims, input_types FROM host_ops
                    WHERE run_id = $run AND category = 'cpu_op' AND input_dims IS NOT NULL
                          AND regexp_matches(name, {_quote(pattern)})),
             shaped AS (SELECT x.name, x.start_ns, any_value(x.dur_ns) AS dur_ns, any_value(x.tid) AS tid,
                               arg_max(h.name, h.start_ns) AS op, arg_max(h.input_dims, h.start_ns) AS dims,
                               arg_max(h.input_types, h.start_ns) AS types, max(h.start_ns) AS call_ns
                        FROM launches x JOIN fw h ON h.tid = x.tid AND x.ts BETWEEN h.start_ns AND h.start_ns + h.dur_ns
                        GROUP BY x.name, x.start_ns),
             main AS (SELECT name, start_ns, op, TRY_CAST(dims::JSON AS BIGINT[][]) AS d,
                             list_transform(TRY_CAST(types::JSON AS VARCHAR[]),
                                            lambda t: coalesce({type_map}[lower(t)], lower(t))) AS ty
                      FROM shaped QUALIFY row_number() OVER (PARTITION BY tid, call_ns ORDER BY dur_ns DESC, start_ns) = 1),
             conv AS (SELECT name, start_ns, op, {ins} AS ins, {tys} AS tys FROM main),
             costed AS (SELECT name, start_ns, regexp_replace(op, '^[A-Za-z_0-9]+::', '') AS short_op,
                               {shape_text.format("ins")} AS input_shapes, array_to_string(tys, ';') AS input_dtypes,
                               array_to_string({out}, ',') AS output_shapes, tys[1] AS output_dtypes
                        FROM conv)
        SELECT DISTINCT ON (t.name, t.start_ns) t.name, c.short_op AS op, t.dur_ns, c.input_shapes, c.input_dtypes,
               c.output_shapes, c.output_dtypes, NULL::BIGINT AS file_id, NULL::DOUBLE[] AS pmu_values,
               NULL::VARCHAR AS core, t.start_ns
        FROM device_tasks t LEFT JOIN costed c ON c.name = t.name AND c.start_ns = t.start_ns
        WHERE t.run_id = $run AND t.task_kind = 'CUDA_KERNEL'""")


def has_cuda_kernels_only(con: object, run_id: int) -> bool:
    """True when the run's kernels are CUDA device tasks (no kernel_details / op_summary rows)."""
    cur = con.cursor()  # type: ignore[attr-defined]
    got = cur.execute(
        """SELECT (SELECT count(*) FROM kernels WHERE run_id = $run),
                  (SELECT count(*) FROM device_tasks WHERE run_id = $run AND task_kind = 'CUDA_KERNEL')""",
        {"run": run_id},
    ).fetchone()
    return bool(got and got[0] == 0 and got[1] > 0)
