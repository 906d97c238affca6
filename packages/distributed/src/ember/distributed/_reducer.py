"""DDP's reducer: gradient buckets that are views of one flat buffer each, all-reduced as backward
produces them.

Parameters are grouped into buckets (``assign_buckets``: reverse registration order, which
approximates the order backward produces gradients; PyTorch's caps). Each bucket owns one flat
buffer for its whole life, and each parameter a view of it: when a parameter's gradient is
accumulated (its post-accumulate-grad hook), the gradient is copied into its view at once - and
divided by the world size on the way, as PyTorch's reducer does without a comm hook - so nothing
is concatenated when the bucket fills and no buffer is allocated per step. When a bucket's last
gradient arrived, its all-reduce starts on the buffer in place (buckets start in index order on
every rank, so the collectives match across ranks) while backward goes on. The last bucket's
hook waits for all of them and copies the averaged values back into ``.grad`` (or, with
``gradient_as_bucket_view=True``, leaves ``.grad`` as the views themselves, with no copy at all).

Who drives a started all-reduce: MPI moves data only while some thread calls into it. When each
rank has a core to spare, the group's worker thread waits on it (``CollectiveWork.launch``) and
the transfer overlaps backward. When it has not (ranks >= cores / 2, e.g. 2 ranks on 2 cores), a
worker spinning in ``MPI_Wait`` only takes the core away from the backward it was meant to overlap
(and each hand-over to it is a thread switch): the request stays with the training thread, which
tests it from every later gradient hook (one ``MPI_Test``: a step of MPI's progress engine) and
waits for it at the end of backward.
"""

from __future__ import annotations

import ember
from ember.futures import Future

from . import _collectives as C
from ._backend import ReduceOp
from ._work import progress_thread_pays

_FIRST_BUCKET_BYTES = 1024 * 1024


def _hook_result(future, buffer):
    """The tensor a comm hook's future holds, checked as PyTorch's reducer does (RuntimeError
    for an error, a value that is no tensor, or a tensor of another size than the bucket)."""
    try:
        reduced = future.wait()
    except Exception as err:
        raise RuntimeError(f"DDP communication hook's future failed: {type(err).__name__}: {err}") from err
    if not isinstance(reduced, ember.Tensor):
        raise RuntimeError("DDP communication hook's future must hold a single tensor (the bucket's reduced buffer, "
                           f"e.g. fut.then(lambda fut: fut.value()[0])), but holds {type(reduced).__name__}")
    if reduced.numel() != buffer.numel():
        raise RuntimeError(f"DDP communication hook's result has {reduced.numel()} elements, but the bucket's "
                           f"buffer has {buffer.numel()}")
    return reduced


class GradBucket:
    """What a comm hook gets (``torch.distributed.GradBucket``): one flat buffer of gradients."""

    def __init__(self, index: int, buffer, params, is_last: bool):
        self._index = index
        self._buffer = buffer
        self._params = params
        self._is_last = is_last

    def index(self) -> int:
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def parameters(self) -> list:
        return list(self._params)

    def gradients(self) -> list:
        out, start = [], 0
        for p in self._params:
            out.append(self._buffer[start:start + p.numel()].view(p.shape))
            start += p.numel()
        return out

    def is_last(self) -> bool:
        return self._is_last


def assign_buckets(params, cap_bytes: int, first_cap_bytes: int = _FIRST_BUCKET_BYTES) -> list[list[int]]:
    """Parameter indices per bucket: reverse order, one dtype per bucket, by size. As PyTorch's
    bucket assignment, each dtype's first bucket closes at ``first_cap_bytes`` (so the first
    all-reduce starts early in backward), its later ones at ``cap_bytes``."""
    buckets, open_by_dtype, closed = [], {}, {}
    for index in reversed(range(len(params))):
        p = params[index]
        current = open_by_dtype.get(p.dtype)
        if current is None:
            current = [[], 0]
            open_by_dtype[p.dtype] = current
            buckets.append(current)
        current[0].append(index)
        current[1] += p.numel() * p.element_size()
        if current[1] >= (cap_bytes if closed.get(p.dtype) else first_cap_bytes):
            del open_by_dtype[p.dtype]
            closed[p.dtype] = True
    return [indices for indices, _ in buckets]


class _Bucket:
    __slots__ = ("index", "indices", "params", "buffer", "is_last", "work", "future")

    def __init__(self, index: int, indices: list[int], params: list, is_last: bool):
        self.index = index
        self.indices = indices
        self.params = [params[i] for i in indices]
        first = self.params[0]
        with ember.no_grad():
            self.buffer = ember.zeros(sum(p.numel() for p in self.params), dtype=first.dtype, device=first.device)
        self.is_last = is_last
        self.work = None  # the default all-reduce's Work
        self.future = None  # a comm hook's Future


