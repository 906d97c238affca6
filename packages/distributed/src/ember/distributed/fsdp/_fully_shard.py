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
        self.explicit = None  # whole parameters gathered by unshard(), for the next forward to use
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

    def adopt_replaced(self) -> None:
        """Takes up parameters put in place of the sharded ones since the last gather
        (``load_state_dict(..., assign=True)`` with ``distribute_tensor`` pieces, as PyTorch's FSDP2
        example loads a checkpoint; a plain tensor is sharded here): they are what the optimizer
        built afterwards holds, so they are the ones to gather and to give gradients to."""
        changed = False
        for owner, name in self.params:
            current = owner._parameters.get(name)
            sharded = owner._fsdp_sharded[name]
            if current is sharded or current is None or id(sharded) in self.unsharded:
                continue
            if not isinstance(current, DTensor):
                local = redistribute_local(current.detach(), current.shape, self.mesh,
                                           [Replicate()] * self.mesh.ndim, sharded.placements)
                if local._storage is current._storage:
                    local = local.clone()
                current = nn.Parameter(DTensor._wrap(local, self.mesh, sharded.placements, current.shape),
                                       requires_grad=current.requires_grad)
                owner._parameters[name] = current
            elif (current.device_mesh != self.mesh or tuple(current.placements) != tuple(sharded.placements)
                  or tuple(current.shape) != tuple(sharded.shape)):
                raise ValueError(f"fully_shard: parameter '{name}' was replaced by a DTensor of shape "
                                 f"{tuple(current.shape)} and placements {current.placements}; expected shape "
                                 f"{tuple(sharded.shape)} and placements {sharded.placements} on {self.mesh}")
            owner._fsdp_sharded[name] = current
            changed = True
        if changed:
            if self.pending is not None:  # gathered from the replaced parameters
                self.pending.wait()
                self.pending = None
            self.kept = None
            sharded = self.sharded()
            self.flat = FlatParams(sharded) if eligible(sharded) else None

    def prefetch(self) -> None:
        """Starts this module's all-gather now (it is waited on where it is used)."""
        self.adopt_replaced()
        if self.flat is not None and self.pending is None and self.kept is None:
            self.pending = self.flat.start_gather(self.mp.param_dtype, async_op=True)
            _PREFETCHED.append(self)

    def take_gathered(self) -> list:
        """The whole parameters: kept ones, the prefetched gather, or one gathered now."""
        if self.kept is not None:
            return self.kept
        if self.explicit is not None:
            self.last, self.explicit = self.explicit, None
            return self.last
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
    """``unshard(async_op=True)``'s handle: ``wait()`` puts the gathered parameters in place
    (nothing to do once the module's forward has used the gather)."""

    def __init__(self, module, pending):
        self._module = module
        self._pending = pending

    def wait(self) -> None:
        state = self._module._fsdp_state
        if self._pending is not None and state.pending is self._pending:
            _unshard_now(state)
        self._pending = None


def _put_sharded(state) -> None:
    for owner, name in state.params:
        owner._parameters[name] = owner._fsdp_sharded[name]
    state.unsharded.clear()


def _unshard_now(state) -> None:
    """``unshard()``: the whole parameters, gathered now, take the sharded ones' places as leaf
    parameters (as in PyTorch) until the module's next forward, which computes with them (one
    gather, not two) and then reshards as usual, or until ``reshard()``."""
    state.adopt_replaced()
    sharded = state.sharded()
    if state.flat is not None:
        fulls = state.take_gathered()
        state.last = None
        state.explicit = fulls
    else:
        fulls = [gather_full(p, state.mp.param_dtype) for p in sharded]
    for (owner, name), param, full in zip(state.params, sharded, fulls):
        shown = nn.Parameter(full.detach(), requires_grad=param.requires_grad)
        state.unsharded[id(param)] = (param, shown)
        owner._parameters[name] = shown
    state.explicitly_unsharded = True


class FSDPModule:
    """Mixed into the class of every module ``fully_shard`` was applied to."""

    def reshard(self) -> None:
        """Puts the sharded parameters back (after ``unshard()``)."""
        state = self._fsdp_state
        _put_sharded(state)
        state.explicitly_unsharded = False
        state.explicit = None
        if state.pending is not None:
            state.pending.wait()
            state.pending = None

    def unshard(self, async_op: bool = False):
        """Gathers the parameters now: they take the sharded ones' places until the next forward
        (which uses them, then reshards as usual) or ``reshard()``. With ``async_op`` the gather
        starts now and the returned handle's ``wait()`` puts them in place; a forward before
        ``wait()`` waits for it itself."""
        state = self._fsdp_state
        if state.explicitly_unsharded:
            return _UnshardHandle(self, None) if async_op else None
        if async_op and state.flat is not None:
            state.prefetch()
            if state in _PREFETCHED:  # the next forward uses it: not an unused prefetch to drop
                _PREFETCHED.remove(state)
            return _UnshardHandle(self, state.pending)
        _unshard_now(state)
        return _UnshardHandle(self, None) if async_op else None

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
        if state.explicitly_unsharded:  # unshard() gathered them: this forward computes with that gather
            _put_sharded(state)
            state.explicitly_unsharded = False
        if _DEPTH[0] == 0:
            _new_iteration()
        if state.params:
            state.previous, _LAST_FORWARD[0] = _LAST_FORWARD[0], state
        _gather(state)
        for module in state.forward_prefetch:
            module._fsdp_state.prefetch()
        _DEPTH[0] += 1
        try:
            if state.reshard_after_forward:
                with saved_tensors_hooks(*pack_unsharded(state)):
                    out = self._fsdp_orig_forward(*args, **kwargs)
            else:
                out = self._fsdp_orig_forward(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            _put_sharded(state)
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
    state.adopt_replaced()
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
    # id(parameter) -> (the parameter, kept so that its id is not reused; its sharded parameter):
    # a parameter shared by several modules stays one
    shared: dict = {}
    for _, owner in module.named_modules():
        for name, param in list(owner._parameters.items()):
            if param is not None and id(param) in shared:
                sharded = shared[id(param)][1]
                owner._parameters[name] = sharded
                if "_fsdp_sharded" not in owner.__dict__:
                    owner._fsdp_sharded = {}
                owner._fsdp_sharded[name] = sharded
                params.append((owner, name))
                continue
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
            shared[id(param)] = (param, sharded)
            params.append((owner, name))
    module._fsdp_state = _State(mesh, params, bool(reshard_after_forward), mp_policy)
    if not isinstance(module, FSDPModule):
        module.__class__ = _fsdp_class(type(module))
    return module
