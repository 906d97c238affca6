"""``get_state_dict`` / ``set_state_dict`` (``torch.distributed.checkpoint.state_dict``): model and
optimizer state keyed by parameter names (FQNs), sharded as the model is (DTensors stay DTensors)
unless ``full_state_dict`` asks for whole tensors."""

from __future__ import annotations

from dataclasses import dataclass

import ember

from ..tensor._dtensor import DTensor


@dataclass
class StateDictOptions:
    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False


def _full(value, options):
    if options.full_state_dict and isinstance(value, DTensor):
        return value.full_tensor()
    return value


def _as_list(optimizers):
    if optimizers is None:
        return []
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def _rank() -> int:
    from .. import _world

    return _world.get_rank() if _world.is_initialized() else 0


def _only_rank0(options) -> bool:
    """``full_state_dict`` with ``cpu_offload``: whole tensors gathered on every rank (each rank
    takes part in the gathers) but kept on rank 0 only; the others get ``{}``, as in PyTorch."""
    return options.full_state_dict and options.cpu_offload and _rank() != 0


# Attributes of wrapper modules that names in a checkpoint leave out, as PyTorch's FQNs do: a
# model saved inside DDP (``module.``), ``torch.compile`` (``_orig_mod.``) or a checkpoint wrapper
# loads into the bare model and back.
_WRAPPER_ATTRS = ("_orig_mod", "_checkpoint_wrapped_module", "_fsdp_wrapped_module")


def _fqn(model, name: str) -> str:
    from .._ddp import DistributedDataParallel

    kept, module = [], model
    for atom in name.split("."):
        wrapper = atom in _WRAPPER_ATTRS or (atom == "module" and isinstance(module, DistributedDataParallel))
        if not wrapper:
            kept.append(atom)
        module = getattr(module, atom, None) if module is not None else None
    return ".".join(kept)


def get_model_state_dict(model, *, submodules=None, options=None) -> dict:
    options = options or StateDictOptions()
    state = model.state_dict()
    if options.ignore_frozen_params:
        frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
        state = {k: v for k, v in state.items() if k not in frozen}
    state = {_fqn(model, k): _full(v, options) for k, v in state.items()}
    return {} if _only_rank0(options) else state


def _names(model) -> dict:
    return {id(p): _fqn(model, name) for name, p in model.named_parameters()}


def _init_state(optimizer) -> None:
    """Creates the optimizer's state as a step with zero gradients and lr 0 would (PyTorch does
    the same), so that a checkpoint can be loaded into it before any training step."""
    if optimizer.state:
        return
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    saved_grads = [p.grad for p in params]
    lrs = [g["lr"] for g in optimizer.param_groups]
    for p in params:
        if p.grad is None:
            p.grad = ember.zeros_like(p)
    for g in optimizer.param_groups:
        g["lr"] = 0.0
    try:
        optimizer.step()
    finally:
        for g, lr in zip(optimizer.param_groups, lrs):
            g["lr"] = lr
        for p, grad in zip(params, saved_grads):
            p.grad = grad


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None) -> dict:
    options = options or StateDictOptions()
    names = _names(model)
    state, groups = {}, []
    for optimizer in _as_list(optimizers):
        _init_state(optimizer)
        for group in optimizer.param_groups:
            entry = {k: v for k, v in group.items() if k != "params"}
            entry["params"] = [names[id(p)] for p in group["params"]]
            groups.append(entry)
            for p in group["params"]:
                if p in optimizer.state:
                    state[names[id(p)]] = {k: _full(v, options) for k, v in optimizer.state[p].items()}
    return {} if _only_rank0(options) else {"state": state, "param_groups": groups}


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(model state dict, optimizer state dict), both keyed by parameter names."""
    return (get_model_state_dict(model, options=options),
            get_optimizer_state_dict(model, optimizers, options=options))


def _check_broadcast(options) -> None:
    if options.broadcast_from_rank0 and not options.full_state_dict:
        raise ValueError("full_state_dict must be True when broadcast_from_rank0 is True.")


def _from_rank0_model(model, full_sd: dict) -> dict:
    """``broadcast_from_rank0``: rank 0's whole tensors (the other ranks may pass ``{}``) laid out
    as the model's own entries are, each rank keeping its piece."""
    from .. import _collectives as C
    from ..tensor._dtensor import distribute_tensor

    rank0 = _rank() == 0
    out = {}
    for key, mine in model.state_dict().items():
        key = _fqn(model, key)
        if rank0 and key not in full_sd:
            continue
        if isinstance(mine, DTensor):
            source = full_sd[key] if rank0 else ember.empty(mine.shape, dtype=mine.dtype)
            out[key] = distribute_tensor(source.to(mine.dtype), mine.device_mesh, mine.placements, src_data_rank=0)
        else:
            t = (full_sd[key].to(mine.dtype) if rank0 else ember.empty(mine.shape, dtype=mine.dtype)).contiguous()
            C.broadcast(t, src=0)
            out[key] = t
    return out


def set_model_state_dict(model, model_state_dict, *, options=None):
    options = options or StateDictOptions()
    _check_broadcast(options)
    if options.broadcast_from_rank0:
        model_state_dict = _from_rank0_model(model, model_state_dict)
    own = {_fqn(model, key): key for key in model.state_dict()}
    model_state_dict = {own.get(key, key): value for key, value in model_state_dict.items()}
    return model.load_state_dict(model_state_dict, strict=options.strict)


def _like_param(value, param):
    """A whole optimizer-state tensor (``full_state_dict``) laid out as its sharded parameter."""
    from ..tensor._dtensor import distribute_tensor

    if (isinstance(param, DTensor) and isinstance(value, ember.Tensor) and not isinstance(value, DTensor)
            and tuple(value.shape) == tuple(param.shape) and value.dim() > 0):
        return distribute_tensor(value, param.device_mesh, param.placements, src_data_rank=None)
    return value


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None) -> None:
    options = options or StateDictOptions()
    _check_broadcast(options)
    if options.broadcast_from_rank0:
        from .._object_collectives import broadcast_object_list

        box = [optim_state_dict if _rank() == 0 else None]
        broadcast_object_list(box, src=0)
        optim_state_dict = box[0]
    params = {_fqn(model, name): p for name, p in model.named_parameters()}
    optim_state_dict = {**optim_state_dict, "state": {
        name: ({k: _like_param(v, params[name]) for k, v in value.items()} if name in params else value)
        for name, value in optim_state_dict["state"].items()}}
    groups = iter(optim_state_dict["param_groups"])
    for optimizer in _as_list(optimizers):
        index = {}
        packed_groups = []
        for _ in optimizer.param_groups:
            saved = next(groups)
            packed = {k: v for k, v in saved.items() if k != "params"}
            packed["params"] = []
            for name in saved["params"]:
                index.setdefault(name, len(index))
                packed["params"].append(index[name])
            packed_groups.append(packed)
        state = {index[name]: value for name, value in optim_state_dict["state"].items() if name in index}
        for name in index:
            if name not in params:
                raise KeyError(f"set_optimizer_state_dict: the model has no parameter '{name}'")
        optimizer.load_state_dict({"state": state, "param_groups": packed_groups})


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    """Loads both halves produced by ``get_state_dict`` (possibly through a checkpoint)."""
    result = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return result


# PyTorch's private name for the same helper; pytorch/examples' FSDP2 checkpointing imports it.
_init_optim_state = _init_state
