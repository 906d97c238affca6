"""Loading and starting MPI (MPICH through mpi4py) without letting mpi4py start it on import.

Two ways into one ``MPI_COMM_WORLD``:

- launched by ``mpiexec``: the launcher serves PMI; ``MPI_Init_thread`` finds it by itself.
- started any other way (spawn, a launcher, by hand): ``PMI_PORT``/``PMI_ID``/... point MPICH at
  rank 0's ``ControlServer`` for the duration of ``MPI_Init_thread``. Rank 0 serves that
  protocol from a thread of its own process, so the init call must release the GIL: mpi4py's
  ``MPI.Init_thread`` holds it (measured: rank 0 deadlocks against its own server), a ctypes
  call into the same ``libmpi`` releases it.

MPI starts once per process (the standard forbids a second ``MPI_Init``); a later
``init_process_group`` reuses the world when rank and size agree.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time

_MPI = None
_started_by_us = False
_finalize_at_exit = False
_LAUNCHER_VARS = ("PMI_FD", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


def mpi():
    """The ``mpi4py.MPI`` module, imported with automatic init and finalize turned off."""
    global _MPI
    if _MPI is None:
        try:
            import mpi4py
        except ImportError as err:  # pragma: no cover - a declared dependency
            raise RuntimeError("ember.distributed needs mpi4py and an MPI library (pip install mpi4py mpich)") from err
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        mpi4py.rc.threads = True
        mpi4py.rc.thread_level = "multiple"
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def is_available() -> bool:
    try:
        mpi()
    except RuntimeError:
        return False
    return True


def launched_by_mpiexec() -> bool:
    """True when an MPI launcher started this process (it serves PMI itself)."""
    return any(name in os.environ for name in _LAUNCHER_VARS) and "EMBER_PMI_OWN" not in os.environ


def is_started() -> bool:
    MPI = mpi()
    return bool(MPI.Is_initialized()) and not MPI.Is_finalized()


def _libmpi() -> ctypes.CDLL | None:
    """The libmpi mpi4py loaded (found in this process's mappings), or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libmpi" in path and ".so" in path:
                    return ctypes.CDLL(path)
    except OSError:
        pass
    return None


def _init_thread_without_gil() -> None:
    MPI = mpi()
    lib = _libmpi()
    if lib is None:
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        return
    provided = ctypes.c_int(0)
    rc = lib.MPI_Init_thread(None, None, ctypes.c_int(MPI.THREAD_MULTIPLE), ctypes.byref(provided))
    if rc != 0:
        raise RuntimeError(f"MPI_Init_thread failed with error code {rc}")


def start_from_launcher() -> None:
    """``MPI_Init_thread`` under ``mpiexec``; MPI_Finalize at exit unless a fault aborted it."""
    global _started_by_us, _finalize_at_exit
    MPI = mpi()
    if not MPI.Is_initialized():
        MPI.Init_thread(MPI.THREAD_MULTIPLE)
        _started_by_us = _finalize_at_exit = True
        atexit.register(_finalize)


def start_with_pmi_server(host: str, port: int, rank: int, world_size: int, failure=None,
                          timeout: float | None = None) -> None:
    """``MPI_Init_thread`` against rank 0's PMI-1 server at ``host:port``.

    MPI_Init waits for every rank (at PMI barriers, and for the ranks of a node inside MPICH's
    shared-memory setup): a rank that died after the rendezvous would keep the others in it
    forever. So the call runs in a helper thread while this one watches ``failure()`` (a
    message once a peer is known to have exited) and the timeout, and raises
    ``DistBackendError`` then; the helper stays blocked in MPI, and this process cannot start
    MPI again (the error says so)."""
    global _started_by_us
    keys = {
        "PMI_PORT": f"{host}:{port}",
        "PMI_ID": str(rank),
        "PMI_RANK": str(rank),
        "PMI_SIZE": str(world_size),
        "EMBER_PMI_OWN": "1",
    }
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        _init_watched(failure, timeout)
    finally:
        # Children started later must not mistake these for a launcher's.
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    _started_by_us = True


def _init_watched(failure, timeout) -> None:
    from ._errors import DistBackendError

    done = threading.Event()
    errors: list = []

    def run():
        try:
            _init_thread_without_gil()
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            errors.append(err)
        finally:
            done.set()

    threading.Thread(target=run, name="ember-mpi-init", daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout
    while not done.wait(0.05):
        problem = failure() if failure is not None else None
        if problem is None and deadline is not None and time.monotonic() > deadline:
            problem = f"MPI initialization did not complete within {timeout:g} seconds"
        if problem is not None:
            disable_finalize()
            raise DistBackendError(f"{problem}; MPI cannot start in this process any more (start a new one)")
    if errors:
        raise errors[0]


def disable_finalize() -> None:
    """After a fault MPI_Finalize could wait forever for a dead peer: skip it at exit."""
    global _finalize_at_exit
    _finalize_at_exit = False


def _finalize() -> None:
    MPI = _MPI
    if _finalize_at_exit and MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.Finalize()
