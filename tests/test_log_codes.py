"""Code-first log classification (issue #16): the ACL / runtime return-code catalog, a code's category when no
phrase rule knows the record's words, an honest "unclassified error", platform noise, vLLM console output as a
log format, and recompiles on identity guards.  Traps: tests/fixtures/traps/<class>/ (README.md: the source)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from diag.analyses import log_diagnosis
from diag.analyses.error_codes import describe_code, error_codes
from diag.store import Store
from parsers import cann_log
from parsers._base import Probe
from tests.conftest import FIXTURES, ROOT
from tests.test_cann_logs import classify_lines, ingest
from tests.test_log_traps import records

TRAPS = FIXTURES / "traps"
ACL_CODES = ROOT / "diag" / "rules" / "error_codes_acl.csv"


def _acl_rows() -> list[dict[str, str]]:
    with open(ACL_CODES, encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _one(line: str) -> dict:
    (rec,) = classify_lines([line])
    return rec


# -- 1. the catalog --------------------------------------------------------------------------------------------
def test_acl_catalog_holds_every_header_code_once():
    rows = _acl_rows()
    codes = [r["code"] for r in rows]
    # acl_base.h + rt_error_codes.h (with its CANN 8.x additions) + ge_error_codes.h (222) and the aclnn tables (30): every code once
    assert len(codes) == len(set(codes)) == 252
    assert sum(r["name"].startswith("ACLNN_") for r in rows) == 30
    assert all(re.fullmatch(r"[1-5]\d{5}", c) for c in codes)
    assert all(r["name"].startswith(("ACL_", "ACLNN_")) and r["meaning"] and r["typical_fix"] for r in rows)
    categories = set(log_diagnosis.log_rules()["category"])
    assert {r["category"] for r in rows if r["category"]} <= categories


@pytest.mark.parametrize(
    ("code", "name", "category"),
    [
        ("100000", "ACL_ERROR_INVALID_PARAM", ""),  # 1xxxxx: parameter
        ("107019", "ACL_ERROR_RT_WAIT_TIMEOUT", ""),
        ("207001", "ACL_ERROR_RT_MEMORY_ALLOCATION", "oom"),  # 2xxxxx: resource
        ("245000", "ACL_ERROR_GE_MEMORY_ALLOCATION", "oom"),
        ("500001", "ACL_ERROR_FAILURE", ""),  # generic: only its context places it (version_precision_mode)
        ("507014", "ACL_ERROR_RT_AICORE_TIMEOUT", "task_timeout"),  # 5xxxxx: runtime
        ("507034", "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", "task_timeout"),
        ("507035", "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "device_exception"),
        ("507053", "ACL_ERROR_RT_DEVICE_MEM_ERROR", "device_exception"),
        ("507056", "ACL_ERROR_RT_LINK_ERROR", "hccl_timeout"),
        ("107027", "ACL_ERROR_RT_STREAM_CAPTURED", ""),  # CANN 8.x graph capture: the record's words place it
        ("207018", "ACL_ERROR_RT_DEVICE_OOM", "oom"),
        ("574007", "ACLNN_CLEAR_DEVICE_STATE_FAIL", "device_exception"),
        ("545001", "ACL_ERROR_GE_LOAD_MODEL", ""),
        (
            "161002",
            "ACLNN_ERR_PARAM_INVALID",
            "",
        ),  # aclnnStatus: a parameter check, not an op-support verdict
        ("561003", "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", ""),  # missing kernels package or no kernel: unplaced
        ("561112", "ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND", "version_mismatch"),
    ],
)
def test_code_family(code, name, category):
    entry = describe_code(code)
    assert (entry["name"], entry["category"]) == (name, category)
    assert "not in diag's catalog" not in entry["meaning"]


def test_hand_written_words_win_over_the_header():
    entry = error_codes()["507015"]
    assert entry["meaning"] == "AI Core exception"  # error_codes.csv
    assert (entry["name"], entry["category"]) == ("ACL_ERROR_RT_AICORE_EXCEPTION", "device_exception")


CANN_CODES = ROOT / "diag" / "rules" / "error_codes_cann_registry.csv"


def test_cann_registry_holds_every_component_code_once():
    with open(CANN_CODES, encoding="utf-8") as fh:
        head = [line for line in fh if line.startswith("#")]
        fh.seek(0)
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    codes = [r["code"] for r in rows]
    # 589 codes of the hicann/* registries (runtime, ge, opbase, driver, metadef 8.5) + 56 only in Ascend/metadef 2023
    assert len(codes) == len(set(codes)) == 645
    assert all(re.fullmatch(r"[EW][0-9A-Z]\d{4}", r["code"]) and r["meaning"] and r["source"] for r in rows)
    assert sum(r["source"].startswith("Ascend/metadef") for r in rows) == 56
    assert any(
        "hicann/runtime" in line and "7f26179e1c" in line for line in head
    )  # the source commit is recorded
    categories = set(log_diagnosis.log_rules()["category"])
    assert {r["category"] for r in rows if r["category"]} <= categories


@pytest.mark.parametrize(
    ("code", "category", "meaning_starts"),
    [
        ("E50034", "op_unsupported", "The dtype of […] of op[…] must in […]"),  # a TBE op's dtype check
        ("EZ1006", "op_unsupported", "Operator … does not support data type …"),
        ("EL0019", "oom", "Failed to allocate … device memory"),
        ("EE1015", "version_mismatch", "… failed. Reason: The driver version capability is insufficient"),
        ("E60101", "", "In op[…], the last 2 dim of […]"),  # a shape rule: the record decides
        ("E10013", "", "Value … for --… is out of range"),  # an argument check places nothing
    ],
)
def test_a_registry_code_is_described_by_its_message(code, category, meaning_starts):
    entry = describe_code(code)
    assert entry["category"] == category
    assert entry["meaning"].startswith(meaning_starts)
    assert "%s" not in entry["meaning"] and "not in diag's catalog" not in entry["meaning"]
    assert entry[
        "component"
    ]  # the TBE checks the registry leaves without errClass get their class letter's name


def test_a_code_no_registry_defines_is_still_described_by_its_spelling():
    assert (
        "not in diag's catalog" in describe_code("EI0018")["meaning"]
    )  # hcomm's HCCL codes are not reachable
    assert describe_code("EZ9999")["meaning"].startswith(
        "Inner error"
    )  # error_codes.csv wins over the registry


# -- 2. category from the code ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "rule_id", "category"),
    [
        ("[PID: 360] 2025-12-29-13:22:34.447.110 AclNN_Runtime_Error(EZ9903): rtKernelLaunchWithHandleV2 failed: 507014",
         "code_task_timeout", "task_timeout"),
        ("EE9999: Inner Error! synchronize stream failed, runtime result = 507034", "code_task_timeout", "task_timeout"),
        ("NPU function error: call aclnnMatmul failed, error code is 507053", "code_device_exception", "device_exception"),
        ("[ERROR] 2025-01-01-00:00:00 (PID:1, Device:0, RankID:0) ERR00100 PTA call acl api failed, error code is 507056",
         "code_hccl", "hccl_timeout"),
        ("[ERROR] GE(1234,python):2025-01-01-00:00:00.000.001 [ge_api.cc:10]1234 SetPrecisionMode failed, ret = 500001",
         "version_precision_mode", "version_mismatch"),
    ],
)  # fmt: skip
def test_code_decides_when_no_phrase_does(line, rule_id, category):
    rec = _one(line)
    assert (rec["rule_id"], rec["category"], rec["severity"]) == (rule_id, category, "high")


def test_trap_code_first_timeout(tmp_path):
    rows = records(tmp_path, TRAPS / "code_first_timeout" / "console.log")
    assert [(r["code"], r["category"]) for r in rows] == [
        ("507014", "task_timeout"),
        ("ERR00100", "error_wrapper"),
        ("507014", "task_timeout"),
    ]
    store = Store(tmp_path / "db.duckdb")
    top = log_diagnosis.root_causes(store)[0]
    store.close()
    assert (top.category, top.severity, top.title) == ("task_timeout", "high", "Device task timeout: 507014")


# -- 3. honest unknown -----------------------------------------------------------------------------------------
def test_trap_unclassified_error(tmp_path):
    rows = records(tmp_path, TRAPS / "unclassified_error" / "console.log")
    assert [r["category"] for r in rows] == [None, "unclassified_error", None]
    store = Store(tmp_path / "db.duckdb")
    causes = log_diagnosis.root_causes(store)
    store.close()
    assert [(c.category, c.severity, c.title) for c in causes] == [
        ("unclassified_error", "medium", "Unclassified error")
    ]
    assert causes[0].evidence[0].line_no == 2
    assert "invalid bitmask" in causes[0].evidence[0].raw


def test_unclassified_error_names_its_code():
    rec = _one(
        "[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [api.cc:1]1 frobnicate failed, ret = 507039"
    )
    assert (rec["rule_id"], rec["severity"], rec["code"]) == ("unclassified_error", "medium", "507039")


def test_a_known_cause_outranks_an_unclassified_error():
    lines = ["ERROR 11-26 11:43:04 [x.py:1] something unknown",
             "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity)"]  # fmt: skip
    assert [r["category"] for r in classify_lines(lines)] == ["unclassified_error", "oom"]


# -- 4. noise on this platform ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "rule_id"),
    [
        ("(VllmWorker TP0 pid=123) WARNING 11-26 11:43:04 [_custom_ops.py:21] Failed to import from vllm._C with "
         "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')", "noise_cuda_import_on_ascend"),
        ("WARNING 11-26 11:43:04 [_custom_ops.py:21] Failed to import from vllm._moe_C with "
         "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')", "noise_cuda_import_on_ascend"),
        ("WARNING 11-26 11:43:04 [utils.py:9] Import error msg: ImportError('libnccl.so.2: cannot open shared object file')",
         "noise_cuda_import_on_ascend"),
        ("WARNING 11-26 11:43:04 [arg_utils.py:1700] Falling back to V0 engine.", "noise_backend_fallback"),
        ("INFO 11-26 11:43:04 [platform.py:100] Cannot use FlashAttention-2 backend. Using XFormers backend.", "noise_backend_fallback"),
        ("INFO 11-26 11:43:04 [default_loader.py:262] Loading weights took 12.34 seconds", "noise_weights_loaded"),
        ("(EngineCore_DP0 pid=3) INFO 11-26 11:43:04 [model_runner.py:10] Loading model weights took 15.4 GiB", "noise_weights_loaded"),
    ],
)  # fmt: skip
def test_platform_noise(line, rule_id):
    rec = _one(line)
    assert (rec["rule_id"], rec["severity"]) == (rule_id, "none")


def test_cuda_import_failure_at_error_level_is_not_noise():
    rec = _one("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory")
    assert rec["rule_id"] == "version_symbol"


# -- 5. vLLM console output ------------------------------------------------------------------------------------
def test_trap_vllm_console_only_is_read(tmp_path):
    path = TRAPS / "vllm_console_only" / "serve_console"
    assert cann_log.detect(Probe.of(path))
    rows = records(tmp_path, path)
    # line 3, vllm-ascend's KV budget clamped at 0 ("Available memory: 0, total memory: …"), is the OOM too, and
    # the first to say it
    assert [r["category"] for r in rows] == ["info_noise", "info_noise", "oom", "oom", "abort", "abort"]
    store = Store(tmp_path / "db.duckdb")
    top = log_diagnosis.root_causes(store)[0]
    store.close()
    assert (top.category, top.severity, top.evidence[0].line_no) == ("oom", "high", 3)


@pytest.mark.parametrize(
    ("line", "rule_id", "category"),
    [
        ("(EngineCore_DP0 pid=1) ERROR 11-26 11:43:04 [multiproc_executor.py:149] Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
         "vllm_worker_died", "abort"),
        ("(VllmWorker rank=0 pid=7) ERROR 11-26 11:43:04 [multiproc_executor.py:527] WorkerProc failed to start.", "vllm_worker_died", "abort"),
        ("[rank0]: RuntimeError: Engine process failed to start. See stack trace for the root cause.", "abort_watchdog", "abort"),
        ("/tmp/x/launcher.cpp:12:5: error: use of undeclared identifier 'aclOpExecutor'", "jit_header_compile_error", "unclassified_error"),
    ],
)  # fmt: skip
def test_vllm_console_rules(line, rule_id, category):
    rec = _one(line)
    assert (rec["rule_id"], rec["category"]) == (rule_id, category)


# -- 6. explanations no further than the evidence ---------------------------------------------------------------
def test_identity_guard_recompile_is_not_a_shape_recompile():
    rec = _one("V1101 02:43:40.706000 140 torch/_dynamo/guards.py:2800] [0/1] [__recompiles] triggered by the "
               "following guard failure(s): - 0/0: ___check_obj_id(L['self'], 140234)")  # fmt: skip
    assert rec["rule_id"] == "recompile_identity_guard"
    said = log_diagnosis.explain("recompile_identity_guard", "recompile", [rec["raw"]], {})
    assert said.title == "Recompilation on an object-identity guard"
    assert "shape" not in said.fix.lower()


def test_layer_idx_guard():
    rec = _one("Recompiling function forward in /x/model.py:88 triggered by the following guard failure(s): "
               "- 3/0: self.layer_idx == 0")  # fmt: skip
    assert rec["rule_id"] == "recompile_identity_guard"


def test_ingest_reads_a_console_only_file(tmp_path: Path):
    store, files = ingest(tmp_path / "db.duckdb", TRAPS / "vllm_console_only" / "serve_console")
    store.close()
    assert [(f.status, f.parser, f.rows) for f in files] == [("ok", "cann_log", {"log_records": 6})]


def test_unclassified_beside_a_known_cause_is_not_a_second_root_cause(tmp_path):
    log = tmp_path / "in" / "console.log"
    log.parent.mkdir()
    log.write_text(
        "(EngineCore_DP0 pid=9) ERROR 11-26 11:43:04 [core.py:708] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
        "(EngineCore_DP0 pid=9) ERROR 11-26 11:43:04 [core.py:709] |  dest_ip(user_rank)  |   dest_port   |\n",
        encoding="utf-8",
    )
    rows = records(tmp_path / "db", log)
    assert [r["category"] for r in rows] == ["oom", "unclassified_error"]
    store = Store(tmp_path / "db" / "db.duckdb")
    causes = log_diagnosis.root_causes(store)
    store.close()
    assert [(c.category, c.severity) for c in causes] == [("oom", "high")]


def test_trap_hccl_fftsplus_stuck_notify_is_hccl_not_a_device_exception(tmp_path):
    rows = records(tmp_path, TRAPS / "hccl_fftsplus_stuck_notify" / "console.log")
    assert [(r["line_no"], r["category"]) for r in rows] == [
        (1, "task_timeout"),  # error code is 107020: ACL_ERROR_RT_TASK_TIMEOUT
        (2, "error_wrapper"),
        (3, "error_wrapper"),
        (4, "hccl_timeout"),
    ]
    assert rows[3]["codes"] == ["EI9999", "107020"]
    store = Store(tmp_path / "db.duckdb")
    top = log_diagnosis.root_causes(store)[0]
    store.close()
    assert (top.category, top.title) == ("hccl_timeout", "HCCL task timeout on the device (stuck notify)")
    assert "107020" in top.explanation and "507015" not in top.explanation
    assert [c["code"] for c in top.codes] == ["107020", "EI9999"]


# -- HCCL return codes (HcclResult) ----------------------------------------------------------------------------
def test_hccl_catalog_holds_hcclresult_1_to_24():
    hccl = {c: e for c, e in error_codes().items() if c.startswith("HCCL:")}
    assert sorted(int(c.split(":")[1]) for c in hccl) == list(range(1, 25))
    assert (hccl["HCCL:9"]["name"], hccl["HCCL:9"]["category"]) == ("HCCL_E_TIMEOUT", "hccl_timeout")
    assert (hccl["HCCL:24"]["name"], hccl["HCCL:24"]["category"]) == ("HCCL_E_OOM", "oom")


@pytest.mark.parametrize(
    ("line", "codes", "category"),
    [
        ("RuntimeError: HCCL function error: HcclAllReduce(sendbuf, recvbuf, count), error code is 9", ["HCCL:9"], "hccl_timeout"),
        ("[ERROR] HCCL(80812,):2026-06-17-02:21:43.853.666 [transport_manager.cc:470] [80880][Alloc]call trace: hcclRet -> 4",
         ["HCCL:4"], "unclassified_error"),  # HCCL_E_INTERNAL alone places nothing: an honest unknown with its code
        ("[WARNING] HCCL(80812,):2026-06-17-02:21:43.853.666 [x.cc:1] [80880]call trace: hcclRet -> 21", ["HCCL:21"], "hccl_timeout"),
        ("[INFO] GE(1,python):2026-06-17-02:21:43.853.666 [x.cc:1]1 error code is 9 of 12 tasks", None, None),  # no HCCL words
        # HCCL plog errNo: HCCL_ERROR_CODE = (5 << 24) + (sub-module << 16) + HcclResult, the low 16 bits in hex (#16)
        ("[ERROR] HCCL(2040034,python):2025-09-15-08:38:12.776.612 [op_base.cc:1][2040034][Wait]errNo[0x0000000005000009] wait remote rank ready fail",
         ["HCCL:9"], "hccl_timeout"),
        ("[ERROR] HCCL(2040034,python):2025-09-15-08:38:12.776.612 [x.cc:1][2040034]errNo[0x000000000501000b] socket connect fail",
         ["HCCL:11"], "hccl_timeout"),  # 0x0b = 11 HCCL_E_TCP_CONNECT, sub-module 1 (HCOM)
    ],
)  # fmt: skip
def test_hccl_return_codes_are_extracted_and_classify(line, codes, category):
    rec = _one(line)
    assert (rec["codes"], rec["category"]) == (codes, category)


def test_a_flattened_record_is_not_noise_and_its_key_line_names_the_failure(tmp_path):
    log = tmp_path / "in" / "console.log"
    log.parent.mkdir()
    log.write_text(
        "INFO 11-26 11:43:04 [model_runner.py:10] Loading model weights took 27.5376 GB\n"
        "        RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity)\n",
        encoding="utf-8",
    )
    rows = records(tmp_path / "db", log)
    assert [(r["line_count"], r["category"]) for r in rows] == [(2, "oom")]
    store = Store(tmp_path / "db" / "db.duckdb")
    (top,) = log_diagnosis.root_causes(store)
    (finding,) = log_diagnosis.log_findings(store)
    store.close()
    assert top.key_line.startswith("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB")
    assert finding.title.endswith(top.key_line) and "Loading model weights" not in finding.title


def test_key_line_of_a_long_flattened_line_is_cut_around_its_code():
    from diag.analyses.log_explain import key_line

    raw = (
        "Loading model weights took 27.5 GB " + "x" * 300 + " call aclnnRmsNorm failed, error code is 507014"
    )
    line = key_line(raw, "", "507014")
    assert len(line) <= 160 + 2 and line.endswith("error code is 507014") and "Loading" not in line


# -- CANN component codes and torch_npu ERRssccc: the hand-written catalog's category column ---------------------
@pytest.mark.parametrize(
    ("code", "category"),
    [
        ("EI0002", "hccl_timeout"),  # EI: HCCL
        ("EJ0002", "hccl_timeout"),  # EJ: HCCP
        ("EL0004", "oom"),  # EL: driver
        ("EZ3002", "op_unsupported"),  # EZ: operators / aclnn
        ("E39999", "device_exception"),  # E3: AI CPU
        ("E19022", "oom"),  # E1: GE
        ("EE1001", ""),  # EE: runtime "The argument is invalid": generic, its reason decides (#16, w2_038)
        ("EZ9999", ""),  # an Inner Error wrapper places nothing on its own
        ("ERR01007", "op_unsupported"),  # torch_npu OPS, not supported
        ("ERR02011", "hccl_timeout"),  # torch_npu DIST, timeout
        ("ERR00100", ""),  # torch_npu PTA call acl api failed: a wrapper
    ],
)
def test_component_code_category(code, category):
    assert error_codes()[code]["category"] == category


def test_rule_codes_agree_with_the_catalog_categories():
    catalog = error_codes()
    disagree = [
        (r.id, c, catalog[c]["category"])
        for r in cann_log.load_rules()
        if r.role in ("cause", "symptom")
        for c in r.codes
        if catalog[c]["category"] not in ("", r.category)
    ]
    assert disagree == []


def test_a_torch_npu_code_alone_classifies():
    rec = _one(
        "[ERROR] 2025-11-02-10:11:12 (PID:2345, Device:0, RankID:-1) ERR02011 DIST distributed timeout"
    )
    assert (rec["rule_id"], rec["category"]) == ("code_hccl", "hccl_timeout")


def test_a_key_line_cut_from_a_long_record_starts_and_ends_on_whole_words():
    from diag.analyses.log_explain import KEY_LINE_CHARS, key_line

    line = (
        "[WARNING] GE(1716292,python):2025-01-15-09:33:19.871.305 [engine_place.cc:139]1716292 Run:W11001: "
        "Op [ArgMaxV2] does not hit the high-priority operator information library, which might result in "
        "compromised performance. " + "padding words " * 20
    )
    got = key_line(line, r"does not hit the high-priority", "W11001")
    assert got.startswith("…Run:W11001: Op [ArgMaxV2] does not hit") and got.endswith("…")
    assert (
        len(got) <= KEY_LINE_CHARS + 2
        and got[-2] != " "
        and got.removesuffix("…").split()[-1] in line.split()
    )
    short = "[ERROR] RUNTIME(1,python):2025-01-15-09:33:19.871.305 Stream Synchronize failed, ErrCode=507035"
    assert key_line(short, r"Stream Synchronize failed", "507035") == short  # whole when it fits
