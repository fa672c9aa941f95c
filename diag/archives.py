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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

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
    # archives (and members) smaller than this are held to the ratio as if they were this big: a small archive
    # of small, repetitive files is not a bomb
    ratio_floor_bytes: int = 1 << 20


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
    """The running count of bytes written, checked before each chunk is written: extraction stops at the first
    chunk that would go over a cap, whatever the headers declared (they can lie)."""

    def __init__(self, archive: str, limits: ArchiveLimits, archive_bytes: int) -> None:
        self.archive, self.limits, self.total = archive, limits, 0
        self.ratio_cap = max(archive_bytes, limits.ratio_floor_bytes) * limits.max_ratio
        self.compressed_read: Callable[[], int] | None = None  # tar.gz: compressed bytes consumed so far

    def declare(self, member: str, size: int) -> None:
        """A member's declared size, before a byte of it is written (a tar member as it comes)."""
        if size > self.limits.max_member_bytes:
            raise ArchiveError(
                self.archive, f"member {member!r} declares {size:,} bytes: {self._member_cap()}"
            )
        if self.total + size > min(self.limits.max_total_bytes, self.ratio_cap):
            raise ArchiveError(self.archive, f"at member {member!r}: unpacks to {self._total_cap()}")

    def take(self, member: str, n: int, member_total: int) -> None:
        if member_total > self.limits.max_member_bytes:
            raise ArchiveError(self.archive, f"member {member!r} {self._member_cap()}")
        total = self.total + n
        if total > min(self.limits.max_total_bytes, self.ratio_cap):
            raise ArchiveError(self.archive, f"at member {member!r}: unpacks to {self._total_cap()}")
        if self.compressed_read is not None:
            consumed = max(self.compressed_read(), self.limits.ratio_floor_bytes)
            if total > consumed * self.limits.max_ratio:
                raise ArchiveError(
                    self.archive,
                    f"at member {member!r}: {total:,} bytes unpacked from {consumed:,} compressed, over the "
                    f"cap of {self.limits.max_ratio:g}× (a decompression bomb?); refused",
                )
        self.total = total

    def _member_cap(self) -> str:
        return f"exceeds the size cap of {self.limits.max_member_bytes:,} bytes per member; refused"

    def _total_cap(self) -> str:
        if self.ratio_cap < self.limits.max_total_bytes:
            return (
                f"more than the cap of {self.ratio_cap:,.0f} bytes ({self.limits.max_ratio:g}× the archive's "
                "size: a decompression bomb?); refused"
            )
        return f"more than the cap of {self.limits.max_total_bytes:,} bytes; refused"


def _copy(src: BinaryIO, dest: Path, member: str, budget: _Budget) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dest, "xb") as out:
        while block := src.read(_COPY_CHUNK):
            written += len(block)
            budget.take(member, len(block), written)  # before the write: nothing over the cap reaches disk
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


def _check_zip_declared(
    infos: list[zipfile.ZipInfo], limits: ArchiveLimits, archive_bytes: int, shown: str
) -> None:
    """Refuse from the central directory alone, before a byte is written: a member over the size cap or whose
    declared sizes say it unpacks more than ``max_ratio`` times its compressed size, a total over the caps, and
    compressed sizes that add up to more than the archive itself (headers that lie)."""
    for info in infos:
        if info.file_size > limits.max_member_bytes:
            raise ArchiveError(
                shown,
                f"member {info.filename!r} declares {info.file_size:,} bytes: exceeds the size cap of "
                f"{limits.max_member_bytes:,} bytes per member; refused",
            )
        packed = max(info.compress_size, limits.ratio_floor_bytes)
        if info.file_size > packed * limits.max_ratio:
            raise ArchiveError(
                shown,
                f"member {info.filename!r} declares {info.file_size:,} bytes from {info.compress_size:,} "
                f"compressed, over the cap of {limits.max_ratio:g}× (a decompression bomb?); refused",
            )
    packed_total = sum(i.compress_size for i in infos)
    if packed_total > archive_bytes:
        raise ArchiveError(
            shown,
            f"its headers declare {packed_total:,} compressed bytes, more than the archive's {archive_bytes:,}: "
            "they lie (a crafted or damaged archive); refused",
        )
    declared = sum(i.file_size for i in infos)
    ratio_cap = max(archive_bytes, limits.ratio_floor_bytes) * limits.max_ratio
    if declared > min(limits.max_total_bytes, ratio_cap):
        cap = min(limits.max_total_bytes, int(ratio_cap))
        raise ArchiveError(
            shown,
            f"unpacks to more than the cap of {cap:,} bytes (its members declare {declared:,}); refused",
        )


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
            checked.append((info, _target(dest, rel, shown, info.filename)))
        _check_zip_declared(infos, limits, archive.stat().st_size, shown)
        for info, target in checked:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            try:
                with zf.open(info) as src:  # zipfile stops at the declared size; the budget at the caps
                    _copy(src, target, info.filename, budget)
            except zipfile.BadZipFile as exc:
                raise ArchiveError(
                    shown,
                    f"member {info.filename!r} does not match its declared size or checksum ({exc}): "
                    "a crafted or damaged archive; refused",
                ) from None


def _compressed_position(tf: tarfile.TarFile) -> Callable[[], int] | None:
    """How many bytes of the compressed file a tar.gz / tar.bz2 / tar.xz reader has consumed; None for a plain tar."""
    raw = getattr(tf.fileobj, "fileobj", None)  # GzipFile / BZ2File / LZMAFile over the opened file
    if raw is None or not hasattr(raw, "tell"):
        return None
    return raw.tell


def _extract_tar(archive: Path, dest: Path, limits: ArchiveLimits, budget: _Budget, shown: str) -> None:
    with tarfile.open(archive, mode="r:*") as tf:
        budget.compressed_read = _compressed_position(tf)
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
            budget.declare(member.name, member.size)  # its header, before a byte of it is written
            src = tf.extractfile(member)
            if src is None:
                continue
            with src:
                _copy(src, target, member.name, budget)
            os.chmod(target, 0o644)
