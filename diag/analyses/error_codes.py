"""The error-code catalog: what a CANN / torch_npu / runtime code means and its usual fix.

``diag/rules/error_codes.csv`` holds the codes seen in logs and the format notes; ``error_codes_cann_registry.csv``
every CANN component code of the open-source CANN error-code registries (their message and suggestion), and the
other ``error_codes_*.csv`` the return codes of the public headers; a code none holds (other CANN versions print
others) is described by its spelling, from ``diag/rules/error_code_parts.csv``.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

from diag.i18n import catalog, current_language, t

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
ERROR_CODES = RULES_DIR / "error_codes.csv"
ERROR_CODE_PARTS = RULES_DIR / "error_code_parts.csv"
ACL_CODES = RULES_DIR / "error_codes_acl.csv"  # every ACL / runtime / GE return code of the public headers
HCCL_CODES = RULES_DIR / "error_codes_hccl.csv"  # HcclResult, stored as HCCL:<n>
DCMI_CODES = RULES_DIR / "error_codes_dcmi.csv"  # NPU management (npu-smi) return codes, stored as DCMI:<n>
# Every CANN component code (E|W + class + 4 digits) of the open-source CANN error-code registries (8.5 – 9.2)
CANN_CODES = RULES_DIR / "error_codes_cann_registry.csv"
# The header catalogs of the other stacks, one place for the diagnosis and the log rules' codes_from: NVIDIA
# (cudaError_t / ncclResult_t / cublasStatus_t / cudnnStatus_t: CUDA:<name>, NCCL:<name> …), AMD ROCm (hipError_t,
# rocblas_status, hipblasStatus_t: HIP:, ROCBLAS:, HIPBLAS:) and Intel XPU (ur_result_t, ze_result_t, pi_result: UR:,
# ZE:, PI:)
NAMED_CODE_CATALOGS = tuple(
    RULES_DIR / f"error_codes_{k}.csv"
    for k in ("cuda", "nccl", "cublas", "cudnn", "hip", "rocblas", "hipblas", "ur", "ze", "pi")
)


def _read(path: Path) -> dict[str, dict[str, str]]:
    with open(path, encoding="utf-8") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {r["code"]: r for r in rows}


@lru_cache(maxsize=1)
def _read_registry(path: Path = CANN_CODES) -> dict[str, dict[str, str]]:
    """The CANN registries' rows as a person reads them: the message's ``%s`` slots shown as ``…`` and a component
    the registry leaves out (TBE op checks) named from the code's class letter."""
    return {
        code: {
            **row,
            "meaning": row["meaning"].replace("%s", "…").strip(),
            "component": row["component"] or _cann_component(code),
        }
        for code, row in _read(path).items()
    }


@lru_cache(maxsize=2)
def error_codes(
    path: Path = ERROR_CODES, acl_path: Path = ACL_CODES, hccl_path: Path = HCCL_CODES
) -> dict[str, dict[str, str]]:
    """The hand-written catalog over the header catalogs: its words (seen in logs) win, the headers add the
    constant's ``name`` and the ``category`` a code implies on its own."""
    headers = _read_registry() | _read(acl_path) | _read(hccl_path) | _read(DCMI_CODES)
    for named in NAMED_CODE_CATALOGS:
        headers |= _read(named)
    merged = {code: dict(row) for code, row in headers.items()}
    for code, row in _read(path).items():
        merged[code] = {**merged.get(code, {}), **row}
    return merged


@lru_cache(maxsize=2)
def _code_parts(path: Path = ERROR_CODE_PARTS) -> dict[tuple[str, str], str]:
    with open(path, encoding="utf-8") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {(r["kind"], r["key"]): r["name"] for r in rows}


_CANN_CODE = re.compile(r"^[EWI]([0-9A-Z])(\d)\d{3}$")
_PTA_CODE = re.compile(r"^ERR(\d\d)(\d{3})$")
_RETURN_CODE = re.compile(r"^\d{6}$")


@lru_cache(maxsize=1)
def _hand_written_codes() -> frozenset[str]:
    return frozenset(_read(ERROR_CODES))


def _cann_component(code: str) -> str:
    """The component a CANN code's class letter names (``rules/error_code_parts.csv``), "" for another spelling."""
    m = _CANN_CODE.match(code)
    return _code_parts().get(("cann_class", m.group(1)), "") if m else ""


_CATALOG_PREFIX = {
    "HCCL": "hccl",
    "CUDA": "cuda",
    "NCCL": "nccl",
    "CUBLAS": "cublas",
    "CUDNN": "cudnn",
    "DCMI": "dcmi",
    "HIP": "hip",
    "ROCBLAS": "rocblas",
    "HIPBLAS": "hipblas",
    "UR": "ur",
    "ZE": "ze",
    "PI": "pi",
}


def catalog_of(code: str) -> str:
    """The catalog whose words a code's meaning is (the i18n key ``error_code.<catalog>.<code>``): the
    hand-written one (``cann``) wins, as in ``error_codes``, then the CANN registries' (``cann_registry``); else its
    ``HCCL:`` / ``CUDA:`` … prefix, else ACL."""
    if code in _hand_written_codes():
        return "cann"
    if code in _read_registry():
        return "cann_registry"
    return _CATALOG_PREFIX.get(code.split(":", 1)[0], "acl") if ":" in code else "acl"


def translated_meaning(code: str, english: str) -> str:
    """The meaning in the current language (``diag/i18n/zh.error_codes.toml``), else the catalog's English."""
    if not english or current_language() == "en":
        return english
    return catalog(current_language()).get(f"error_code.{catalog_of(code)}.{code}") or english


def describe_code(code: str) -> dict[str, str]:
    """The catalog's entry for ``code`` (its meaning and typical fix in the current language: the fix's Chinese is
    keyed by its English, ``error_fix.<English>``, as many codes share one); for a code it lacks (other CANN
    versions print others), what its spelling says: the component of a CANN code, the sub-module and kind of a
    torch_npu ERRssccc."""
    known = error_codes().get(code)
    if known:
        if current_language() == "en":
            return known
        fix = known.get("typical_fix", "")
        texts = catalog(current_language())
        return {**known, "meaning": translated_meaning(code, known.get("meaning", "")),
                "typical_fix": texts.get(f"error_fix.{fix}", fix) if fix else fix}  # fmt: skip
    parts = _code_parts()
    entry = {"code": code, "component": "", "meaning": "", "typical_fix": ""}
    if m := _CANN_CODE.match(code):
        entry["component"] = _cann_component(code)
        level = t(f"error_code_spelling.{code[0]}")
        entry["meaning"] = t("error_code_spelling.inner", level=level) if m.group(2) == "9" else level
    elif m := _PTA_CODE.match(code):
        entry["component"] = parts.get(("pta_module", m.group(1)), "torch_npu")
        entry["meaning"] = parts.get(("pta_kind", m.group(2)), "")
    elif _RETURN_CODE.match(code):
        entry["component"] = "runtime / ACL return code"
    if entry["component"] or entry["meaning"]:
        entry["meaning"] = t(
            "error_code_spelling.meaning", meaning=entry["meaning"] or t("error_code_spelling.unknown")
        )
        entry["typical_fix"] = t("error_code_spelling.fix")
    return entry
