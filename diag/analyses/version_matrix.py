"""The published version pairings (rules/version_matrix.toml) and the check of one set of versions against them.

``check_versions({"torch_npu": "2.1.0.post8", "cann": "8.0.0"})`` gives, per component, ``unknown`` (in no table),
``supported`` (its pairing is published) or ``mismatched`` with what to install instead: "torch_npu 2.1.0.post8
pairs with CANN 8.0.RC3; this run has CANN 8.0.0". Versions compare as the matrix file's header says: CANN by
release family, torch_npu exactly after normalising.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from diag.i18n import t

MATRIX = Path(__file__).resolve().parent.parent / "rules" / "version_matrix.toml"
LABELS = {"cann": "CANN", "torch_npu": "torch_npu", "torch": "PyTorch", "python": "Python", "vllm": "vLLM",
          "vllm_ascend": "vLLM-Ascend", "mindie": "MindIE", "driver": "Ascend HDK (driver)"}  # fmt: skip
COMPONENTS = tuple(LABELS)


@dataclass
class Check:
    status: str  # unknown | supported | mismatched
    expected: str = ""  # what pairs with the others (the version to install when mismatched)
    reason: str = ""  # one sentence: why this status


@cache
def matrix() -> dict[str, Any]:
    with open(MATRIX, "rb") as fh:
        return tomllib.load(fh)


def source_of(row: dict[str, Any]) -> str:
    return str(matrix()["sources"].get(row.get("source", ""), ""))


def norm_npu(version: str) -> str:
    """2.8.0post2 → 2.8.0.post2; 2.9.0.post1+git4c901a4 → 2.9.0.post1."""
    v = version.strip().lower().lstrip("v").split("+")[0]
    return re.sub(r"(\d)(post|rc|dev)", r"\1.\2", v)


def base(version: str) -> str:
    """The x.y.z a torch_npu / PyTorch version starts with (the PyTorch release it adapts)."""
    m = re.match(r"\d+\.\d+(?:\.\d+)?", version.strip().lstrip("v"))
    return m.group() if m else version


def cann_family(version: str) -> str:
    """8.2.RC1.alpha003 → 8.2.RC1; 8.5.1 → 8.5 (a final release stands for its patch versions)."""
    m = re.match(r"(\d+)\.(\d+)\.(rc\d+|\d+)", version.strip().lstrip("v"), re.IGNORECASE)
    if not m:
        return version.strip().upper()
    major, minor, third = m.groups()
    return f"{major}.{minor}.{third.upper()}" if third.lower().startswith("rc") else f"{major}.{minor}"


def norm_plain(version: str) -> str:
    return version.strip().lower().lstrip("v")


def _pairs() -> list[tuple[str, str]]:
    """(torch_npu, CANN) from both tables: vLLM-Ascend's rows name torch_npu builds Ascend/pytorch's table lacks."""
    m = matrix()
    rows = [(r["torch_npu"], r["cann"]) for r in m["torch_npu"]]
    return rows + [(r["torch_npu"], r["cann"]) for r in m["vllm_ascend"]]


def _join(items: list[str]) -> str:
    items = list(dict.fromkeys(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + t("vm.or") + items[-1]


def check_npu_cann(npu: str | None, cann: str | None) -> dict[str, Check]:
    pairs = _pairs()
    out: dict[str, Check] = {}
    npu_cann = [c for n, c in pairs if npu and norm_npu(n) == norm_npu(npu)]
    cann_npu = [n for n, c in pairs if cann and cann_family(c) == cann_family(cann)]
    if cann:
        out["cann"] = (
            Check("supported", _join(cann_npu) and f"torch_npu {_join(cann_npu)}")
            if cann_npu
            else Check("unknown", reason=t("vm.cann_unpaired", cann=cann))
        )
    if not npu:
        return out
    if not npu_cann:
        out["torch_npu"] = Check("unknown", reason=t("vm.npu_unpaired", npu=npu))
        return out
    if not cann or not cann_npu or any(cann_family(c) == cann_family(cann) for c in npu_cann):
        out["torch_npu"] = Check("supported", f"CANN {_join(npu_cann)}")
        return out
    same_torch = [n for n in cann_npu if base(n) == base(npu)]
    install = _join(same_torch or cann_npu)
    if same_torch:  # the same PyTorch has a build for this CANN: change torch_npu only
        reason = t("vm.install_npu", cann=cann, npu=npu, install=install, other=_join(npu_cann))
    else:  # no build of this PyTorch for this CANN: changing CANN keeps the model's PyTorch
        reason = t(
            "vm.install_cann", cann=cann, npu=npu, install=install, other=_join(npu_cann), torch=base(npu)
        )
    out["torch_npu"] = Check("mismatched", f"CANN {_join(npu_cann)}", reason)
    out["cann"] = Check("mismatched", f"torch_npu {install}", reason)
    return out


def check_torch(torch: str | None, npu: str | None, python: str | None) -> dict[str, Check]:
    out: dict[str, Check] = {}
    py_rows = {base(r["torch"]): r["python"] for r in matrix()["python"]}
    if torch:
        if npu and base(torch) != base(npu):
            out["torch"] = Check(
                "mismatched",
                f"PyTorch {base(npu)}",
                t("vm.torch_mismatch", npu=npu, built=base(npu), torch=torch),
            )
        elif base(torch) in py_rows:
            out["torch"] = Check("supported", f"torch_npu {base(torch)}[.postN]")
        else:
            out["torch"] = Check("unknown", reason=t("vm.torch_unpaired", torch=torch))
    if python:
        pys = py_rows.get(base(torch)) if torch else None
        if pys is None:
            out["python"] = Check("unknown", reason=t("vm.no_torch"))
        elif base(python) in [base(p) for p in pys]:
            out["python"] = Check("supported", f"Python {_join(pys)}")
        else:
            reason = t("vm.python_mismatch", torch=torch, pys=_join(pys), python=python)
            out["python"] = Check("mismatched", f"Python {_join(pys)}", reason)
    return out


def check_vllm_ascend(found: dict[str, str]) -> dict[str, Check]:
    va = found.get("vllm_ascend")
    if not va:
        return {}
    row = next((r for r in matrix()["vllm_ascend"] if norm_plain(r["vllm_ascend"]) == norm_plain(va)), None)
    if row is None:
        return {"vllm_ascend": Check("unknown", reason=t("vm.va_unknown", va=va))}
    wanted = f"vLLM {'/'.join(row['vllm'])}, torch_npu {row['torch_npu']}, CANN {row['cann']}"
    wrong = []
    if found.get("vllm") and norm_plain(found["vllm"]) not in [norm_plain(v) for v in row["vllm"]]:
        wrong.append(f"vLLM {found['vllm']}")
    if found.get("torch_npu") and base(found["torch_npu"]) != base(row["torch_npu"]):
        wrong.append(f"torch_npu {found['torch_npu']}")
    if found.get("cann") and cann_family(found["cann"]) != cann_family(row["cann"]):
        wrong.append(f"CANN {found['cann']}")
    if not wrong:
        return {"vllm_ascend": Check("supported", wanted)}
    reason = t("vm.va_mismatch", va=va, wanted=wanted, wrong=", ".join(wrong))
    out = {"vllm_ascend": Check("mismatched", wanted, reason)}
    if found.get("vllm") and f"vLLM {found['vllm']}" in wrong:
        out["vllm"] = Check("mismatched", f"vLLM {'/'.join(row['vllm'])}", reason)
    return out


def check_cann_pairs(found: dict[str, str]) -> dict[str, Check]:
    """MindIE ↔ CANN and driver (Ascend HDK) ↔ CANN."""
    cann, out = found.get("cann"), {}
    if found.get("mindie"):
        row = next((r for r in matrix()["mindie"] if r["mindie"].lower() == found["mindie"].lower()), None)
        if row is None or not cann:
            out["mindie"] = Check("unknown", reason=t("vm.mindie_unknown", mindie=found["mindie"]))
        elif cann_family(row["cann"]) == cann_family(cann):
            out["mindie"] = Check("supported", f"CANN {row['cann']}")
        else:
            reason = t("vm.mindie_mismatch", mindie=found["mindie"], want=row["cann"], cann=cann)
            out["mindie"] = Check("mismatched", f"CANN {row['cann']}", reason)
    if found.get("driver") and cann:
        rows = [r for r in matrix()["driver"] if r["cann"] == cann] or [
            r for r in matrix()["driver"] if cann_family(r["cann"]) == cann_family(cann)
        ]
        hdk = [h for r in rows for h in r["hdk"]]
        drv = found["driver"].upper()
        if not hdk:
            out["driver"] = Check("unknown", reason=t("vm.hdk_unknown", cann=cann))
        elif any(drv == h.upper() or drv.startswith(h.upper() + ".") for h in hdk):
            out["driver"] = Check("supported", f"Ascend HDK {_join(hdk)}")
        else:
            reason = t("vm.hdk_mismatch", cann=cann, hdk=_join(hdk), driver=found["driver"])
            out["driver"] = Check("mismatched", f"Ascend HDK {_join(hdk)}", reason)
    return out


def check_versions(found: dict[str, str]) -> dict[str, Check]:
    """One check per component in ``found`` (component → version, the one each component is judged by)."""
    out: dict[str, Check] = {}
    out.update(check_npu_cann(found.get("torch_npu"), found.get("cann")))
    out.update(check_torch(found.get("torch"), found.get("torch_npu"), found.get("python")))
    for extra in (check_vllm_ascend(found), check_cann_pairs(found)):
        # a mismatch found by a later table is kept over an earlier "supported"
        for comp, chk in extra.items():
            if out.get(comp) is None or out[comp].status != "mismatched":
                out[comp] = chk
    for comp in found:
        out.setdefault(comp, Check("unknown", reason=t("vm.no_pairing", comp=LABELS.get(comp, comp))))
    return out
