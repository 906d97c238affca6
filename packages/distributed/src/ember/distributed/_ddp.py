"""``DistributedDataParallel``: data-parallel training with gradients averaged during backward.

The averaging is the reducer's (``_reducer``: buckets as views of flat buffers, each all-reduced
as soon as backward filled it); this module is the ``nn.Module`` around it: broadcasts at start
and per forward, ``no_sync``, unused-parameter detection, comm hooks and ``join``.
"""

from __future__ import annotations

import contextlib
import dataclasses

import ember
import ember.autograd  # noqa: F401 - installs Tensor.register_post_accumulate_grad_hook
from ember import nn

from . import _collectives as C
from ._backend import ReduceOp
from ._reducer import GradBucket, Reducer, assign_buckets
from ._world import resolve

__all__ = ["DistributedDataParallel", "GradBucket", "assign_buckets"]


def _check_devices(module, device_ids, output_device):
    """PyTorch's checks of ``device_ids``/``output_device``: at most one device id, and none at all
    (nor an output device) for a CPU module or one spread over several devices."""
    if device_ids is not None and len(device_ids) > 1:
        raise ValueError("device_ids can only be None or contain a single element.")
    devices = {p.device for p in module.parameters()}
    types = {d.type for d in devices}
    if len(types) != 1:
        raise ValueError(f"DistributedDataParallel's input module must be on the same type of devices, but input "
                         f"module parameters locate in {types}.")
    if not device_ids or "cpu" in types or len(devices) > 1:
        if device_ids or output_device:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with single-device/"
                f"multiple-device GPU modules or CPU modules, but got device_ids {device_ids}, output_device "
                f"{output_device}, and module parameters {devices}.")
        return None, None
    return list(device_ids), output_device if output_device is not None else device_ids[0]


