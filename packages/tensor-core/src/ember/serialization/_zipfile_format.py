"""PyTorch's checkpoint container: an uncompressed zip whose records are 64-byte aligned.

Layout (what ``torch.save`` 2.x writes, checked by listing its output)::

    <archive>/data.pkl                 the pickled object graph (protocol 2)
    <archive>/.format_version          "1"
    <archive>/.storage_alignment       "64"
    <archive>/byteorder                "little"
    <archive>/data/<key>               one raw storage per key
    <archive>/version                  "3\\n"

``<archive>`` is the file's base name without extension ("archive" for file objects); readers
take whatever single top-level folder the zip has. Each record's bytes start on a 64-byte
boundary thanks to a padding extra field (id ``FB``) in its local header, so a reader can map
them in place. The writer is ours (deterministic: fixed timestamps, zip64 only when needed);
the reader is the standard ``zipfile`` module plus the checks a hostile file needs.
"""

from __future__ import annotations

import io
import struct
import zlib

from .._src._native import _C
from ._errors import UnpicklingError

ALIGNMENT = 64
_U32 = 0xFFFFFFFF
_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01: fixed so identical saves give identical files
_PAD_ID = 0x4246  # "FB", the extra-field id PyTorch uses for its alignment padding
_CHUNK = 1 << 24
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # torch's pre-1.6 format


class ZipWriter:
    """Writes records to a binary stream (only ``write`` is needed: offsets are counted here)."""

    def __init__(self, f, archive: str, force_zip64: bool = False):
        self._f = f
        self._archive = archive
        self._force_zip64 = force_zip64
        self._pos = 0
        self._entries: list[tuple[bytes, int, int, int, bool]] = []

    def _write(self, data) -> None:
        self._f.write(data)
        self._pos += memoryview(data).nbytes

    def write_record(self, name: str, data) -> None:
        view = memoryview(data).cast("B")
        size = view.nbytes
        name_b = f"{self._archive}/{name}".encode()
        crc = zlib.crc32(view)
        offset = self._pos
        zip64 = self._force_zip64 or size >= _U32 or offset >= _U32
        extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        pad = -(offset + 30 + len(name_b) + len(extra) + 4) % ALIGNMENT
        extra += struct.pack("<HH", _PAD_ID, pad) + b"Z" * pad
        stored = _U32 if zip64 else size
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, 0, 0, 0, _DOS_DATE, crc, stored,
                                stored, len(name_b), len(extra)))
        self._write(name_b + extra)
        self._write(view)
        self._entries.append((name_b, crc, size, offset, zip64))

    def close(self) -> None:
        cd_start = self._pos
        any64 = False
        for name_b, crc, size, offset, zip64 in self._entries:
            zip64 = zip64 or offset >= _U32
            any64 |= zip64
            extra = struct.pack("<HHQQQ", 1, 24, size, size, offset) if zip64 else b""
            stored, off = (_U32, _U32) if zip64 else (size, offset)
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45 if zip64 else 20, 0, 0, 0, _DOS_DATE,
                                    crc, stored, stored, len(name_b), len(extra), 0, 0, 0, 0, off))
            self._write(name_b + extra)
        cd_size = self._pos - cd_start
        n = len(self._entries)
        if any64 or n >= 0xFFFF or cd_start >= _U32 or cd_size >= _U32:
            eocd64 = self._pos
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
        self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), min(cd_size, _U32),
                                min(cd_start, _U32), 0))


