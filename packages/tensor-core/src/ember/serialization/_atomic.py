"""Atomic file replacement: a reader sees the old file or the complete new one, never a part."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def atomic_write(path):
    """Yields a binary file; on success it is flushed, fsynced and renamed over ``path``.

    The temporary file lives in the same directory (``os.replace`` is atomic only within one
    file system) and is removed when the body raises, so a failed save leaves ``path`` as it was.
    """
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    folder, base = os.path.split(os.path.abspath(path))
    while True:
        tmp = os.path.join(folder, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            # 0o666 and the process umask: the same mode a plain open() would give the file.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder: str) -> None:
    # Makes the rename itself durable; not possible on every platform, so best effort.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