class Reducer:
    """The per-iteration state of DDP's gradient averaging (``DistributedDataParallel`` owns one)."""

    def __init__(self, params: list, bucket_indices: list[list[int]], process_group, size: int,
                 gradient_as_bucket_view: bool):
        self.params = params
        self.process_group = process_group
        self.size = size
        self.gradient_as_bucket_view = gradient_as_bucket_view
        last = len(bucket_indices) - 1
        self.buckets = [_Bucket(b, indices, params, b == last) for b, indices in enumerate(bucket_indices)]
        self.bucket_of = [0] * len(params)
        self.views = [None] * len(params)
        for bucket in self.buckets:
            start = 0
            for index, p in zip(bucket.indices, bucket.params):
                self.bucket_of[index] = bucket.index
                self.views[index] = bucket.buffer[start:start + p.numel()].view(p.shape)
                start += p.numel()
        self.comm_hook = None
        self.comm_state = None
        # The last all-reduced used-parameter mask: a rank shadowing the others under join()
        # contributes it (and keeps the result), as PyTorch's joined rank all-reduces its device-side
        # map, which holds the reduced map of its own last iterations, in place.
        self.globally_used: list | None = None
        self.reset()

    def reset(self) -> None:
        self.ready = [False] * len(self.params)
        self.pending = [len(bucket.indices) for bucket in self.buckets]
        self.launched = 0  # buckets started, in index order
        self.in_flight: list = []  # default all-reduces started and not yet seen complete
        self.locally_used = [True] * len(self.params)
        for bucket in self.buckets:
            bucket.work = bucket.future = None

    # -- gradients in ------------------------------------------------------------------

    def mark_ready(self, index: int) -> bool:
        """Parameter ``index`` has its gradient for this iteration; True once every bucket started."""
        if self.ready[index]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter at index {index} has been marked as ready "
                "twice: it may be shared by several forward passes or used in a reentrant backward."
            )
        self.ready[index] = True
        self._copy_in(index)
        b = self.bucket_of[index]
        self.pending[b] -= 1
        if self.pending[b] == 0 and b == self.launched:
            buckets, pending = self.buckets, self.pending
            while self.launched < len(buckets) and pending[self.launched] == 0:
                self._launch(buckets[self.launched])
                self.launched += 1
            return self.launched == len(buckets)
        in_flight = self.in_flight
        if in_flight and in_flight[0].is_completed():
            del in_flight[0]  # a step of MPI's progress engine; the next hook tests the next one
        return False

    def _copy_in(self, index: int) -> None:
        p = self.params[index]
        view = self.views[index]
        grad = p.grad
        scale = self.comm_hook is None
        with ember.no_grad():
            if grad is None:
                view.zero_()
            elif grad is view or (grad._storage is view._storage and grad._offset == view._offset):
                if scale:  # already in place (gradient_as_bucket_view)
                    view.div_(self.size)
            else:
                view.copy_(grad)
                if scale:
                    view.div_(self.size)
                if self.gradient_as_bucket_view:
                    p.grad = view

    def _launch(self, bucket: _Bucket) -> None:
        if self.comm_hook is not None:
            future = self.comm_hook(self.comm_state, GradBucket(bucket.index, bucket.buffer, bucket.params,
                                                                 bucket.is_last))
            if not isinstance(future, Future):
                raise RuntimeError("DDP communication hook's callback must return a torch.futures.Future object, "
                                   f"but got {type(future).__module__}.{type(future).__qualname__}")
            bucket.future = future
            return
        work = C.start_all_reduce(bucket.buffer, self.process_group)
        if work is None:
            return
        if progress_thread_pays() and hasattr(work, "launch"):
            work.launch()
        else:
            self.in_flight.append(work)
        bucket.work = work

    # -- results out -------------------------------------------------------------------

    def finalize(self, find_unused: bool, device) -> None:
        """Waits for every bucket and writes the averaged gradients into ``.grad``."""
        globally_used = None
        if find_unused:
            used = ember.tensor([1 if u else 0 for u in self.locally_used], dtype=ember.int32, device=device)
            C.all_reduce(used, op=ReduceOp.MAX, group=self.process_group)
            globally_used = used.tolist()
            self.globally_used = globally_used
        views, as_view = self.views, self.gradient_as_bucket_view
        with ember.no_grad():
            for bucket in self.buckets:
                if bucket.future is not None:
                    reduced = _hook_result(bucket.future, bucket.buffer)
                    if reduced is not bucket.buffer:
                        bucket.buffer.copy_(reduced.reshape(-1))
                elif bucket.work is not None:
                    bucket.work.wait()
                for index, p in zip(bucket.indices, bucket.params):
                    if globally_used is not None and not globally_used[index]:
                        continue  # nobody used it: its gradient stays as it was, as in PyTorch
                    view, grad = views[index], p.grad
                    if grad is None:
                        p.grad = view if as_view else view.clone()
                    elif grad is not view:
                        grad.copy_(view)
        self.in_flight = []
