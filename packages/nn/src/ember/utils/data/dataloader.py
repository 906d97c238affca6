"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker has its own index queue and all share one result
queue. The main process keeps ``prefetch_factor * num_workers`` tasks in flight, hands
them out round robin, and puts results back in order with a reordering buffer. While it
waits it polls the result queue with a timeout and checks that every worker is alive, so a
crashed worker is an error rather than a hang.
"""

from __future__ import annotations

import atexit
import math
import multiprocessing
import multiprocessing.util  # noqa: F401  (registers its atexit handler before ours: see _live_iterators)
import os
import pickle
import queue
import warnings
import weakref

import ember

from ._utils import worker as _worker
from ._utils.collate import default_collate, default_convert
from ._utils.fetch import _DatasetKind, create_fetcher
from ._utils.worker import _IterableDatasetStopIteration, _Pickled, _ResumeIteration
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

# Seconds the main process waits on the result queue before checking that workers live.
_STATUS_CHECK_INTERVAL = 0.5
# Seconds to wait for a worker to exit before terminating it.
_JOIN_TIMEOUT = 5.0


class _InfiniteConstantSampler(Sampler):
    """None forever: the sampler behind an IterableDataset (its stream decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    # Fork on Linux, as PyTorch users get there: the dataset need not be picklable and
    # workers start fast. Elsewhere the platform's default start method.
    if (
        os.name == "posix"
        and "fork" in multiprocessing.get_all_start_methods()
        and os.uname().sysname == "Linux"
    ):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


class DataLoader:
    """Iterates over ``dataset`` in (optionally shuffled) batches, as ``torch.utils.data.DataLoader``.

    ``batch_size=None`` turns automatic batching off (each sample goes through
    ``default_convert``); ``pin_memory`` has no effect without an accelerator.
    """

    _DataLoader__initialized = False

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        # Dataset checks come before sampler checks, as in PyTorch.
        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    f"batch_sampler option, but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator = None
        self.__initialized = True
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context) -> None:
        if context is not None:
            if self.num_workers == 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                    f"but got num_workers={self.num_workers}"
                )
            if isinstance(context, str):
                methods = multiprocessing.get_all_start_methods()
                if context not in methods:
                    raise ValueError(
                        f"multiprocessing_context option should specify a valid start method in {methods!r}, "
                        f"but got multiprocessing_context={context!r}"
                    )
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a string specifying "
                    f"the start method, but got multiprocessing_context={context}"
                )
        self.__multiprocessing_context = context

    def __setattr__(self, attr, val) -> None:
        if self.__initialized and attr in (
            "batch_size",
            "batch_sampler",
            "sampler",
            "drop_last",
            "dataset",
            "persistent_workers",
        ):
            raise ValueError(f"{attr} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(attr, val)

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        # Persistent workers live in one iterator that is reset at every epoch.
        if self.persistent_workers and self.num_workers > 0:
            # A new one also when the last was stopped by an error (dead worker, timeout).
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._dataset_kind == _DatasetKind.Iterable:
            # The dataset's own length (each worker is trusted to yield only its shard);
            # remembered so that iterating past it warns.
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        if self.num_workers == 0:
            return
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count()
        if cpus is not None and self.num_workers > cpus:
            warnings.warn(
                f"This DataLoader will create {self.num_workers} worker processes in total. Our suggested max number "
                f"of worker in current system is {cpus}, which is smaller than what this DataLoader is going to "
                "create. Please be aware that excessive worker creation might get DataLoader running slow or even "
                "freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                stacklevel=2,
            )


class _BaseDataLoaderIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        # Batches go to page-locked memory when an accelerator plugin provides it (ember[cuda]).
        self._pin_memory = bool(loader.pin_memory) and ember.cuda.is_available()
        if loader.pin_memory and not self._pin_memory:
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, "
                "then device pinned memory won't be used.",
                stacklevel=3,
            )
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        # Drawn after iter(sampler) (lazy) and before its first draw, as in PyTorch, so a
        # seeded generator gives the same order with and without workers.
        self._base_seed = int(ember.empty((), dtype=ember.int64).random_(generator=loader.generator).item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        if self._pin_memory:
            data = _pin(data)
        self._num_yielded += 1
        if (
            self._dataset_kind == _DatasetKind.Iterable
            and self._IterableDataset_len_called is not None
            and self._num_yielded > self._IterableDataset_len_called
        ):
            msg = (
                f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called}"
                f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. "
            )
            if self._num_workers > 0:
                msg += (
                    "For multiprocessing data-loading, this could be caused by not properly configuring the "
                    "IterableDataset replica at each worker."
                )
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")