class ZipReader:
    """Validated access to a checkpoint zip's records; every failure is a ``RuntimeError`` (an
    ``UnpicklingError`` for bytes that are not a zip, an ``EOFError`` for an empty file, as in PyTorch)."""

    def __init__(self, f, source: str, use_mmap: bool = False):
        import zipfile  # here, not at module level: `import ember` should not pay for it

        self._source = source
        f.seek(0, io.SEEK_END)
        self._size = f.tell()
        f.seek(0)
        if self._size == 0:
            # PyTorch reads an empty file as a pickle stream that ends at once: EOFError, which
            # programs catch to tell "nothing saved yet" from a damaged file.
            raise EOFError(f"{source} is empty: there is no checkpoint to load (Ran out of input)")
        try:
            self._zip = zipfile.ZipFile(f)
            infos = self._zip.infolist()
        except Exception as exc:  # BadZipFile, struct.error, ValueError, OSError ... on a damaged file
            f.seek(0)
            head = f.read(len(_LEGACY_MAGIC))
            if head == _LEGACY_MAGIC:
                raise RuntimeError(
                    f"{source} uses PyTorch's legacy (pre-1.6, non-zip) format, which ember cannot read; re-save it "
                    "with a current torch.save"
                ) from None
            message = f"{source} is not a valid checkpoint: failed reading zip archive ({exc})"
            if head[:2] != b"PK" and head:
                # Not a zip at all: PyTorch reads such bytes as a legacy pickle, which fails with
                # pickle.UnpicklingError; ember's is that and a RuntimeError.
                raise UnpicklingError(message) from exc
            raise RuntimeError(message) from exc
        self._records = {}
        prefixes = set()
        names = set()
        for info in infos:
            if info.filename in names:
                # zipfile would quietly use the last copy: which one a reader sees is ambiguous.
                raise RuntimeError(f"{source} is not a valid checkpoint: the record '{info.filename}' appears twice")
            names.add(info.filename)
            prefix, _, rest = info.filename.partition("/")
            prefixes.add(prefix)
            self._records[rest] = info
        if "constants.pkl" in self._records or any(k.startswith("code/") for k in self._records):
            raise RuntimeError(f"{source} is a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
        if len(prefixes) != 1 or "data.pkl" not in self._records:
            raise RuntimeError(f"{source} is not a valid checkpoint: no single <archive>/data.pkl record")
        self._map = None
        if use_mmap:
            import ctypes
            import mmap

            # A private (copy-on-write) mapping: tensors may be written to, the file never is.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            self._map_owner = ctypes.c_char.from_buffer(self._map)
            self._map_address = ctypes.addressof(self._map_owner)

    def has_record(self, name: str) -> bool:
        return name in self._records

    def _info(self, name: str):
        info = self._records.get(name)
        if info is None:
            raise RuntimeError(f"{self._source} is missing the record '{name}'")
        if info.compress_type != 0 or info.flag_bits & 0x1:  # 0: ZIP_STORED; bit 0: encrypted
            raise RuntimeError(f"{self._source}: record '{name}' is compressed or encrypted; checkpoints store "
                               "records uncompressed")
        if info.file_size != info.compress_size or info.header_offset + info.compress_size > self._size:
            raise RuntimeError(f"{self._source}: record '{name}' claims {info.file_size} bytes, more than the file "
                               "holds (truncated or corrupt)")
        return info

    def record_size(self, name: str) -> int:
        return self._info(name).file_size

    def read(self, name: str) -> bytes:
        info = self._info(name)
        try:
            with self._zip.open(info) as member:
                data = member.read()
        except Exception as exc:
            message = f"{self._source}: cannot read record '{name}' ({exc})"
            if name.endswith(".pkl"):
                # A damaged pickle record: PyTorch (no CRC check) unpickles the bytes and fails with
                # pickle.UnpicklingError; ember's is that and a RuntimeError.
                raise UnpicklingError(message) from exc
            raise RuntimeError(message) from exc
        if len(data) != info.file_size:
            raise RuntimeError(f"{self._source}: record '{name}' is truncated")
        return data

    def read_storage(self, name: str, nbytes: int):
        """A fresh ``_C.Storage`` holding the record's first ``nbytes`` bytes (CRC-checked)."""
        info = self._info(name)
        if info.file_size < nbytes:
            raise RuntimeError(f"{self._source}: storage record '{name}' holds {info.file_size} bytes, but the "
                               f"checkpoint needs {nbytes}")
        if self._map is not None:
            mapped = self._mapped(info, nbytes)
            if mapped is not None:
                return mapped
        storage = _C.Storage.allocate(nbytes)
        target = memoryview(storage)
        try:
            with self._zip.open(info) as member:
                done = 0
                while done < nbytes:
                    got = member.readinto(target[done:min(nbytes, done + _CHUNK)])
                    if not got:
                        raise EOFError("unexpected end of record")
                    done += got
                while member.read(_CHUNK):  # the rest, so that the CRC is checked
                    pass
        except Exception as exc:
            raise RuntimeError(f"{self._source}: cannot read storage record '{name}' ({exc})") from exc
        return storage

    def _mapped(self, info, nbytes: int):
        header = self._map[info.header_offset:info.header_offset + 30]
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            raise RuntimeError(f"{self._source}: bad local header for record '{info.filename}'")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        if start + nbytes > self._size:
            raise RuntimeError(f"{self._source}: record '{info.filename}' is truncated")
        if start % 8:
            return None  # unaligned data: copy it instead of mapping it
        return _C.Storage.borrow(self._map_address + start, nbytes, self._map_owner)

    def close(self) -> None:
        self._zip.close()
