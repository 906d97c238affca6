"""``fully_shard``: FSDP2. Each managed parameter becomes an ``nn.Parameter`` holding a DTensor
sharded on dim 0 over the mesh (``Shard(0)``; on a 2-D mesh ``(Replicate(), Shard(0))``, HSDP).

Forward: the module's parameters are all-gathered (``Unshard``) and put in place of the sharded
ones for the duration of the module's own forward, then the sharded ones come back. Backward:
each gathered parameter's gradient is reduce-scattered into the sharded parameter's ``.grad``
(a DTensor), averaged over the ranks, so an optimizer built on the module's parameters (any of
``ember.optim``) updates the shards. ``reshard_after_forward=True`` frees the gathered
parameters after forward and gathers them again when backward needs them (saved-tensor hooks);
``False`` keeps them until backward is done with them.
"""

from __future__ import annotations

from ember import nn
from ember.autograd.graph import saved_tensors_hooks

from ..device_mesh import DeviceMesh
from ..tensor._dtensor import DTensor, _default_mesh
from ..tensor._layout import redistribute_local
from ..tensor._placements import Replicate, Shard
from ._flat import FlatParams, UnshardFlat, eligible
from ._policy import MixedPrecisionPolicy, OffloadPolicy
from ._unshard import Unshard, gather_full, pack_unsharded


class _State:
    """What one ``fully_shard`` call manages: its parameters (owner module, name) and policies."""

    def __init__(self, mesh, params, reshard_after_forward, mp):
        self.mesh = mesh
        self.params = params  # [(owner module, name)]
        self.reshard_after_forward = reshard_after_forward
        self.reshard_after_backward = True
        self.requires_gradient_sync = True
        self.mp = mp
        self.unsharded: dict = {}  # id(sharded param) -> (param, gathered tensor), during forward
        self.regathered: dict = {}  # id(sharded param) -> tensor gathered again for backward
        self.explicitly_unsharded = False
        sharded = [owner._fsdp_sharded[name] for owner, name in params]
        self.flat = FlatParams(sharded) if eligible(sharded) else None
        self.pending = None  # a started all-gather (prefetch, unshard(async_op=True))
        self.kept = None  # whole parameters kept after backward (set_reshard_after_backward(False))
        self.last = None  # the whole parameters gathered last (while forward or backward holds them)
        self.accumulated = None  # whole gradients summed while gradient sync is off
        self.forward_prefetch: list = []
        self.backward_prefetch: list | None = None  # None: the module that ran before in forward
        self.previous = None  # the _State whose forward ran before this one's (this iteration)

    def forget_regathered(self):
        self.regathered.clear()

    # -- the flat path (one all-gather / reduce-scatter for all parameters) ----------------------

    def sharded(self) -> list:
        return [owner._fsdp_sharded[name] for owner, name in self.params]

    def prefetch(self) -> None:
        """Starts this module's all-gather now (it is waited on where it is used)."""
        if self.flat is not None and self.pending is None and self.kept is None:
            self.pending = self.flat.start_gather(self.mp.param_dtype, async_op=True)
            _PREFETCHED.append(self)

    def take_gathered(self) -> list:
        """The whole parameters: kept ones, the prefetched gather, or one gathered now."""
        if self.kept is not None:
            return self.kept
        pending, self.pending = self.pending, None
        if pending is None:
            pending = self.flat.start_gather(self.mp.param_dtype, async_op=False)
        self.last = pending.result()
        return self.last

    def regather(self) -> None:
        """Backward needs the parameters freed after forward: gather them all at once (or take the
        prefetched gather), then start the gather of the module backward reaches next."""
        fulls = self.take_gathered()
        for param, full in zip(self.sharded(), fulls):
            self.regathered[id(param)] = full
        following = self.backward_prefetch
        if following is None:
            following = [self.previous] if self.previous is not None else []
        for module_or_state in following:
            other = getattr(module_or_state, "_fsdp_state", module_or_state)
            if other.reshard_after_forward and not other.regathered and other.last is None:
                other.prefetch()

    def grads_for_shards(self, grads) -> list:
        """Backward of the flat gather: reduce-scatter now, or accumulate (gradient sync off)."""
        if self.reshard_after_backward:
            self.kept = None
        elif self.kept is None:
            self.kept = self.last
        self.last = None
        self.forget_regathered()
        grads = list(grads)
        if self.accumulated is not None:
            grads = [a if g is None else (g if a is None else a + g) for a, g in zip(self.accumulated, grads)]
            self.accumulated = None
        if not self.requires_gradient_sync:
            self.accumulated = [None if g is None else g.detach() for g in grads]
            return [None] * len(grads)
        return self.flat.shard_grads(grads, self.mp.reduce_dtype or self.mp.param_dtype)



