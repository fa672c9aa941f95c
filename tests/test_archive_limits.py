"""Archive bombs are measured by the bytes they write: a bomb is refused from its declared sizes before a byte is
written, and when the headers lie, the running cap stops extraction at the first chunk over it."""

from __future__ import annotations

import io
import os
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from diag import archives
from diag.archives import ArchiveLimits
from diag.errors import ArchiveError

MEMBER = "run/ASCEND_PROFILER_OUTPUT/trace_view.json"
MB = 1 << 20


def bytes_under(folder: Path) -> int:
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(folder) for f in files)


class _ZeroMegabytes:
    """Stands in for zlib's compressor while a test writes megabytes of zeros: each 1 MB chunk is compressed
    once, with a full flush, so every chunk's deflate bytes are identical and can be repeated (a 4 GB member in
    about a second instead of a minute; the archive is still a valid deflate stream)."""

    def __init__(self) -> None:
        co = zlib.compressobj(9, zlib.DEFLATED, -15)
        self._block = co.compress(bytes(MB)) + co.flush(zlib.Z_FULL_FLUSH)
        self._end = co.flush()

    def compress(self, data: bytes) -> bytes:
        assert data == bytes(MB)
        return self._block

    def flush(self) -> bytes:
        return self._end


def zeros_zip(path: Path, megabytes: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    with monkeypatch.context() as m:
        m.setattr(zipfile, "_get_compressor", lambda *_: _ZeroMegabytes())
        with (
            zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf,
            zf.open(MEMBER, "w", force_zip64=True) as out,
        ):
            for _ in range(megabytes):
                out.write(bytes(MB))
    return path


def _patch_central_sizes(path: Path, *, compressed: int | None = None, size: int | None = None) -> None:
    """Rewrite the one member's sizes in the central directory (what zipfile reads): the headers now lie about
    what the deflate stream holds.  A member under 4 GB keeps them in the 32-bit fields."""
    data = bytearray(path.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    real_compressed, real_size = struct.unpack_from("<II", data, central + 20)
    assert 0xFFFFFFFF not in (real_compressed, real_size)
    struct.pack_into("<II", data, central + 20, compressed or real_compressed, size or real_size)
    path.write_bytes(bytes(data))


def test_4gb_zip_bomb_is_refused_before_a_byte_is_written(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    bomb = zeros_zip(tmp_path / "bomb.zip", 4096, monkeypatch)
    assert bomb.stat().st_size < 8 * MB  # ~1,000:1
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as err:
        archives.extract(bomb, dest)
    assert f"member {MEMBER!r} declares 4,294,967,296 bytes from " in str(err.value)
    assert "over the cap of 200×" in str(err.value)
    assert bytes_under(dest) == 0


def test_zip_whose_compressed_size_lies_is_refused_unread(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    bomb = zeros_zip(tmp_path / "lie.zip", 512, monkeypatch)
    _patch_central_sizes(bomb, compressed=512 * MB)  # "1:1", so the member's ratio looks harmless
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as err:
        archives.extract(bomb, dest)
    assert "its headers declare 536,870,912 compressed bytes, more than the archive's" in str(err.value)
    assert bytes_under(dest) == 0


def test_zip_whose_size_lies_stops_at_the_declared_size(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    bomb = zeros_zip(tmp_path / "lie.zip", 512, monkeypatch)
    _patch_central_sizes(bomb, size=3 * MB)  # says 3 MB; the stream holds 512 MB
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as err:
        archives.extract(bomb, dest)
    assert f"member {MEMBER!r} does not match its declared size or checksum" in str(err.value)
    assert bytes_under(dest) <= 3 * MB


def test_zip_running_cap_stops_at_the_first_chunk_over(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    archive = zeros_zip(tmp_path / "a.zip", 64, monkeypatch)
    cap = 10 * MB + 5
    dest = tmp_path / "out"
    with monkeypatch.context() as m:  # the declared sizes pass, so only the running count can stop it
        m.setattr(archives, "_check_zip_declared", lambda *_: None)
        with pytest.raises(ArchiveError) as err:
            archives.extract(archive, dest, ArchiveLimits(max_total_bytes=cap, max_ratio=1e9))
    assert str(err.value).endswith(
        f"at member {MEMBER!r}: unpacks to more than the cap of 10,485,765 bytes; refused"
    )
    assert bytes_under(dest) <= cap


def _zeros_tar_gz(path: Path, members: int, member_mb: int) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        for i in range(members):
            info = tarfile.TarInfo(f"run{i}/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
            info.size = member_mb * MB
            tf.addfile(info, io.BytesIO(bytes(info.size)))
    return path


def test_tar_gz_bomb_stops_at_the_running_ratio_cap(tmp_path: Path) -> None:
    """A tar.gz declares each member's size only as it comes, and each header is honest; the gzip layer is the
    bomb.  The bytes written are held to max_ratio × the compressed bytes read so far (at least the floor)."""
    bomb = _zeros_tar_gz(tmp_path / "bomb.tar.gz", 6, 16)  # 96 MB of zeros in < 1 MB
    limits = ArchiveLimits(ratio_floor_bytes=64 << 10)  # 200 × 64 KB = 12.8 MB before the ratio is checked
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as err:
        archives.extract(bomb, dest, limits)
    message = str(err.value)
    assert "at member 'run0/ASCEND_PROFILER_OUTPUT/kernel_details.csv':" in message
    assert "over the cap of 200× (a decompression bomb?); refused" in message
    # the compressed position runs ahead of the decompressed output by one gzip read buffer (128 KB)
    assert bytes_under(dest) <= (64 << 10) * 200 + (128 << 10) * 200 + MB


def test_tar_member_over_the_ratio_of_the_whole_archive_is_refused_from_its_header(tmp_path: Path) -> None:
    bomb = _zeros_tar_gz(tmp_path / "bomb.tar.gz", 1, 64)
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as err:
        archives.extract(bomb, dest, ArchiveLimits(max_ratio=20))
    assert (
        "at member 'run0/ASCEND_PROFILER_OUTPUT/kernel_details.csv': unpacks to more than the cap of"
        in str(err.value)
    )
    assert "20× the archive's size" in str(err.value)
    assert bytes_under(dest) == 0


def test_dense_archive_under_the_caps_extracts_whole(tmp_path: Path) -> None:
    """The caps do not refuse ordinary data: 4 MB of random-ish text compresses ~2:1 and is written whole."""
    text = b"".join(b"%d,aclnnMatMul_%d,%d\n" % (i, i * 7919 % 1000, i * 31) for i in range(200_000))
    archive = tmp_path / "ok.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("run/kernel_details.csv")
        info.size = len(text)
        tf.addfile(info, io.BytesIO(text))
    archives.extract(archive, tmp_path / "out", ArchiveLimits(ratio_floor_bytes=64 << 10))
    assert bytes_under(tmp_path / "out") == len(text)


def test_archive_inside_an_archive_is_never_unpacked(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A nested bomb is written as the small file it is: members are extracted one level deep only."""
    inner = zeros_zip(tmp_path / "inner.zip", 1024, monkeypatch)  # 1 GB of zeros in ~1 MB
    outer = tmp_path / "outer.tar.gz"
    with tarfile.open(outer, "w:gz") as tf:
        tf.add(inner, arcname="run/inner.zip")
    dest = tmp_path / "out"
    archives.extract(outer, dest)
    assert [p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()] == ["run/inner.zip"]
    assert bytes_under(dest) == inner.stat().st_size
