"""Every finding in Chinese and English, with a stable ``code`` (#24).

The codes are data (rules/finding_codes.toml) and never change meaning; the texts are data too: titles and
suggestions in diag/i18n/{en,zh}.findings.toml keyed ``finding.<code>.*``, advice beside its English as
``<platform>_zh`` (rules/advice.toml, memory_advice.toml, moe_advice.toml), owner texts as ``reason_zh`` /
``steps_zh`` (rules/owners.toml).  English output stays exactly as it was.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import string
import tomllib
from pathlib import Path

import pytest

from diag.analyses import owners
from diag.analyses.finding import finding_codes
from diag.analyses.memory_findings import findings_from_figures
from diag.i18n import catalog, set_language
from diag.store import RULES_DIR, Store
from tests.conftest import REAL_AICPU_TRACE, ROOT, ingest_into
from tests.test_platform import _foreign

CJK = re.compile(r"[\u4e00-\u9fff]")
FINDING_CLASSES = {"Finding", "ClusterFinding"}
# The codes as released: a code removed or renamed fails here (scripts match on them); a new one is added here.
SNAPSHOT = {
    "communication.exposed": "communication",
    "communication.waited_for_peers": "communication",
    "data_movement.exposed": "data_movement",
    "host_sync.idle": "host_sync",
    "data_quality.duplicate_kernels": "data_quality",
    "cpu_fallback.aicpu_ops": "cpu_fallback",
    "host_fallback.inferred": "host_fallback",
    "idle.gaps": "idle",
    "recompile.compile_calls": "recompile",
    "recompile.all_dynamic": "recompile",
    "recompile.compile_time": "recompile",
    "top_ops.by_device_time": "top_ops",
    "cluster.slow_rank": "slow_rank",
    "cluster.imbalance": "imbalance",
    "cluster.slow_link": "slow_link",
    "cluster.slow_transport": "slow_transport",
    "memory.headroom_low": "memory",
    "memory.fragmentation": "memory",
    "memory.one_op": "memory",
    "memory.slow_alloc": "memory",
    "memory.oom_fragmentation": "memory",
    "memory.oom_out_of_memory": "memory",
    "memory.oom_other_process": "memory",
    "memory.oom_unknown": "memory",
    "memory.kv_negative": "memory",
    "memory.kv_tiny": "memory",
    "environment.version_mismatch": "environment",
    "environment.bad_setting": "environment",
    "moe.expert_imbalance": "moe",
    "regression.op_slower": "regression",
    "utilization.matmul_small_m": "utilization",
    "utilization.compute_bound": "utilization",
    "utilization.memory_bound": "utilization",
    "log.root_cause": "log:*",
}
# Names that must reach the Chinese text unchanged: environment variables, CLI options, key=value settings.
SETTING = re.compile(
    r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?:=[A-Za-z0-9_:.]*[A-Za-z0-9_])?\b|--[a-z][a-z0-9-]+|\b[a-z_]+=[A-Za-z0-9_:.]*[A-Za-z0-9_]"
)


@pytest.fixture(autouse=True)
def _language_back():
    yield
    set_language(None)


# -- 1. the codes ---------------------------------------------------------------------------------------------
def _finding_calls() -> list[tuple[str, ast.Call, dict[str, list[str]]]]:
    """(file, call, the file's module-level dicts of strings) for every Finding / ClusterFinding built in diag/."""
    out = []
    for path in sorted((ROOT / "diag").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        dicts = {
            n.targets[0].id: [v.value for v in n.value.values if isinstance(v, ast.Constant)]
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Dict)
            and isinstance(n.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in FINDING_CLASSES:
                    out.append((str(path.relative_to(ROOT)), node, dicts))
    return out


def _codes_of(call: ast.Call, dicts: dict[str, list[str]]) -> list[str]:
    """The codes a call can pass: a literal, or the values of the module's dict it indexes (CODES[key])."""
    value = next((k.value for k in call.keywords if k.arg == "code"), None)
    if isinstance(value, ast.Constant):
        return [value.value]
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        return dicts.get(value.value.id, [])
    return []


def test_every_finding_built_in_the_code_base_passes_a_listed_code():
    calls = _finding_calls()
    assert len(calls) >= 23  # device, memory, cluster, environment, MoE, before/after, utilization, logs
    without = [f"{file}:{call.lineno}" for file, call, dicts in calls if not _codes_of(call, dicts)]
    assert without == []
    used = {c for _, call, dicts in calls for c in _codes_of(call, dicts)}
    assert used - set(finding_codes()) == set()  # every code passed is documented
    assert set(finding_codes()) - used == set()  # and every documented code is made somewhere


def test_codes_never_change_meaning():
    codes = finding_codes()
    assert sorted(set(SNAPSHOT) - set(codes)) == []  # removed or renamed: scripts matching on it break
    assert sorted(set(codes) - set(SNAPSHOT)) == []  # a new code: add it to SNAPSHOT
    assert {c: codes[c]["category"] for c in SNAPSHOT} == SNAPSHOT
    assert all(codes[c]["meaning"] and (ROOT / codes[c]["where"]).is_file() for c in codes)


def test_memory_findings_carry_their_code_and_keep_the_english_title():
    fig = {"platform": "ascend", "capacity_pct": 95.0, "capacity_bytes": 64 * 1024**3,
           "peak_reserved_bytes": int(60.8 * 1024**3), "headroom_pct": 5.0,
           "oom": [{"verdict": "out_of_memory", "requested_bytes": 2 * 1024**3}] * 2}  # fmt: skip
    got = [(f.code, f.title) for f in findings_from_figures(1, fig)]
    assert got == [
        (
            "memory.headroom_low",
            "Peak reserved 60.8 GiB of 64.0 GiB (95.0%): headroom 5.0%, under the 10% to keep",
        ),
        ("memory.oom_out_of_memory", "OOM: the device was full (asked for 2.0 GiB, 2 OOMs)"),
    ]
    set_language("zh")
    zh = [(f.code, f.title, f.suggestion.split("：")[0]) for f in findings_from_figures(1, fig)]
    assert zh == [
        ("memory.headroom_low", "峰值 reserved 60.8 GiB，占总量 64.0 GiB 的 95.0%：余量 5.0%，低于应保留的 10%",
         "NPU 至少保留 10% 空闲内存"),
        ("memory.oom_out_of_memory", "OOM：设备内存已满（申请 2.0 GiB，共 2 次 OOM）", "设备内存已满"),
    ]  # fmt: skip


# -- 2. the texts in both catalogs ----------------------------------------------------------------------------
def _fields(text: str) -> list[tuple[str, str]]:
    return sorted((f, spec or "") for _, f, spec, _ in string.Formatter().parse(text) if f is not None)


def _words(text: str) -> bool:
    """Whether ``text`` has words of its own (not only placeholders, settings, shell verbs and punctuation): then
    its Chinese must hold Chinese."""
    bare = re.sub(r"\b(?:export|unset)\b", "", SETTING.sub("", re.sub(r"\{[^}]*\}", "", text)))
    return bool(re.search(r"[A-Za-z]{2,}", bare))


def test_every_code_has_its_texts_in_both_languages_with_the_same_placeholders():
    en, zh = catalog("en"), catalog("zh")
    keys = sorted(k for k in en if k.startswith(("finding.", "finding_text.")))
    for code in finding_codes():
        assert f"finding.{code}.title" in en, code
    assert sorted(k for k in zh if k.startswith(("finding.", "finding_text."))) == keys
    for key in keys:
        assert _fields(en[key]) == _fields(zh[key]), key  # same figures, formatted by the same spec
        if _words(en[key]):
            assert CJK.search(zh[key]), (key, zh[key])


def _settings(text: str) -> set[str]:
    return set(SETTING.findall(text))


def _advice_files() -> list[tuple[str, str, dict]]:
    out = []
    for name in ("advice.toml", "memory_advice.toml", "moe_advice.toml"):
        with open(RULES_DIR / name, "rb") as fh:
            out += [(name, key, rule) for key, rule in tomllib.load(fh).items() if key != "terms"]
    return out


def test_every_advice_text_has_chinese_naming_the_same_settings():
    checked = 0
    for name, key, rule in _advice_files():
        for platform in ("ascend", "cuda", "rocm"):
            if platform not in rule:
                continue
            zh = rule.get(f"{platform}_zh", "")
            assert CJK.search(zh), (name, key, platform)
            assert _foreign(zh, platform) == [], (name, key, platform)
            assert _settings(rule[platform]) <= _settings(zh), (name, key, platform)
            checked += 1
    assert checked == 9 * 3 + 10 * 3 + 2  # advice.toml, memory_advice.toml, moe_advice.toml (no ROCm text)


def test_ai_cpu_hints_shape_fixes_env_checks_and_op_advice_have_chinese_naming_the_same_settings():
    with open(RULES_DIR / "fallback_hints.csv", encoding="utf-8") as fh:
        hints = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    with open(RULES_DIR / "shape_fixes.toml", "rb") as fh:
        fixes = tomllib.load(fh)["fix"]
    with open(RULES_DIR / "env_checks.toml", "rb") as fh:
        checks = tomllib.load(fh)["check"]
    pairs = [(h["hint"], h["hint_zh"]) for h in hints] + [(f["text"], f["text_zh"]) for f in fixes]
    pairs += [(c[k], c[f"{k}_zh"]) for c in checks for k in ("cost", "advice")]
    with open(RULES_DIR / "op_cost.toml", "rb") as fh:
        util = tomllib.load(fh)["advice"]  # the utilization findings' suggestions
    pairs += [(util[k], util[f"{k}_zh"]) for k in ("matmul_small_m", "memory", "compute")]
    assert len(pairs) == 9 + 6 + 20 * 2 + 3
    for en, zh in pairs:
        assert (CJK.search(zh) or not _words(en)) and _settings(en) <= _settings(zh), en


def test_every_owner_rule_has_chinese_reason_and_steps():
    rules = owners.owner_rules()["rule"]
    for i, rule in enumerate(rules):
        assert CJK.search(rule.get("reason_zh", "")), i
        steps_zh = rule.get("steps_zh", [])
        assert len(steps_zh) == len(rule["steps"]), i
        for (_, step), zh in zip(rule["steps"], steps_zh, strict=True):
            assert CJK.search(zh) and _settings(step) <= _settings(zh), (i, step)
    assert len(rules) == 30


def test_the_owner_speaks_the_language_in_effect():
    en = owners.for_finding("idle")
    assert (en.owner, en.reason) == (
        "code", "The device waits for the host: the host's work per step is the code's, graph capture is a setting "
        "on top.")  # fmt: skip
    set_language("zh")
    zh = owners.for_finding("idle")
    assert zh.owner == "code"
    assert zh.reason == "设备在等 host：每个迭代 host 上的工作由代码决定，图捕获是在此之上的配置。"
    assert [s["owner"] for s in zh.steps] == [s["owner"] for s in en.steps] == ["code", "config"]
    assert zh.steps[1]["step"] == "启用图模式 / 下发队列相关配置（TASK_QUEUE_ENABLE、CUDA / ACL graphs）"


# -- 3. diag findings in Chinese ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aicpu_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real msprof-analyze test trace with 2 AI_CPU tasks (sample_traces/README.md), ingested once."""
    path = tmp_path_factory.mktemp("i18n_findings") / "aicpu.duckdb"
    with Store(path) as store:
        ingest_into(store, [REAL_AICPU_TRACE])
    return path


def _findings(capsys, monkeypatch, db: Path, lang: str, *args: str) -> str:  # noqa: ANN001
    """``diag findings`` in-process with ``$DIAG_LANG`` = ``lang`` (a wide terminal: one table row per line)."""
    from diag.cli import main

    monkeypatch.setenv("DIAG_LANG", lang)
    monkeypatch.setenv("COLUMNS", "250")
    set_language(None)
    assert main(["findings", "--db", str(db), *args]) == 0
    return capsys.readouterr().out


def test_findings_in_chinese_on_the_cli_with_the_same_json_keys_and_codes(
    capsys, monkeypatch, aicpu_db: Path
):  # noqa: ANN001
    text = _findings(capsys, monkeypatch, aicpu_db, "zh")
    assert "设备空闲占 84.1% 的时间（6 个 ≥ 500 µs 的空闲间隔）" in text
    assert "2 个 AI_CPU 任务（算子回退到 AI CPU 执行）：Cast×2 — 占设备时间的 2.91%" in text
    assert "Device idle" not in text
    en, zh = (
        json.loads(_findings(capsys, monkeypatch, aicpu_db, lang, "--json"))["findings"]
        for lang in ("en", "zh")
    )
    assert [list(f) for f in zh] == [list(f) for f in en]
    assert [f["code"] for f in zh] == [f["code"] for f in en] == [
        "idle.gaps", "host_sync.idle", "data_movement.exposed", "cpu_fallback.aicpu_ops", "top_ops.by_device_time",
    ]  # fmt: skip
    assert en[0]["title"] == "Device idle 84.1% of the time (6 gaps ≥ 500 µs)"
    assert [f["impact_pct"] for f in zh] == [f["impact_pct"] for f in en]
    assert zh[4]["suggestion"] == "优先优化排在最前面的算子：它们决定了任何优化最多能省下多少时间。"
    assert zh[3]["suggestion"].startswith(
        "该算子在 AI CPU（而非 AI Core）上执行"
    )  # rules/fallback_hints.csv hint_zh


def test_findings_page_follows_the_language_switch(monkeypatch: pytest.MonkeyPatch, aicpu_db: Path):
    """The app caches results by the database fingerprint: the language is part of it, so switching to 中文
    after an English visit shows the findings in Chinese, not the cached English ones."""
    from tests.conftest import open_page

    def shown(at) -> str:  # noqa: ANN001
        return "\n".join(m.value for m in at.markdown)

    at = open_page(monkeypatch, aicpu_db, "app_pages/06_findings.py")
    assert "**Device idle 84.1% of the time (6 gaps ≥ 500 µs)**" in shown(at)
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception, at.exception
    assert "**设备空闲占 84.1% 的时间（6 个 ≥ 500 µs 的空闲间隔）**" in shown(at)
    assert "Device idle" not in shown(at)


def test_slow_rank_in_both_languages_with_the_same_figures():
    from diag.analyses.cluster_findings import rank_findings
    from diag.analyses.finding import thresholds

    def ranks() -> list[dict]:  # rank 3 computes 20 ms more over 4 steps; the others wait 8 ms at collectives
        return [{"rank": i, "run_id": i + 1, "steps": 4, "step_ns": 40_000_000 + (20_000_000 if i == 3 else i * 100_000),
                 "computing_ns": 30_000_000 + (20_000_000 if i == 3 else i * 100_000),
                 "wait_ns": 1_000_000 if i == 3 else 8_000_000, "comm_not_overlapped_ns": 1_000_000}
                for i in range(4)]  # fmt: skip

    t = thresholds()["cluster"]
    (en,) = rank_findings(ranks(), t, {})
    set_language("zh")
    (zh,) = rank_findings(ranks(), t, {})
    assert en.code == zh.code == "cluster.slow_rank"
    assert en.title == ("Slow rank 3: computing +65.8% over the job's median (12.5 ms vs 7.5 ms per step); the other "
                        "ranks wait 7.0 ms more at collectives")  # fmt: skip
    assert (
        zh.title
        == "慢 rank 3：计算时间超出作业中位数 +65.8%（每迭代 12.5 ms，中位数为 7.5 ms）；其他 rank 在集合通信上多等待 7.0 ms"
    )
    assert zh.suggestion.startswith("先看 rank 3：它的计算时间是整个作业的瓶颈")
    assert (zh.impact_ns, zh.impact_pct, zh.evidence) == (en.impact_ns, en.impact_pct, en.evidence)


def test_utilization_titles_in_both_languages():
    from diag.analyses.op_util_findings import _title

    op = {"name": "RmsNorm", "share_pct": 22.4, "dtype": "bf16", "cost_class": "norm", "m_max": None,
          "bound": "compute", "mfu_pct": 6.6, "bw_pct": 31.0}  # fmt: skip
    assert (
        _title(op, 64)
        == "RmsNorm at 7 % of peak bf16 TFLOPS, compute-bound by its shapes (22 % of kernel time)"
    )
    assert _title({**op, "unit": "vector"}, 64).startswith("RmsNorm at 7 % of peak vector bf16 TFLOPS,")
    assert _title({**op, "bound": "memory"}, 64) == (
        "RmsNorm at 31 % of HBM bandwidth, memory-bound by its shapes (22 % of kernel time)")  # fmt: skip
    set_language("zh")
    assert (
        _title(op, 64)
        == "RmsNorm 仅达到峰值 bf16 TFLOPS 的 7 %，按其 shape 属计算受限（占 kernel 时间的 22 %）"
    )
    assert _title({**op, "unit": "vector"}, 64).startswith("RmsNorm 仅达到Vector 单元峰值 bf16 TFLOPS 的 7 %")
    assert (
        _title({**op, "bound": "memory"}, 64)
        == "RmsNorm 仅达到 HBM 带宽的 31 %，按其 shape 属访存受限（占 kernel 时间的 22 %）"
    )
