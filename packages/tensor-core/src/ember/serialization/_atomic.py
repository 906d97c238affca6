"""Atomic file replacement: a reader sees the old file or the complete new one, never a part.

What is replaced is the file ``path`` names, not the name itself: a symlink is followed (the
link stays and its target gets the new content), a ``/proc/self/fd/N`` path is resolved to the
file it stands for, and the new file takes the old one's mode and (where permitted) owner.
Where renaming cannot replace the file without breaking what the user set up -- a FIFO, a
device, a file with several hard links, or a path that resolves to no directory entry (an
unlinked or anonymous file behind /proc/self/fd) -- the content is written in place instead,
as ``open(path, "wb")`` would (not atomic there: there is no second name to rename from).
"""

from __future__ import annotations

import contextlib
import os
import stat

_NAME_MAX = 255  # bytes in one path component on Linux and macOS file systems


def _temp_name(folder: str, base: str) -> str:
    """A fresh hidden name beside ``base`` that fits in one path component whatever base's length."""
    suffix = f".{os.urandom(6).hex()}.tmp"
    encoded = os.fsencode(base)
    room = _NAME_MAX - 1 - len(os.fsencode(suffix))
    if len(encoded) > room:
        encoded = encoded[:room]
        base = encoded.decode("utf-8", "ignore") if isinstance(base, str) else encoded
    return os.path.join(folder, f".{os.fsdecode(base)}{suffix}")


def _target(path: str) -> tuple[str, os.stat_result | None, bool]:
    """(file to replace, its stat or None when new, whether to write in place)."""
    resolved = os.path.realpath(path)
    try:
        st = os.stat(path)  # follows links, /proc/self/fd included
    except FileNotFoundError:
        return resolved, None, False  # a new file (or a dangling link's target): created atomically
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        return path, st, True
    try:
        same = os.path.samestat(st, os.stat(resolved))
    except OSError:
        same = False
    return (resolved, st, False) if same else (path, st, True)


@contextlib.contextmanager
def atomic_write(path):
    """Yields a binary file; on success it is flushed, fsynced and renamed over ``path``.

    The temporary file lives in the same directory as the file replaced (``os.replace`` is
    atomic only within one file system) and is removed when the body raises, so a failed save
    leaves the previous file as it was.
    """
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    target, st, in_place = _target(path)
    if in_place:
        with open(target, "wb") as f:
            yield f
            f.flush()
            with contextlib.suppress(OSError):  # FIFOs and devices cannot be synced
                os.fsync(f.fileno())
        return
    folder, base = os.path.split(os.path.abspath(target))
    while True:
        tmp = _temp_name(folder, base)
        try:
            # 0o666 and the process umask: the same mode a plain open() would give a new file.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        if st is not None:
            _copy_metadata(fd, st)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _copy_metadata(fd: int, st: os.stat_result) -> None:
    """The replaced file's permission bits and, where the process may set them, owner and group."""
    with contextlib.suppress(OSError, AttributeError):
        os.fchown(fd, st.st_uid, st.st_gid)
    with contextlib.suppress(OSError, AttributeError):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


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