_LAST_FORWARD: list = [None]  # the _State whose forward ran last in this iteration
_DEPTH = [0]  # FSDP forwards running (0 when the root's forward starts: a new iteration)
_PREFETCHED: list = []  # states with a prefetched all-gather


def _new_iteration() -> None:
    """The root's forward starts: a prefetch nobody used (its module's backward never needed
    it) holds parameters from before the optimizer step, so it is dropped (still waited on:
    every rank started it, so it completes)."""
    _LAST_FORWARD[0] = None
    for state in _PREFETCHED:
        if state.pending is not None:
            state.pending.wait()
            state.pending = None
    _PREFETCHED.clear()


class _UnshardHandle:
    """``unshard(async_op=True)``'s handle: ``wait()`` puts the gathered parameters in place."""

    def __init__(self, module):
        self._module = module

    def wait(self) -> None:
        state = self._module._fsdp_state
        if not state.explicitly_unsharded:
            _gather(state)
            state.explicitly_unsharded = True


class FSDPModule:
    """Mixed into the class of every module ``fully_shard`` was applied to."""

    def reshard(self) -> None:
        """Puts the sharded parameters back (after ``unshard()``)."""
        state = self._fsdp_state
        for owner, name in state.params:
            param = owner._fsdp_sharded[name]
            owner._parameters[name] = param
        state.unsharded.clear()
        state.explicitly_unsharded = False

    def unshard(self, async_op: bool = False):
        """Gathers the parameters (they stay gathered until ``reshard()``); with ``async_op`` the
        gather starts now and the returned handle's ``wait()`` puts them in place."""
        state = self._fsdp_state
        if async_op and state.flat is not None:
            state.prefetch()
            return _UnshardHandle(self)
        _gather(state)
        state.explicitly_unsharded = True
        return None

    def _fsdp_modules(self, recurse: bool):
        return [m for m in (self.modules() if recurse else [self]) if isinstance(m, FSDPModule)]

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        for m in self._fsdp_modules(recurse):
            m._fsdp_state.reshard_after_forward = bool(reshard_after_forward)

    def set_reshard_after_backward(self, reshard_after_backward: bool, *, recurse: bool = True) -> None:
        """``False`` keeps the whole parameters after backward, so the next forward gathers
        nothing (for gradient accumulation: the shards must not change meanwhile)."""
        for m in self._fsdp_modules(recurse):
            m._fsdp_state.reshard_after_backward = bool(reshard_after_backward)
            if reshard_after_backward:
                m._fsdp_state.kept = None

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse: bool = True) -> None:
        """``False``: backward sums whole gradients locally, without any reduce-scatter; the first
        backward with sync back on reduce-scatters the sum (FSDP2's ``no_sync``)."""
        for m in self._fsdp_modules(recurse):
            m._fsdp_state.requires_gradient_sync = bool(requires_gradient_sync)

    def set_modules_to_forward_prefetch(self, modules) -> None:
        """When this module's forward starts, start the all-gathers of ``modules``."""
        _check_fsdp_modules(modules)
        self._fsdp_state.forward_prefetch = list(modules)

    def set_modules_to_backward_prefetch(self, modules) -> None:
        """When backward gathers this module's parameters, start the all-gathers of ``modules``
        (by default: the module whose forward ran just before this one's)."""
        _check_fsdp_modules(modules)
        self._fsdp_state.backward_prefetch = list(modules)

    def forward(self, *args, **kwargs):
        state = self._fsdp_state
        if state.mp.param_dtype is not None and state.mp.cast_forward_inputs:
            args = _cast_floats(args, state.mp.param_dtype)
            kwargs = _cast_floats(kwargs, state.mp.param_dtype)
        own = not state.explicitly_unsharded
        if _DEPTH[0] == 0:
            _new_iteration()
        if state.params:
            state.previous, _LAST_FORWARD[0] = _LAST_FORWARD[0], state
        if own:
            _gather(state)
        for module in state.forward_prefetch:
            module._fsdp_state.prefetch()
        _DEPTH[0] += 1
        try:
            if state.reshard_after_forward and own:
                with saved_tensors_hooks(*pack_unsharded(state)):
                    out = self._fsdp_orig_forward(*args, **kwargs)
            else:
                out = self._fsdp_orig_forward(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            if own:
                self.reshard()
                if state.reshard_after_forward:
                    state.last = None  # backward gathers again
        if state.mp.output_dtype is not None:
            out = _cast_floats(out, state.mp.output_dtype)
        return out


def _check_fsdp_modules(modules) -> None:
    for m in modules:
        if not isinstance(m, FSDPModule):
            raise ValueError(f"Expects FSDPModule but got {type(m).__name__}")


def _gather(state) -> None:
    sharded = state.sharded()
    if state.flat is not None and any(p.requires_grad for p in sharded):
        fulls = UnshardFlat.apply(*sharded, state)
    elif state.flat is not None:
        fulls = state.take_gathered()
    else:
        fulls = [Unshard.apply(param, state) if param.requires_grad else gather_full(param, state.mp.param_dtype)
                 for param in sharded]
    for (owner, name), param, full in zip(state.params, sharded, fulls):
        state.unsharded[id(param)] = (param, full)
        owner._parameters[name] = full


def _cast_floats(value, dtype):
    from ember import Tensor

    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_floats(v, dtype) for k, v in value.items()}
    return value


