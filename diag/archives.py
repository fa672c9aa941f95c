"""Safe extraction of ``.zip`` / ``.tar.gz`` / ``.tgz`` / ``.tar`` archives of profiler folders.

An archive is untrusted: a member that would land outside the destination (``../x``, an absolute path, a
drive letter), a link, a device file, too many members, a member over the size cap or a suspicious
compression ratio refuses the whole archive, naming the member.  Nothing is written outside ``dest``.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from diag.errors import ArchiveError

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
_COPY_CHUNK = 1 << 20
# folders a member may be nested in: profiler output is < 10 deep; 1,000+ overflows the recursion of mkdir and
# os.walk (a crafted archive), so anything past this is refused before a byte is written
MAX_DEPTH = 64


@dataclass(frozen=True)
class ArchiveLimits:
    max_member_bytes: int = 8 << 30
    max_total_bytes: int = 32 << 30
    max_members: int = 100_000
    max_ratio: float = 200.0  # uncompressed / compressed, beyond which it is taken for a bomb


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return any(name.endswith(s) for s in ARCHIVE_SUFFIXES)


def zip_member_name(info: zipfile.ZipInfo) -> str:
    """The member's name as its writer meant it.  A zip without the UTF-8 flag stores names in the writer's
    code page, which Python reads as CP437: a zip made on a Chinese-locale Windows holds GBK bytes (as
    ``unzip -O GBK`` would read them), some tools write UTF-8 without setting the flag."""
    if info.flag_bits & 0x800 or info.filename.isascii():
        return info.filename
    raw = info.filename.encode("cp437")
    for encoding in ("utf-8", "gb18030"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return info.filename


def safe_relpath(archive: str, name: str) -> PurePosixPath:
    normalized = name.replace("\\", "/")
    if normalized.startswith("/") or (len(normalized) > 1 and normalized[1] == ":"):
        raise ArchiveError(archive, f"member {name!r} has an absolute path; refused")
    parts = [p for p in PurePosixPath(normalized).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveError(archive, f"member {name!r} escapes the archive folder; refused")
    if not parts:
        raise ArchiveError(archive, f"member {name!r} has an empty name; refused")
    if len(parts) > MAX_DEPTH:
        raise ArchiveError(
            archive,
            f"member {name[:80]!r}… is nested {len(parts) - 1} folders deep, more than {MAX_DEPTH}; refused",
        )
    return PurePosixPath(*parts)


class _Budget:
    def __init__(self, archive: str, limits: ArchiveLimits, archive_bytes: int) -> None:
        self.archive, self.limits, self.total = archive, limits, 0
        self.ratio_cap = max(archive_bytes, 1 << 20) * limits.max_ratio

    def take(self, member: str, n: int, member_total: int) -> None:
        self.total += n
        if member_total > self.limits.max_member_bytes:
            raise ArchiveError(
                self.archive,
                f"member {member!r} exceeds the size cap of {self.limits.max_member_bytes} bytes",
            )
        if self.total > self.limits.max_total_bytes:
            raise ArchiveError(
                self.archive, f"unpacks to more than the cap of {self.limits.max_total_bytes} bytes"
            )
        if self.total > self.ratio_cap:
            raise ArchiveError(
                self.archive, f"unpacks to over {self.limits.max_ratio:g}× its size (a decompression bomb?)"
            )


def _copy(src, dest: Path, member: str, budget: _Budget) -> None:  # type: ignore[no-untyped-def]
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dest, "xb") as out:
        while block := src.read(_COPY_CHUNK):
            written += len(block)
            budget.take(member, len(block), written)
            out.write(block)


def _target(dest: Path, rel: PurePosixPath, archive: str, name: str) -> Path:
    target = dest.joinpath(*rel.parts)
    root = dest.resolve()
    if root not in target.resolve().parents and target.resolve() != root:
        raise ArchiveError(archive, f"member {name!r} escapes the archive folder; refused")
    return target


def extract(
    archive: Path, dest: Path, limits: ArchiveLimits = ArchiveLimits(), display: str | None = None
) -> None:
    """Extract ``archive`` into the empty folder ``dest``, or raise ArchiveError and leave ``dest`` partial."""
    shown = display or str(archive)
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(shown, limits, archive.stat().st_size)
    name = archive.name.lower()
    try:
        if name.endswith(".zip"):
            _extract_zip(archive, dest, limits, budget, shown)
        else:
            _extract_tar(archive, dest, limits, budget, shown)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, ArchiveError):
            raise
        raise ArchiveError(shown, f"broken archive: {exc}") from None


def _extract_zip(archive: Path, dest: Path, limits: ArchiveLimits, budget: _Budget, shown: str) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        if len(infos) > limits.max_members:
            raise ArchiveError(shown, f"{len(infos)} members, more than the cap of {limits.max_members}")
        checked = []  # every member is vetted before anything is written
        for info in infos:
            rel = safe_relpath(shown, zip_member_name(info))
            ftype = stat.S_IFMT(info.external_attr >> 16)
            if ftype == stat.S_IFLNK:
                raise ArchiveError(shown, f"member {info.filename!r} is a symbolic link; refused")
            if ftype and ftype not in (stat.S_IFREG, stat.S_IFDIR):
                raise ArchiveError(shown, f"member {info.filename!r} is not a regular file; refused")
            if info.file_size > limits.max_member_bytes:
                raise ArchiveError(
                    shown, f"member {info.filename!r} exceeds the size cap of {limits.max_member_bytes} bytes"
                )
            checked.append((info, _target(dest, rel, shown, info.filename)))
        if sum(i.file_size for i, _ in checked) > limits.max_total_bytes:
            raise ArchiveError(shown, f"unpacks to more than the cap of {limits.max_total_bytes} bytes")
        for info, target in checked:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            with zf.open(info) as src:
                _copy(src, target, info.filename, budget)


def _extract_tar(archive: Path, dest: Path, limits: ArchiveLimits, budget: _Budget, shown: str) -> None:
    with tarfile.open(archive, mode="r:*") as tf:
        count = 0
        for member in tf:
            count += 1
            if count > limits.max_members:
                raise ArchiveError(shown, f"more members than the cap of {limits.max_members}")
            rel = safe_relpath(shown, member.name)
            if member.issym() or member.islnk():
                raise ArchiveError(shown, f"member {member.name!r} is a link; refused")
            if not (member.isfile() or member.isdir()):
                raise ArchiveError(shown, f"member {member.name!r} is not a regular file; refused")
            target = _target(dest, rel, shown, member.name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if member.size > limits.max_member_bytes:
                raise ArchiveError(
                    shown, f"member {member.name!r} exceeds the size cap of {limits.max_member_bytes} bytes"
                )
            src = tf.extractfile(member)
            if src is None:
                continue
            with src:
                _copy(src, target, member.name, budget)
            os.chmod(target, 0o644)
