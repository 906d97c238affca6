"""What runs inside a DataLoader worker process: seeding, ``get_worker_info``, the fetch loop.

A worker takes ``(task_idx, index)`` from its own index queue, fetches and collates the
sample or batch, and puts ``(task_idx, result)`` on the shared result queue. Results are
pickled here, in the worker, so an unpicklable sample becomes an error the main process
re-raises instead of an item the queue's feeder thread silently drops.
"""

from __future__ import annotations

import os
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import ember

from .fetch import _DatasetKind, create_fetcher

__all__ = ["WorkerInfo", "get_worker_info"]

# Seconds between checks that the main process is still alive while waiting for work.
POLL_INTERVAL = 0.2


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Describes the worker process that calls ``get_worker_info()``.

    ``dataset`` is the worker's own copy of the dataset, ``seed`` is ``base_seed + id``
    (already applied to ember's default generator and to Python's ``random``).
    """

    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str | None = "multiprocessing"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The current worker's ``WorkerInfo``, or None in the main process."""
    return _worker_info


class _KeyErrorMessage(str):
    """KeyError repr()s its argument; this keeps a multi-line message readable."""

    __slots__ = ()

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker: its type and formatted traceback, re-raised in the main process."""

    def __init__(self, exc_info=None, where: str = "in background") -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            # Exceptions whose constructor needs a `message` keyword.
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            # The original type cannot be built from one message string.
            raise RuntimeError(msg) from None
        raise exception


class _IterableDatasetStopIteration:
    """A worker's iterable dataset copy is exhausted."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class _ResumeIteration:
    """Sent to persistent workers at a new epoch; echoed back once they have reset."""


class _Pickled:
    """A result already pickled by the worker (unpickled by the main process)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def _seed_worker(base_seed: int, worker_id: int) -> int:
    seed = base_seed + worker_id
    random.seed(seed)
    ember.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:
        return seed
    # NumPy's legacy seeding takes 32-bit words; mix in the worker id so streams differ.
    np.random.seed([worker_id, base_seed & 0xFFFFFFFF, (base_seed >> 32) & 0xFFFFFFFF])
    return seed


def _pickled(data, worker_id: int):
    try:
        return _Pickled(bytes(ForkingPickler.dumps(data)))
    except Exception:
        wrapper = ExceptionWrapper(where=f"in DataLoader worker process {worker_id} (pickling its result)")
        try:
            return _Pickled(bytes(ForkingPickler.dumps(wrapper)))
        except Exception:
            wrapper.exc_type = RuntimeError  # the exception class itself cannot be pickled
            return _Pickled(bytes(ForkingPickler.dumps(wrapper)))


def worker_loop(
    kind,
    dataset,
    index_queue,
    result_queue,
    done_flag,
    auto_collation,
    collate_fn,
    drop_last,
    base_seed,
    init_fn,
    worker_id,
    num_workers,
) -> None:
    """The body of a worker process (module-level so any start method can pickle it)."""
    global _worker_info
    try:
        # One intra-op thread per worker: workers already run in parallel, and an OpenMP
        # pool inherited through fork must not be used.
        ember.set_num_threads(1)
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)

        iteration_end = False
        parent = os.getppid()
        while os.getppid() == parent:  # a changed parent id means the main process died
            try:
                task = index_queue.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                # A shutdown's None may never arrive: a garbage-collected iterator's queues
                # can be finalized before its workers are told to stop. The flag always is set.
                if done_flag.value:
                    break
                continue
            if isinstance(task, _ResumeIteration):
                iteration_end = False
                if init_error is None:
                    fetcher = create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last)
                result_queue.put((task, None))
                continue
            if task is None:
                break
            if done_flag.value or iteration_end:
                continue  # shutting down, or this epoch's stream has ended: ignore the task
            idx, index = task
            if init_error is not None:
                data = init_error
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if kind != _DatasetKind.Iterable:
                        data = ExceptionWrapper(where=where)
                    else:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                except Exception:
                    data = ExceptionWrapper(where=where)
            result_queue.put((idx, _pickled(data, worker_id)))
            del data, idx, index, task  # don't hold a batch while waiting for the next task
    except KeyboardInterrupt:
        pass
    if done_flag.value:
        # The main process may have stopped reading: don't block exit flushing the queue.
        result_queue.cancel_join_thread()
        result_queue.close()