_CLASSES: dict = {}
_DEFAULT_MP = MixedPrecisionPolicy()
_DEFAULT_OFFLOAD = OffloadPolicy()


def _fsdp_class(cls):
    made = _CLASSES.get(cls)
    if made is None:
        made = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"_fsdp_orig_forward": cls.forward})
        _CLASSES[cls] = made
    return made


def fully_shard(module, *, mesh: DeviceMesh | None = None, reshard_after_forward=True, shard_placement_fn=None,
                mp_policy: MixedPrecisionPolicy = _DEFAULT_MP, offload_policy=_DEFAULT_OFFLOAD, ignored_params=None):
    """Shards ``module``'s parameters not managed by an inner ``fully_shard`` yet; returns it."""
    if isinstance(module, (list, tuple)):
        for m in module:
            fully_shard(m, mesh=mesh, reshard_after_forward=reshard_after_forward,
                        shard_placement_fn=shard_placement_fn, mp_policy=mp_policy, offload_policy=offload_policy,
                        ignored_params=ignored_params)
        return module
    if not isinstance(module, nn.Module):
        raise ValueError(f"fully_shard does not support containers that do not implement forward: {type(module)}")
    mesh = mesh if mesh is not None else _default_mesh()
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard expects a 1D or 2D DeviceMesh but got {mesh}")
    if not isinstance(reshard_after_forward, (bool, int)):
        raise ValueError(f"reshard_after_forward should be a bool or an int, got {type(reshard_after_forward)}")
    ignored = {id(p) for p in (ignored_params or ())}
    params = []
    for _, owner in module.named_modules():
        for name, param in list(owner._parameters.items()):
            if param is None or id(param) in ignored or isinstance(param, DTensor):
                continue  # DTensors here are managed by an inner fully_shard (or another parallelism)
            placement = shard_placement_fn(param) if shard_placement_fn is not None else None
            placements = ([Replicate()] if mesh.ndim == 2 else []) + [placement or Shard(0)]
            local = redistribute_local(param.detach(), param.shape, mesh, [Replicate()] * mesh.ndim, placements)
            if local is param.detach() or local._storage is param._storage:
                local = local.clone()
            dt = DTensor._wrap(local, mesh, placements, param.shape)
            sharded = nn.Parameter(dt, requires_grad=param.requires_grad)
            owner._parameters[name] = sharded
            if "_fsdp_sharded" not in owner.__dict__:
                owner._fsdp_sharded = {}
            owner._fsdp_sharded[name] = sharded
            params.append((owner, name))
    module._fsdp_state = _State(mesh, params, bool(reshard_after_forward), mp_policy)
    if not isinstance(module, FSDPModule):
        module.__class__ = _fsdp_class(type(module))
    return module
