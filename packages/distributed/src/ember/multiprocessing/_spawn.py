"""``spawn``/``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes, PyTorch's way.

A child that raises writes its traceback to a temporary file and exits with code 1; the parent
notices the first failure, terminates the other children and raises ``ProcessRaisedException``
carrying that traceback (``ProcessExitedException`` for a child that died without one, e.g.
killed by a signal).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback


class ProcessException(Exception):
    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child process raised: the message holds its traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg, error_index, error_pid)


class ProcessExitedException(ProcessException):
    """A child process exited with a non-zero code or was killed by a signal."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is tearing everything down
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_files):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Waits up to ``timeout`` for the children; True once all exited successfully.

        Raises at the first failure, after terminating the others (``grace_period`` seconds of
        SIGTERM before SIGKILL).
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        self._terminate_rest(grace_period)
        process = self.processes[failed]
        code = process.exitcode
        path = self.error_files[failed]
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path) as f:
                original = f.read()
            msg = f"\n\n-- Process {failed} terminated with the following error:\n{original}"
            raise ProcessRaisedException(msg, failed, process.pid)
        if code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, process.pid,
                                         code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed, process.pid, code)

    def _terminate_rest(self, grace_period: float | None) -> None:
        alive = [p for p in self.processes if p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + (grace_period or 0)
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        self.sentinels.clear()


class SpawnContext(ProcessContext):
    pass


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Starts ``nprocs`` processes running ``fn(i, *args)`` with ``start_method``."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="ember-spawn-error-")
        os.close(fd)
        os.unlink(path)  # the child creates it only when it has something to say
        process = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(path)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    try:
        while not context.join():
            pass
    finally:
        for path in error_files:
            if os.path.exists(path):
                os.unlink(path)
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``torch.multiprocessing.spawn``: ``start_processes`` with the ``spawn`` start method, always."""
    if start_method != "spawn":
        # PyTorch's spawn always spawns: another start method only warns
        import warnings

        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t torch.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, "spawn")
