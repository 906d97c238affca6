"""``FileStore``: a store in a file on a shared file system, for ``file://`` rendezvous.

The file is an append-only log of records (``set``, ``delete``), each a frame of byte strings;
readers replay it to the current table. Every operation holds an exclusive ``flock`` so
processes never see a half-written record. As in PyTorch, the file counts its users and the
last one to close it removes it; a stale file left by a crashed job must be removed by hand.
"""

from __future__ import annotations

import fcntl
import os
import struct
from datetime import timedelta

from ._store import DEFAULT_TIMEOUT, Store, as_bytes, check_key

_U32 = struct.Struct("!I")
_USERS_KEY = "cleanup/users"  # counts the FileStore objects open on this file


def _encode(parts: list[bytes]) -> bytes:
    out = [_U32.pack(len(parts))]
    for part in parts:
        out += [_U32.pack(len(part)), part]
    return b"".join(out)


def _replay(data: bytes) -> dict[str, bytes]:
    table: dict[str, bytes] = {}
    pos = 0
    while pos + 4 <= len(data):
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        parts = []
        for _ in range(count):
            (size,) = _U32.unpack_from(data, pos)
            parts.append(data[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if parts[0] == b"set":
            table[parts[1].decode()] = parts[2]
        elif parts[0] == b"del":
            table.pop(parts[1].decode(), None)
    return table


class FileStore(Store):
    """``torch.distributed.FileStore(file_name, world_size=-1)``."""

    def __init__(self, file_name: str, world_size: int = -1, timeout: timedelta = DEFAULT_TIMEOUT):
        super().__init__(timeout)
        if not isinstance(file_name, (str, os.PathLike)):
            raise TypeError(f"file_name must be a path, got {type(file_name).__name__}")
        self.path = os.fspath(file_name)
        self.world_size = world_size
        self._closed = False
        self.add(_USERS_KEY, 1)

    def _locked(self, change):
        """Runs ``change(table) -> (records, result)`` under the file lock, appending records."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            records, result = change(_replay(data))
            if records:
                os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, b"".join(_encode(r) for r in records))
            return result
        finally:
            os.close(fd)

    def _table(self) -> dict[str, bytes]:
        return self._locked(lambda table: ([], table))

    def set(self, key, value):
        record = [b"set", check_key(key).encode(), as_bytes(value)]
        self._locked(lambda table: ([record], None))

    def add(self, key, amount):
        key = check_key(key)

        def change(table):
            total = int(table.get(key, b"0")) + int(amount)
            return [[b"set", key.encode(), str(total).encode()]], total

        return self._locked(change)

    def append(self, key, value):
        key, value = check_key(key), as_bytes(value)
        self._locked(lambda table: ([[b"set", key.encode(), table.get(key, b"") + value]], None))

    def compare_set(self, key, expected_value, desired_value):
        key, expected, desired = check_key(key), as_bytes(expected_value), as_bytes(desired_value)

        def change(table):
            current = table.get(key)
            if (current is None and expected == b"") or current == expected:
                return [[b"set", key.encode(), desired]], desired
            return [], expected if current is None else current

        return self._locked(change)

    def delete_key(self, key):
        # PyTorch's FileStore logs the deletion and answers True whether or not the key existed.
        record = [b"del", check_key(key).encode()]
        return self._locked(lambda table: ([record], True))

    def num_keys(self):
        return len(self._table())

    def _get(self, key):
        return self._table()[key]

    def _exists(self, key):
        return key in self._table()

    def _wait(self, keys, seconds):
        try:
            super()._wait(keys, seconds)
        except RuntimeError as err:
            # PyTorch's FileStore raises a plain RuntimeError on timeout (its other stores raise
            # DistStoreError); kept so `except` clauses written against it behave the same.
            raise RuntimeError(f"Timeout waiting for key: {err}") from None

    def close(self) -> None:
        """Drops this user; the last one removes the file."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.add(_USERS_KEY, -1) <= 0:
                os.unlink(self.path)
        except OSError:
            pass

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