class DistributedDataParallel(nn.Module):
    """``torch.nn.parallel.DistributedDataParallel``: CPU tensors on the MPI engine, CUDA tensors on NCCL
    (each bucket's all-reduce runs on the communicator's side stream while backward goes on)."""

    def __init__(
        self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True, init_sync=True,
        process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
        gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
        param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None,
        skip_all_reduce_unused_params=False,
    ):
        super().__init__()
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                "gradient."
            )
        if device_mesh is not None and process_group is not None:
            raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
        self.module = module
        self.process_group = device_mesh.get_group() if device_mesh is not None else process_group
        self._group = resolve(self.process_group)
        self.device_ids, self.output_device = _check_devices(module, device_ids, output_device)
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.static_graph = static_graph
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._params = [p for p in module.parameters() if p.requires_grad]
        # Flags and masks travel on the parameters' device: an NCCL group takes CUDA tensors only.
        self._device = self._params[0].device
        self._buckets = assign_buckets(self._params, self.bucket_bytes_cap)
        self._reducer = Reducer(self._params, self._buckets, self.process_group, self._group.size(),
                                gradient_as_bucket_view)
        self._joining = False
        self._hooks_fired = 0
        self._expect_reduction = False
        # Parameters that got a gradient in backwards under ``no_sync`` since the last synced
        # one: with find_unused_parameters they count as used at the next sync, so the gradient
        # they accumulated is averaged and written on every rank (PyTorch's local used map).
        self._used_unsynced: set = set()
        if init_sync:
            self._sync_module_states()
        self._hook_handles = [
            p.register_post_accumulate_grad_hook(self._make_hook(i)) for i, p in enumerate(self._params)
        ]

    # -- setup --------------------------------------------------------------------------

    def _sync_module_states(self) -> None:
        """Every rank starts from rank 0's parameters and buffers."""
        tensors = [p.detach() for p in self.module.parameters()] + [b for b in self.module.buffers()]
        self._broadcast_coalesced(tensors)

    def _broadcast_coalesced(self, tensors) -> None:
        if self._group.size() == 1 or not tensors:
            return
        self._broadcast_from(tensors, self._group._ranks[0])

    def _broadcast_from(self, tensors, root: int) -> None:
        """``root``'s values into ``tensors``: one broadcast per dtype of their flattened concatenation."""
        by_dtype: dict = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        with ember.no_grad():
            for group in by_dtype.values():
                flat = ember.cat([t.reshape(-1) for t in group])
                C.broadcast(flat, src=root, group=self.process_group)
                start = 0
                for t in group:
                    t.copy_(flat[start:start + t.numel()].view(t.shape))
                    start += t.numel()

    def register_comm_hook(self, state, hook) -> None:
        """``hook(state, bucket) -> Future`` of the reduced flat buffer replaces the all-reduce."""
        if self._reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        _check_comm_hook(hook)
        self._reducer.comm_hook, self._reducer.comm_state = hook, state

    def _set_static_graph(self) -> None:
        self.static_graph = True

    @property
    def _detects_unused(self) -> bool:
        """Whether backward looks for parameters the loss did not use: with find_unused_parameters,
        and with static_graph, under which PyTorch finds them in the first iteration and reduces
        without them afterwards (ember looks every iteration: the same gradients)."""
        return self.find_unused_parameters or self.static_graph

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside accumulates gradients locally; the next synced backward averages them."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False,
             _other_hooks=()):
        """Training with uneven inputs: a rank that runs out of batches keeps matching the others'
        collectives with zero gradients until every rank is done.

        Each forward inside announces "still training" and whether its backward syncs with a small
        all-reduce; a rank leaving the block answers those with 0 and shadows the iteration's
        collectives (buffer broadcast from the highest rank still training, one zero all-reduce per
        bucket and the unused-parameter mask where the backward syncs), so the averages stay
        divided by the initial world size, as PyTorch's default. At the end every rank takes the
        parameters and buffers of the rank that joined last.
        """
        if not divide_by_initial_world_size:
            raise ValueError("join(divide_by_initial_world_size=False) is not supported by ember's DDP")
        if not enable:
            yield
            return
        self._joining = True
        try:
            yield
            if throw_on_early_termination:
                flag = ember.zeros(2, dtype=ember.int32, device=self._device)  # forward's announcement
                C.all_reduce(flag, group=self.process_group)
                if int(flag[0].item()) > 0:
                    raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
                return
            self._shadow_until_all_joined(_other_hooks)
        finally:
            self._joining = False

    def _shadow_until_all_joined(self, other_hooks=()) -> None:
        """``other_hooks``: the join hooks of the other joinables of a ``Join`` (a
        ZeroRedundancyOptimizer's step, ...), run after this model's part of every iteration."""
        shadowed = False
        while True:
            # [ranks still training, of them the ones whose backward syncs] (forward's announcement)
            flag = ember.zeros(2, dtype=ember.int32, device=self._device)
            C.all_reduce(flag, group=self.process_group)
            training, syncing = (int(v) for v in flag.tolist())
            if training == 0:
                self._sync_final_model(is_last_joiner=not shadowed)
                for hook in other_hooks:
                    hook.post_hook(not shadowed)
                return
            shadowed = True
            self._shadow_iteration(syncing)
            for hook in other_hooks:
                hook.main_hook()

    def _shadow_iteration(self, syncing: int) -> None:
        """One iteration of the others' training, matched: buffers, buckets, the used mask."""
        buffers = list(self.module.buffers())
        if self.broadcast_buffers and self.require_forward_param_sync and buffers:
            self._broadcast_from(buffers, self._common_rank(False))
        # PyTorch's joined rank: no buffer broadcast in the iteration after one that did not sync
        self.require_forward_param_sync = syncing > 0
        if not syncing:
            return
        works = []
        for indices in self._buckets:
            size = sum(self._params[i].numel() for i in indices)
            zeros = ember.zeros(size, dtype=self._params[indices[0]].dtype, device=self._device)
            works.append(C.all_reduce(zeros, group=self.process_group, async_op=True))
        if self._detects_unused:
            reducer = self._reducer
            last = reducer.globally_used or [0] * len(self._params)
            used = ember.tensor(last, dtype=ember.int32, device=self._device)
            C.all_reduce(used, op=ReduceOp.MAX, group=self.process_group)
            reducer.globally_used = used.tolist()
        for work in works:
            work.wait()

    def _common_rank(self, candidate: bool) -> int:
        """The highest group rank among the candidates (PyTorch's ``_find_common_rank``), as a global rank."""
        me = self._group.rank()
        chosen = ember.tensor([me if candidate else -1], dtype=ember.int64, device=self._device)
        C.all_reduce(chosen, op=ReduceOp.MAX, group=self.process_group)
        return self._group._ranks[int(chosen.item())]

    def _sync_final_model(self, is_last_joiner: bool) -> None:
        """Every rank ends with the model of the rank that trained longest, as PyTorch's join."""
        me = self._group._ranks[self._group.rank()]
        authority = ember.tensor([me if is_last_joiner else -1], dtype=ember.int64, device=self._device)
        C.all_reduce(authority, op=ReduceOp.MAX, group=self.process_group)
        tensors = [p.detach() for p in self.module.parameters()] + list(self.module.buffers())
        self._broadcast_from(tensors, int(authority.item()))

    # -- forward ------------------------------------------------------------------------

    def forward(self, *inputs, **kwargs):
        if self._expect_reduction and self.require_backward_grad_sync and self._hooks_fired:
            # A backward ran but not every parameter got its gradient: the buckets never completed.
            unready = [i for i, ready in enumerate(self._reducer.ready) if not ready]
            if unready:
                raise RuntimeError(
                    "Expected to have finished reduction in the prior iteration before starting a new one. This "
                    "error indicates that your module has parameters that were not used in producing loss. You can "
                    "enable unused parameter detection by passing the keyword argument "
                    "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`. Parameter indices "
                    f"which did not receive grad: {unready}"
                )
        self._reducer.reset()
        self._hooks_fired = 0
        syncs = ember.is_grad_enabled() and self.require_backward_grad_sync
        if self._joining:
            # Tell ranks that already ran out of inputs (inside join()) that this one still trains,
            # and whether its backward syncs (they shadow the bucket all-reduces only then).
            flag = ember.tensor([1, int(syncs)], dtype=ember.int32, device=self._device)
            C.all_reduce(flag, group=self.process_group)
        buffers = list(self.module.buffers()) if self.broadcast_buffers and self.require_forward_param_sync else ()
        if buffers:
            # Under join() the buffers come from the highest rank still training (rank 0 may have
            # joined with stale ones), as PyTorch's; otherwise from rank 0.
            if self._joining:
                self._broadcast_from(buffers, self._common_rank(True))
            else:
                self._broadcast_coalesced(buffers)
        output = self.module(*inputs, **kwargs)
        # PyTorch broadcasts the buffers before a forward only when the previous one synced
        self.require_forward_param_sync = syncs
        self._expect_reduction = syncs
        if self._expect_reduction and self._detects_unused:
            used = _reachable_parameters(output)
            for i, p in enumerate(self._params):
                if id(p) not in used:
                    self._reducer.locally_used[i] = i in self._used_unsynced
                    self._mark_ready(i)
        return output

    # -- the reducer ----------------------------------------------------------------------

    def _make_hook(self, index: int):
        def hook(param):
            if self.require_backward_grad_sync and self._expect_reduction:
                self._hooks_fired += 1
                self._mark_ready(index)
            elif not self.require_backward_grad_sync:
                self._used_unsynced.add(index)
        return hook

    def _mark_ready(self, index: int) -> None:
        if self._reducer.mark_ready(index):
            self._reducer.finalize(self._detects_unused, self._device)
            self._expect_reduction = False
            self._used_unsynced.clear()

    # -- pass-through ---------------------------------------------------------------------

    def __getstate__(self):
        raise RuntimeError("DistributedDataParallel is not picklable: pickle its .module instead")


