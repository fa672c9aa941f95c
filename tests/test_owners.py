"""The owner of every conclusion (rules/owners.toml): a case per rule, the --json keys, grouping by owner."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from diag.analyses import owners
from diag.analyses.cluster_findings import ClusterFinding
from diag.analyses.findings import Finding
from diag.analyses.postmortem_model import Postmortem, Statement
from diag.report import to_html, to_markdown
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, ingest_into

RANK0 = next((SAMPLES / "generated" / "llm_decode_tp2").glob("rank0_*_ascend_pt"), None)
INCIDENT_LOG = SAMPLES / "incident" / "rank0_1716292_20250115093320983_ascend_pt" / "log"
# corpus 051 (tests/fixtures/bugreport/README.md)
DEVICE_EXCEPTION_LOG = FIXTURES / "bugreport" / "plog_aicpu_exception_507018.log"

# (kind, category, evidence, codes) → (owner, the owners of its steps in order, a phrase of its reason)
CASES = [
    ("log", "device_exception", {}, ["507054"], "hardware", [], "multi-bit ECC"),  # HBM multi-bit ECC
    ("log", "abort", {}, ["CUDA:cudaErrorECCUncorrectable"], "hardware", [], "hardware fault"),
    ("log", "hccl_timeout", {}, ["EJ0002"], "hardware", ["hardware", "config"], "port down"),
    ("log", "hccl_timeout", {}, ["HCCL:11", "HCCL:19"], "config", ["config", "hardware"], "could not be set up"),
    ("log", "device_exception", {}, ["507015", "EZ9999"], "code", ["code", "vendor"], "out-of-range input"),
    ("log", "oom", {}, ["EL0004"], "config", ["config", "code"], "settings change it first"),
    ("log", "op_unsupported", {}, ["EZ3003"], "code", ["code", "stack"], "no kernel for these inputs"),
    ("log", "version_mismatch", {}, ["EI0008"], "stack", [], "do not pair"),
    ("log", "hccl_timeout", {}, ["EI0002"], "config", ["config", "code"], "timed out waiting"),
    ("log", "task_timeout", {}, ["507048"], "code", ["code", "config"], "hung kernel"),
    ("log", "cpu_fallback", {}, [], "code", ["code", "stack"], "host CPU"),
    ("log", "aicpu_fallback", {}, ["W11001"], "code", ["code", "stack"], "AI CPU engine"),
    ("log", "recompile", {}, [], "config", ["config", "code"], "recompiled"),
    ("log", "abort", {}, [], None, [], "does not say on its own"),
    ("finding", "cpu_fallback", {"ops": [{"op_type": "ArgMaxV2", "input_dtypes": ["FLOAT", "INT64"]}]}, [],
     "code", ["code", "stack"], "fallback_hints.csv"),
    ("finding", "cpu_fallback", {"ops": [{"op_type": "NonZero", "input_dtypes": ["FLOAT16"]}]}, [],
     "code", ["code", "stack"], "no AI Core kernel for these inputs"),
    ("finding", "host_fallback", {}, [], "code", ["code", "stack"], "without launching device work"),
    ("finding", "communication", {"peers_captured": False}, [], "code", [], "another rank's work"),
    ("finding", "communication", {"comm_exposed_ns": 5}, [], "code", ["code", "config"], "order of work"),
    ("finding", "data_movement", {}, [], "code", [], "format conversions"),
    ("finding", "idle", {}, [], "code", ["code", "config"], "waits for the host"),
    ("finding", "host_sync", {}, [], "code", [], "synchronisation calls"),
    ("finding", "recompile", {"dynamic_ops": 172}, [], "config", ["config", "code"], "dynamic-shape state"),
    ("finding", "recompile", {"compile_calls": 40}, [], "config", ["config", "code"], "compiled during"),
    ("finding", "top_ops", {}, [], "code", [], "model's own work"),
    ("finding", "utilization", {}, [], "config", ["config", "code"], "starved of work"),
    ("finding", "slow_rank", {}, [], "code", ["code", "hardware"], "slower than its peers"),
    ("finding", "imbalance", {}, [], "config", ["config", "code"], "parallel layout"),
    ("finding", "slow_link", {}, [], "hardware", ["hardware", "config"], "the link itself"),
    ("finding", "slow_transport", {}, [], "hardware", ["hardware", "config"], "links or ports"),
    ("finding", "data_quality", {}, [], None, [], "nothing here says who must act"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "category", "evidence", "codes", "owner", "steps", "phrase"), CASES)
def test_each_rule_gives_its_owner(kind, category, evidence, codes, owner, steps, phrase):
    got = owners.resolve(kind, category, evidence, codes)
    assert (got.owner, [s["owner"] for s in got.steps]) == (owner, steps)
    assert phrase in got.reason and got.reason.endswith(".")


def test_every_rule_has_a_case_and_well_formed_steps():
    rules = owners.owner_rules()["rule"]
    hit = {owners.matching_rule(k, c, e, codes) for k, c, e, codes, *_ in CASES}
    assert hit == set(range(len(rules)))
    for r in rules:
        assert all(o in owners.VALUES and text for o, text in r["steps"]), r
    assert [h for _, h in owners.headings()] == [
        "Change the code", "Change a setting", "Install / upgrade", "Report to the vendor", "Hardware",
        "Owner not known",
    ]  # fmt: skip


def test_every_log_category_but_the_unplaced_ones_has_its_own_rule():
    rules_dir = Path(owners.OWNERS).parent
    with open(rules_dir / "log_patterns.toml", "rb") as fh:
        categories = set(tomllib.load(fh)["category"])
    catch_all = (
        len(owners.owner_rules()["rule"])
        - 1
        - next(i for i, r in enumerate(reversed(owners.owner_rules()["rule"])) if r["kind"] == "log")
    )
    unplaced = {c for c in categories if owners.matching_rule("log", c) == catch_all}
    assert unplaced == {"abort", "error_wrapper", "unclassified_error", "info_noise"}


def test_an_owner_named_in_the_evidence_by_the_rule_that_made_the_finding_is_kept():
    # memory (rules/memory_advice.toml) and environment (the version matrix / env_checks.toml) findings name
    # their owner in the evidence: the category alone has no rule
    env = Finding(1, "environment", "high", "t", 0.0, 0, {"owner": "stack"}).to_json()
    assert (env["owner"], env["owner_reason"]) == ("stack", "named by the environment rule that made it")
    mem = Finding(1, "memory", "high", "t", 0.0, 0, {"owner": "config", "owner_reason": "Lower the limit."})
    assert (mem.to_json()["owner"], mem.to_json()["owner_reason"], mem.resolved_owner()) == (
        "config", "Lower the limit.", "config")  # fmt: skip
    assert Finding(1, "memory", "high", "t", 0.0, 0, {"owner": "nobody"}).to_json()["owner"] is None


def test_a_finding_keeps_its_own_owner_and_gets_the_rules_otherwise():
    own = Finding(1, "memory_peak", "high", "t", 1.0, 1, owner="config", owner_reason="Set the limit.")
    assert {k: own.to_json()[k] for k in ("owner", "owner_reason", "owner_steps")} == {
        "owner": "config", "owner_reason": "Set the limit.", "owner_steps": []}  # fmt: skip
    ruled = Finding(1, "idle", "high", "t", 1.0, 1).to_json()
    assert ruled["owner"] == "code" and [s["owner"] for s in ruled["owner_steps"]] == ["code", "config"]
    log = Finding(1, "log:hccl_timeout", "high", "t", 0.0, 0, {"codes": [{"code": "EJ0002"}]}).to_json()
    assert log["owner"] == "hardware"
    cluster = ClusterFinding("slow_link", "high", "t", 1, 1.0, 0).to_json()
    assert cluster["owner"] == "hardware" and cluster["owner_steps"][1]["owner"] == "config"


def test_report_groups_actions_by_owner_in_the_rules_order():
    pm = Postmortem(1, None, "run 1", "Postmortem", "s")
    for text, owner in [("swap the card", "hardware"), ("cast to int32", "code"), ("read more", None),
                        ("raise HCCL_EXEC_TIMEOUT", "config"), ("install CANN 8.1", "stack")]:  # fmt: skip
        pm.actions.append(Statement(text, {}, owner))
    pm.actions[1].owner_steps = [
        {"owner": "code", "step": "cast now"},
        {"owner": "stack", "step": "a later CANN"},
    ]
    md = to_markdown(pm)
    assert "- cast to int32\n  _In this order: cast now \\(code\\) → a later CANN \\(stack\\)_" in md
    section = md[md.index("## Suggested actions") : md.index("## Environment")]
    lines = [x for x in section.splitlines() if x.startswith(("###", "- "))]
    assert lines == [
        "### Change the code", "- cast to int32", "### Change a setting", "- raise HCCL\\_EXEC\\_TIMEOUT",
        "### Install / upgrade", "- install CANN 8\\.1", "### Hardware", "- swap the card",
        "### Owner not known", "- read more",
    ]  # fmt: skip
    page = to_html(pm)
    assert (
        '<li>cast to int32\n<br><span class="muted">In this order: cast now (code) → a later CANN (stack)</span>'
        in page
    )
    order = [page.index(f"<h3>{h}</h3>") for h in ("Change the code", "Change a setting", "Hardware")]
    assert order == sorted(order) and "Report to the vendor" not in page


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory) -> Path:
    """The generated rank 0 with the bundled incident plog, and a real device-exception log of no run."""
    if RANK0 is None:
        pytest.skip("sample_traces/generated is not bundled")
    root = tmp_path_factory.mktemp("owners")
    run = root / "job" / RANK0.name
    shutil.copytree(RANK0, run)
    shutil.copytree(INCIDENT_LOG, run / "log")
    (root / "logs").mkdir()
    shutil.copy(DEVICE_EXCEPTION_LOG, root / "logs" / "plog-16243_20220922112701000.log")
    db = root / "owners.duckdb"
    with Store(db) as store:
        ingest_into(store, [root / "job", root / "logs"])
    return db


def _cli_json(capsys, *args: str) -> dict:
    from diag.cli import main

    capsys.readouterr()
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def _owned(items: list[dict]) -> list[str | None]:
    for it in items:
        assert {"owner", "owner_reason", "owner_steps"} <= set(it), it
        assert it["owner"] in (*owners.VALUES, None)
    return [it["owner"] for it in items]


def test_owner_in_every_json_finding_root_cause_and_action(sample_db, capsys):
    db = ["--db", str(sample_db)]
    found = _cli_json(capsys, "findings", *db, "--json")["findings"]
    by_category = dict(zip([f["category"] for f in found], _owned(found), strict=True))
    assert by_category == {"idle": "code", "cpu_fallback": "code", "communication": "code", "data_movement": "code",
                           "host_sync": "code", "recompile": "config", "top_ops": "code", "environment": "stack",
                           "log:aicpu_fallback": "code", "log:device_exception": "code",
                           "log:error_wrapper": None, "log:unclassified_error": None}  # fmt: skip
    logs = _cli_json(capsys, "logs", *db, "--all-episodes", "--json")
    causes = {c["category"]: c for c in logs["root_causes"]}
    assert dict(zip(causes, _owned(list(causes.values())), strict=True)) == {
        "device_exception": "code", "aicpu_fallback": "code", "error_wrapper": None, "unclassified_error": None}  # fmt: skip
    assert [s["owner"] for s in causes["device_exception"]["owner_steps"]] == ["code", "vendor"]
    _owned([e["root_cause"] for e in logs["episodes"] if e["root_cause"]])
    pm = _cli_json(capsys, "report", *db, "--run", "1", "--format", "json")
    assert _owned(pm["actions"]) == ["code", "code", "code", "code", "code", "code", "stack", "config"]
    assert _owned([pm["root_cause"]]) == ["code"]


def test_findings_table_has_an_owner_column(sample_db, capsys):
    from diag.cli import main

    capsys.readouterr()
    assert main(["findings", "--db", str(sample_db), "--run", "1"]) == 0
    out = capsys.readouterr().out
    header = next(x for x in out.splitlines() if "severity" in x and "owner" in x)
    assert [c.strip() for c in header.strip("┃ ").split("┃")][:4] == [
        "severity",
        "impact",
        "category",
        "owner",
    ]
    recompile = next(x for x in out.splitlines() if "│ recompile" in x)
    assert [c.strip() for c in recompile.strip("│ ").split("│")][2:4] == ["recompile", "config"]


# last: the page's cached store holds the database open in this process
def test_markdown_report_and_findings_page_group_by_owner(sample_db, capsys, monkeypatch):
    from diag.cli import main

    capsys.readouterr()
    assert main(["report", "--db", str(sample_db), "--run", "1"]) == 0
    md = capsys.readouterr().out
    heads = [x for x in md[md.index("## Suggested actions") :].splitlines() if x.startswith("### ")]
    # the generated sample records torch_npu 2.5.1 with CANN 8.0.RC3, not a published pairing (diag env)
    assert heads == ["### Change the code", "### Change a setting", "### Install / upgrade"]
    from tests.conftest import open_page

    at = open_page(monkeypatch, sample_db, "app_pages/06_findings.py")
    assert [h.value for h in at.subheader] == ["Change the code", "Change a setting", "Install / upgrade"]
    captions = [c.value for c in at.caption]
    assert any(
        c.startswith("Every kernel ran in dynamic-shape state") for c in captions
    )  # its owner's reason


# real logs of the corpus (shared/corpus/cann_logs, INDEX.md) → the owner of their root cause (role ``cause``)
CORPUS_OWNERS = {
    "003_fftsplus_aivector_507015_vllm_ascend_5661.log": ("device_exception", "code"),
    "006_oom_vllm_ascend_19.log": ("oom", "config"),
    "021_hccp_rdma_init_port_down_ej0002_vllm_ascend_1815.log": ("hccl_timeout", "config"),
    "028_version_atb_undefined_symbol_cann850_ascend_pytorch_99.log": ("version_mismatch", "stack"),
    "038_hccl_ei0013_roce_cqe_hicann_hccl.log": ("hccl_timeout", "hardware"),
}


def test_real_corpus_logs_get_their_owner(corpus, tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in CORPUS_OWNERS:
        shutil.copy(corpus / "cann_logs" / name, logs / name)
    db = tmp_path / "corpus.duckdb"
    with Store(db) as store:
        ingest_into(store, [logs])
    causes = _cli_json(capsys, "logs", "--db", str(db), "--all-episodes", "--json")["root_causes"]
    got: dict[str, set] = {}
    for c in causes:
        if c["role"] == "cause":
            got.setdefault(Path(c["files"][0]).name, set()).add((c["category"], c["owner"]))
    assert {name: pairs & {CORPUS_OWNERS[name]} for name, pairs in got.items()} == {
        name: {pair} for name, pair in CORPUS_OWNERS.items()
    }
    assert all(c["owner"] != "vendor" for c in causes)  # nothing in these logs shows a stack defect