def _pin(data):
    """``data`` with every CPU tensor in it (through tuples, lists and dicts) in pinned memory."""
    if isinstance(data, ember.Tensor):
        return data.pin_memory() if data.device.type == "cpu" else data
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_pin(d) for d in data))
    if isinstance(data, (tuple, list)):
        return type(data)(_pin(d) for d in data)
    if isinstance(data, dict):
        return {k: _pin(v) for k, v in data.items()}
    return data


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        if self._num_workers != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires num_workers == 0")
        self._fetcher = create_fetcher(
            self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        index = self._next_index()  # StopIteration ends the epoch
        return self._fetcher.fetch(index)  # an exhausted IterableDataset raises StopIteration too


# Iterators whose workers may still run: shut down at interpreter exit, before
# multiprocessing's own exit handler (atexit runs handlers last-registered first, and
# multiprocessing.util registers its handler when first imported: hence the import here,
# or a first Queue() would register it after ours and it would run first).
_live_iterators: weakref.WeakSet = weakref.WeakSet()
_exiting = False


@atexit.register
def _shutdown_all_at_exit() -> None:
    # Not patient: the program is ending, so workers are terminated at once, as the
    # daemonic processes they are (PyTorch leaves them to multiprocessing's handler, which
    # terminates them too). Shutdown takes no lock a worker may hold, so it cannot hang.
    global _exiting
    for it in list(_live_iterators):
        it._shutdown_workers(patient=False)
    _exiting = True


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._num_workers <= 0:
            raise AssertionError("num_workers must be greater than 0 for MultiProcessingDataLoaderIter")
        self._prefetch_factor = loader.prefetch_factor
        if self._prefetch_factor <= 0:
            raise AssertionError("prefetch_factor must be greater than 0 for MultiProcessingDataLoaderIter")
        self._in_order = loader.in_order
        self._shutdown = False
        self._workers = []
        self._index_queues = []
        context = loader.multiprocessing_context or _default_context()
        self._result_queue = context.Queue()
        # Set at shutdown; workers poll it. A lock-free shared byte, not an Event: an Event's
        # set() takes a lock the workers share, and a worker killed while holding it (at
        # exit, by multiprocessing's terminate(); any time, by the OOM killer) left set()
        # waiting forever, so the main process hung at exit (seen under load, 2026-12-05).
        self._done_flag = context.RawValue("b", 0)
        _live_iterators.add(self)
        try:
            for worker_id in range(self._num_workers):
                index_queue = context.Queue()
                # Tasks left unsent at shutdown must not block the main process's exit.
                index_queue.cancel_join_thread()
                w = context.Process(
                    target=_worker.worker_loop,
                    args=(
                        self._dataset_kind,
                        self._dataset,
                        index_queue,
                        self._result_queue,
                        self._done_flag,
                        self._auto_collation,
                        self._collate_fn,
                        self._drop_last,
                        self._base_seed,
                        loader.worker_init_fn,
                        worker_id,
                        self._num_workers,
                    ),
                    daemon=True,
                )
                w.start()
                self._index_queues.append(index_queue)
                self._workers.append(w)
        except BaseException:
            self._workers_status = [True] * len(self._workers)
            self._shutdown_workers()
            raise
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        self._send_idx = 0  # next task to send
        self._rcvd_idx = 0  # next task to return
        self._task_worker = {}  # task -> worker it went to, until returned
        self._reorder = {}  # task -> result that arrived before its turn
        self._workers_status = [True] * self._num_workers
        self._next_worker = 0
        if not first_iter:
            # Persistent workers: tell each to restart its fetcher, then drop whatever the
            # previous epoch left in flight (every worker answers in order, ack last).
            for q in self._index_queues:
                q.put(_ResumeIteration())
            pending = self._num_workers
            while pending > 0:
                idx, _ = self._get_data()
                if isinstance(idx, _ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_get_data(self, timeout: float):
        try:
            idx, data = self._result_queue.get(timeout=timeout)
        except Exception as e:
            # Empty, or a queue broken by a worker that died while writing to it.
            failed = [
                w for wid, w in enumerate(self._workers) if self._workers_status[wid] and not w.is_alive()
            ]
            if failed:
                pids = ", ".join(str(w.pid) for w in failed)
                self._shutdown_workers(patient=False)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly") from e
            if isinstance(e, queue.Empty):
                return False, None
            raise
        if isinstance(data, _Pickled):
            data = pickle.loads(data.payload)
        return True, (idx, data)

    def _get_data(self):
        if self._timeout > 0:
            ok, item = self._try_get_data(self._timeout)
            if not ok:
                self._shutdown_workers(patient=False)  # a stuck worker would not stop by itself
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            return item
        while True:
            ok, item = self._try_get_data(_STATUS_CHECK_INTERVAL)
            if ok:
                return item

    def _next_data(self):
        if self._shutdown:
            raise StopIteration
        while True:
            # Skip tasks that will never be answered: their worker's stream has ended.
            while self._rcvd_idx < self._send_idx:
                if self._rcvd_idx in self._reorder:
                    break
                wid = self._task_worker.get(self._rcvd_idx)
                if wid is not None and self._workers_status[wid]:
                    break
                self._task_worker.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            if self._rcvd_idx in self._reorder:
                return self._process_data(self._pop_task(self._rcvd_idx, self._reorder.pop(self._rcvd_idx)))

            idx, data = self._get_data()
            if isinstance(idx, _ResumeIteration):
                continue
            if isinstance(data, _IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx == self._rcvd_idx or not self._in_order:
                return self._process_data(self._pop_task(idx, data))
            self._reorder[idx] = data

    def _pop_task(self, idx: int, data):
        self._task_worker.pop(idx, None)
        if idx == self._rcvd_idx:
            self._rcvd_idx += 1
        return data

    def _try_put_index(self) -> None:
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):  # the next worker (round robin) still running
            wid = self._next_worker
            self._next_worker = (self._next_worker + 1) % self._num_workers
            if self._workers_status[wid]:
                break
        else:
            return
        self._index_queues[wid].put((self._send_idx, index))
        self._task_worker[self._send_idx] = wid
        self._send_idx += 1

    def _process_data(self, data):
        self._try_put_index()  # keep prefetch_factor * num_workers tasks in flight
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id: int) -> None:
        # None tells the worker to exit once it has answered its earlier tasks.
        self._index_queues[worker_id].put(None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self, patient: bool = True) -> None:
        """Stops the workers: asks them to exit, waits (unless not ``patient``), then terminates them."""
        if _exiting or self._shutdown:
            return
        self._shutdown = True
        _live_iterators.discard(self)
        try:
            self._done_flag.value = 1
            for wid in range(len(self._workers)):
                if self._persistent_workers or self._workers_status[wid]:
                    self._mark_worker_as_unavailable(wid)
            for w in self._workers:
                w.join(timeout=_JOIN_TIMEOUT if patient else 0)
            for q in self._index_queues:
                q.cancel_join_thread()
                q.close()
            self._result_queue.cancel_join_thread()
            self._result_queue.close()
        finally:
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=_JOIN_TIMEOUT)

    def __del__(self) -> None:
        if getattr(self, "_workers", None) is not None:
            self._shutdown_workers()