def _reachable_parameters(output) -> set:
    """ids of the leaf tensors the autograd graph of ``output`` leads to."""
    roots = []

    def collect(value):
        if isinstance(value, ember.Tensor):
            if value.grad_fn is not None:
                roots.append(value.grad_fn)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            # a model output dataclass, as PyTorch's DDP looks into
            for field in dataclasses.fields(value):
                collect(getattr(value, field.name))

    collect(output)
    seen, found, stack = set(), set(), list(roots)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.add(id(variable))
        for nxt, _ in node.next_functions:
            stack.append(nxt)
    return found


def _check_comm_hook(hook) -> None:
    """PyTorch's checks of a comm hook's signature: callable, a parameter named ``bucket``, and
    annotations (where given; compared as written, so a string annotation fails, as in PyTorch)
    of ``dist.GradBucket`` and ``torch.futures.Future[torch.Tensor]``."""
    import inspect

    from ember.futures import Future

    from ._reducer import GradBucket

    if not callable(hook):
        raise TypeError("Communication hook must be callable.")
    sig = inspect.signature(hook)
    if "bucket" not in sig.parameters:  # PyTorch's own lookup raises KeyError('bucket')
        raise KeyError("bucket: a communication hook is hook(state, bucket), its second parameter named 'bucket'")
    annotation = sig.parameters["bucket"].annotation
    if annotation is not inspect.Parameter.empty and annotation is not GradBucket:
        raise ValueError("Communication hook: bucket annotation should be dist.GradBucket.")
    returned = sig.return_annotation
    if returned is not inspect.Signature.empty and returned != Future[ember.Tensor]:
        raise ValueError("Communication hook: return annotation should be torch.futures.Future[torch.Tensor].")
