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


def get_model_state_dict(model, *, submodules=None, options=None) -> dict:
    options = options or StateDictOptions()
    state = model.state_dict()
    if options.ignore_frozen_params:
        frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
        state = {k: v for k, v in state.items() if k not in frozen}
    return {k: _full(v, options) for k, v in state.items()}


def _names(model) -> dict:
    return {id(p): name for name, p in model.named_parameters()}


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
    return {"state": state, "param_groups": groups}


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    """(model state dict, optimizer state dict), both keyed by parameter names."""
    return (get_model_state_dict(model, options=options),
            get_optimizer_state_dict(model, optimizers, options=options))


def set_model_state_dict(model, model_state_dict, *, options=None):
    options = options or StateDictOptions()
    return model.load_state_dict(model_state_dict, strict=options.strict)


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None) -> None:
    params = dict(model.named_parameters())
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
