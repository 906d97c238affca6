"""One NCCL communicator: unique-id exchange through the store, non-blocking init, abort.

Rank 0 of the group calls ``ncclGetUniqueId`` and sets it in the group's store; the other ranks
wait for the key (the group's timeout bounds the wait). Each rank also marks itself "joined"
there before ``ncclCommInitRankConfig``, so an initialization that times out can name the ranks
that never came. The communicator is non-blocking: init and every call may answer
``ncclInProgress``, after which ``ncclCommGetAsyncError`` is polled until it settles, with the
group's timeout and liveness watch deciding when to give up (``ncclCommAbort``) instead of
waiting forever.
"""

from __future__ import annotations

import ctypes
import threading
import time
from datetime import timedelta

import ember

from . import _nccl_lib as N
from ._errors import DistBackendError, DistStoreError
from ._nccl_work import Watchdog

_SETTLE_POLL = 0.001


class Communicator:
    def __init__(self, engine, device_index: int):
        self._engine = engine
        self.device_index = device_index
        self.handle = None
        self._aborted = False
        self._lock = threading.Lock()
        with ember.cuda.device(device_index):
            self.stream = ember.cuda.Stream(device_index, priority=-1)
            self.ready = ember.cuda.Event()
            self._init()
        # Events of dropped ``Work``s come back here (``NCCLWork.__del__``): creating one per
        # call costs a driver call and shows in the per-collective overhead.
        self.events: list = []
        self.watchdog = Watchdog(engine, device_index)

    # -- initialization -------------------------------------------------------------------

    def _prefix(self) -> str:
        from ._world import _world_state

        return f"ember_nccl/{_world_state().generation}"

    def _init(self) -> None:
        engine = self._engine
        store, rank, size = engine._store, engine.rank, engine.size
        prefix = self._prefix()
        key = f"{prefix}/uid"
        seconds = engine.timeout_seconds
        deadline = time.monotonic() + seconds
        if rank == 0:
            store.set(key, N.unique_id())
        store.set(f"{prefix}/joined/{rank}", b"1")
        try:
            store.wait([key], timedelta(seconds=seconds))
        except DistStoreError:
            raise DistBackendError(
                f"NCCL communicator initialization on rank {engine.global_rank} timed out after {seconds:g}s: "
                f"rank {engine.global_ranks[0]} never published the NCCL unique id"
            ) from None
        uid = N.unique_id_from(store.get(key))
        handle = ctypes.c_void_p()
        config = N.nonblocking_config()
        result = N.lib().ncclCommInitRankConfig(ctypes.byref(handle), size, uid, rank, ctypes.byref(config))
        self.handle = handle.value
        if result not in (N.SUCCESS, N.IN_PROGRESS):
            problem = (f"NCCL error in ncclCommInitRankConfig on rank {engine.global_rank}: "
                       f"{N.error_text(result, self.handle)}")
            self._fail(problem)
            raise DistBackendError(problem)

        def missing() -> str:
            absent = [engine.global_ranks[r] for r in range(size) if not store.check([f"{prefix}/joined/{r}"])]
            if absent:
                return f"ranks {absent} never joined"
            return "every rank joined, but the communicator did not connect"

        self._settle("ncclCommInitRankConfig", deadline, missing)

    def _settle(self, what: str, deadline: float, explain=None) -> None:
        """Polls the communicator until its pending call finished; raises (and aborts) otherwise."""
        engine = self._engine
        while True:
            state = self._state()
            if state == N.SUCCESS:
                return
            if engine.error is not None:  # the watchdog aborted the communicator meanwhile
                raise DistBackendError(engine.error)
            if state != N.IN_PROGRESS:
                problem = f"NCCL error in {what} on rank {engine.global_rank}: {N.error_text(state, self.handle)}"
                self._fail(problem)
                raise DistBackendError(problem)
            now = time.monotonic()
            problem = engine.peer_problem(now, deadline, what)
            if problem is not None:
                if now > deadline and explain is not None:
                    problem = (f"{what} on rank {engine.global_rank} timed out after {engine.timeout_seconds:g}s: "
                               f"{explain()}; the NCCL communicator was aborted")
                self._fail(problem)
                raise DistBackendError(problem)
            time.sleep(_SETTLE_POLL)

    def _fail(self, problem: str) -> None:
        """Marks the group broken and aborts this communicator (also one still initializing, which
        the engine does not hold yet). The abort runs on a helper thread: the caller gets its
        error now even if NCCL takes its time to unwind a half-made communicator."""
        self._engine.abort(problem)
        threading.Thread(target=self.abort, name="ember-nccl-abort", daemon=True).start()

    def _state(self) -> int:
        if self.handle is None or self._aborted:
            return N.INVALID_USAGE
        state = ctypes.c_int(0)
        result = N.lib().ncclCommGetAsyncError(self.handle, ctypes.byref(state))
        return result if result != N.SUCCESS else state.value

    # -- calls ----------------------------------------------------------------------------

    def run(self, what: str, issue) -> None:
        """Calls ``issue()`` (one NCCL call or group); waits out ``ncclInProgress``."""
        result = issue()
        N.check(result, what, self.handle)
        if result == N.IN_PROGRESS:
            self._settle(what, time.monotonic() + self._engine.timeout_seconds)

    def async_error(self) -> str | None:
        if self._aborted or self.handle is None:
            return None
        state = self._state()
        if state in (N.SUCCESS, N.IN_PROGRESS):
            return None
        return (f"NCCL communicator of rank {self._engine.global_rank} failed asynchronously: "
                f"{N.error_text(state, self.handle)}")

    def abort(self) -> None:
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
        self.watchdog_stop()
        if self.handle is not None:
            N.lib().ncclCommAbort(self.handle)

    def watchdog_stop(self) -> None:
        watchdog = getattr(self, "watchdog", None)
        if watchdog is not None:
            watchdog.stop()

    def destroy(self, broken: bool) -> None:
        """Finalizes (flushing pending work) and frees the communicator; aborts it when that fails."""
        if self._aborted:
            return
        if broken:
            self.abort()
            return
        self.watchdog_stop()
        try:
            self.stream.synchronize()
            lib = N.lib()
            result = lib.ncclCommFinalize(self.handle)
            N.check(result, "ncclCommFinalize", self.handle)
            self._settle("ncclCommFinalize", time.monotonic() + min(self._engine.timeout_seconds, 60.0))
            with self._lock:
                self._aborted = True
            lib.ncclCommDestroy(self.handle)
        except Exception:  # noqa: BLE001 - a communicator that cannot finish cleanly is aborted
            self.abort()
