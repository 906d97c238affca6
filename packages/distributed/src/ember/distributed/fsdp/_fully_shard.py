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
from ._policy import MixedPrecisionPolicy, OffloadPolicy
from ._unshard import Unshard, gather_full, pack_unsharded


class _State:
    """What one ``fully_shard`` call manages: its parameters (owner module, name) and policies."""

    def __init__(self, mesh, params, reshard_after_forward, mp):
        self.mesh = mesh
        self.params = params  # [(owner module, name)]
        self.reshard_after_forward = reshard_after_forward
        self.mp = mp
        self.unsharded: dict = {}  # id(sharded param) -> (param, gathered tensor), during forward
        self.regathered: dict = {}  # id(sharded param) -> tensor gathered again for backward
        self.explicitly_unsharded = False

    def forget_regathered(self):
        self.regathered.clear()


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
        """Gathers the parameters now (they stay gathered until ``reshard()``)."""
        _gather(self._fsdp_state)
        self._fsdp_state.explicitly_unsharded = True
        return None

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        modules = self.modules() if recurse else [self]
        for m in modules:
            if isinstance(m, FSDPModule):
                m._fsdp_state.reshard_after_forward = bool(reshard_after_forward)

    def forward(self, *args, **kwargs):
        state = self._fsdp_state
        if state.mp.param_dtype is not None and state.mp.cast_forward_inputs:
            args = _cast_floats(args, state.mp.param_dtype)
            kwargs = _cast_floats(kwargs, state.mp.param_dtype)
        own = not state.explicitly_unsharded
        if own:
            _gather(state)
        try:
            if state.reshard_after_forward and own:
                with saved_tensors_hooks(*pack_unsharded(state)):
                    out = self._fsdp_orig_forward(*args, **kwargs)
            else:
                out = self._fsdp_orig_forward(*args, **kwargs)
        finally:
            if own:
                self.reshard()
        if state.mp.output_dtype is not None:
            out = _cast_floats(out, state.mp.output_dtype)
        return out


def _gather(state) -> None:
    for owner, name in state.params:
        param = owner._fsdp_sharded[name]
        full = Unshard.apply(param, state) if param.requires_grad else gather_full(param, state.mp.param_dtype)
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
