"""``optim.swap_in_optimizer_params_and_state``: run optimizer APIs against other parameter and
state tensors for the duration of a ``with`` block, then put the live optimizer back."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Any

from ember._src.tensor import Tensor


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters: dict[str, Tensor],
                                       swapin_optim_state: dict[str, Any]):
    """Parameters are matched by order (``optimizer.param_groups``' params flattened, usually
    ``model.named_parameters()`` order); the state is a ``state_dict()``-shaped dict keyed by the
    packed parameter ids. In-place edits of the supplied tensors are what the caller sees;
    assignments made inside the block (a new state tensor, a new ``lr``) are dropped on exit."""
    new_params = list(swapin_parameters.values())
    count = sum(len(g["params"]) for g in optimizer.param_groups)
    if len(new_params) != count:
        raise ValueError(f"swap_in_optimizer_params_and_state: expected {count} parameters (the optimizer's), "
                         f"got {len(new_params)}")
    if not isinstance(swapin_optim_state, dict) or "state" not in swapin_optim_state or \
            "param_groups" not in swapin_optim_state:
        raise ValueError("swapin_optim_state must be an optimizer.state_dict()-shaped dict with 'state' and "
                         "'param_groups'")
    groups = swapin_optim_state["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise ValueError(f"swapin_optim_state has {len(groups)} param groups, the optimizer "
                         f"{len(optimizer.param_groups)}")
    saved_groups = [dict(g) for g in optimizer.param_groups]
    saved_state = optimizer.state
    by_id: dict[int, Tensor] = {}
    start = 0
    try:
        for group, swap in zip(optimizer.param_groups, groups):
            n = len(group["params"])
            ids = list(swap.get("params", range(start, start + n)))
            if len(ids) != n:
                raise ValueError("swapin_optim_state: a param group lists a different number of parameters")
            params = new_params[start:start + n]
            by_id.update(zip(ids, params))
            group.clear()
            group.update({k: v for k, v in swap.items() if k != "params"})
            group["params"] = params
            start += n
        state = defaultdict(dict)
        for key, value in swapin_optim_state["state"].items():
            if key not in by_id:
                raise KeyError(f"swapin_optim_state: state for unknown parameter id {key}")
            state[by_id[key]] = dict(value)  # a new dict: only in-place tensor edits reach the caller's
        optimizer.state = state
        yield optimizer
    finally:
        for group, saved in zip(optimizer.param_groups, saved_groups):
            group.clear()
            group.update(saved)
        optimizer.state = saved_state
