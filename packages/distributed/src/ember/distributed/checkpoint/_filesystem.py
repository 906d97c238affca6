"""Where a checkpoint's files go: a directory, written atomically (temporary name, fsync, rename)."""

from __future__ import annotations

import os
from pathlib import Path

from ._format import Metadata

METADATA = ".metadata"


def _write_atomic(path: Path, data: bytes, sync: bool) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


class FileSystemWriter:
    """Writes a checkpoint into directory ``path`` (one data file per rank, then ``.metadata``)."""

    def __init__(self, path, single_file_per_rank: bool = True, sync_files: bool = True, thread_count: int = 1,
                 per_thread_copy_ahead: int = 10_000_000, cache_staged_state_dict: bool = False,
                 overwrite: bool = True):
        self.path = Path(path)
        self.sync_files = sync_files
        self.overwrite = overwrite

    def prepare(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if not self.overwrite and (self.path / METADATA).exists():
            raise RuntimeError(f"Checkpoint already exists at {self.path} and overwrite=False")

    def write_data(self, name: str, data: bytes) -> None:
        _write_atomic(self.path / name, data, self.sync_files)

    def write_metadata(self, metadata: Metadata) -> None:
        _write_atomic(self.path / METADATA, metadata.to_json().encode(), self.sync_files)


class FileSystemReader:
    """Reads a checkpoint written by ``FileSystemWriter`` from directory ``path``."""

    def __init__(self, path):
        self.path = Path(path)

    def read_metadata(self) -> Metadata:
        file = self.path / METADATA
        if not file.exists():
            raise FileNotFoundError(f"no checkpoint at {self.path}: {METADATA} is missing")
        return Metadata.from_json(file.read_text())

    def read_bytes(self, name: str, start: int, nbytes: int) -> bytes:
        file = self.path / name
        if Path(name).name != name or name.startswith("."):
            raise ValueError(f"checkpoint: bad data file name {name!r}")
        with open(file, "rb") as f:
            f.seek(start)
            data = f.read(nbytes)
        if len(data) != nbytes:
            raise ValueError(f"checkpoint: {file} is truncated ({len(data)} of {nbytes} bytes at {start})")
        return data
