"""Batching of random ops under each ``randomness`` setting of vmap.

``VmapMode`` hands every op tagged ``random`` to ``random_rule``: ``"error"`` raises; ``"same"``
draws once per call and lets the result broadcast over the batch; ``"different"`` draws a batch of
independent samples. ember's random factories allocate with ``empty`` and fill with an in-place
sampler, so under ``"different"`` a tensor that ``empty`` made inside this vmap (nobody else has
seen it: Note [Fresh tensors] in fresh.py) becomes batched when it is filled: ``randn(3)``
inside vmap draws B different vectors, as in PyTorch.
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

from .._batched import become_batched
from ._common import ensure_batched, finish_inplace, unwrap, wrap
from .fresh import is_fresh

RANDOMNESS_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                    "'different' randomness flags on vmap or perform the randomness operation out of vmap")
UNBATCHED_INPLACE = ("vmap: Cannot ask for different inplace randomness on an unbatched tensor. This will appear "
                     "like same randomness. If this is necessary for your usage, please file an issue with "
                     "functorch.")
SAME_BATCHED = ("vmap: randomness='same' with a batched tensor of parameters for {name} is not supported; use "
                "randomness='different'")

def _is_fresh(level, tensor) -> bool:
    return is_fresh(level.number, tensor)


def random_rule(op, level, args, kwargs):
    if level.randomness == "error":
        raise RuntimeError(RANDOMNESS_ERROR)
    if "inplace" in op.tags:
        return _inplace_sampler(op, level, args, kwargs)
    if "factory" in op.tags:
        return _factory(op, level, args, kwargs)
    return _sampler_with_parameters(op, level, args, kwargs)


def _unwrap_params(args, level):
    out, any_batched = [], False
    for a in args:
        if isinstance(a, Tensor):
            value, batched = unwrap(a, level)
            any_batched |= batched
            out.append((value, batched))
        else:
            out.append((a, False))
    return out, any_batched


def _inplace_sampler(op, level, args, kwargs):
    self = args[0]
    value, self_batched = unwrap(self, level)
    params, params_batched = _unwrap_params(args[1:], level)
    if level.randomness == "same":
        if params_batched:
            raise RuntimeError(SAME_BATCHED.format(name=op.name))
        if not self_batched:
            return op(*args, **kwargs)
        draw = op(OPS["empty"](tuple(value.shape[1:]), dtype=value.dtype, device=value.device),
                  *[p for p, _ in params], **kwargs)
        value.copy_(draw)
        finish_inplace(self)
        return self
    size = level.batch_size
    rank = value.dim() - (1 if self_batched else 0)
    physical_params = [_pad(p, b, rank) if isinstance(p, Tensor) else p for p, b in params]
    if self_batched:
        op(value, *physical_params, **kwargs)
        finish_inplace(self)
        return self
    if not _is_fresh(level, self):
        raise RuntimeError(UNBATCHED_INPLACE)
    physical = OPS["empty"]((size,) + tuple(value.shape), dtype=value.dtype, device=value.device)
    op(physical, *physical_params, **kwargs)
    become_batched(self, physical, level.number)
    return self


def _pad(value, batched, rank):
    if not batched:
        return value
    for _ in range(rank - (value.dim() - 1)):
        value = value.unsqueeze(1)
    return value


def _factory(op, level, args, kwargs):
    """Random factories without tensor inputs (randperm): one draw, or one per sample."""
    if level.randomness == "same":
        return op(*args, **kwargs)
    draws = [op(*args, **kwargs) for _ in range(level.batch_size)]
    return wrap(OPS["cat"]([d.unsqueeze(0) for d in draws], 0), level.number)


def _sampler_with_parameters(op, level, args, kwargs):
    """normal(mean, std), poisson, binomial, multinomial: elementwise draws from tensor parameters."""
    params, any_batched = _unwrap_params(args, level)
    if level.randomness == "same":
        if any_batched:
            raise RuntimeError(SAME_BATCHED.format(name=op.name))
        return op(*args, **kwargs)
    size = level.batch_size
    tensors = [p for p, _ in params if isinstance(p, Tensor)]
    rank = max(t.dim() - (1 if b else 0) for t, b in params if isinstance(t, Tensor)) if tensors else 0
    physical = []
    for value, batched in params:
        if isinstance(value, Tensor):
            value = _pad(value if batched else ensure_batched(value, False, size), True, rank)
        physical.append(value)
    if op.name == "multinomial":
        # rows of probabilities: the batch folds into the rows.
        probs = physical[0]
        flat = probs.reshape(-1, probs.shape[-1])
        out = op(flat, *physical[1:], **kwargs)
        return wrap(out.reshape(tuple(probs.shape[:-1]) + (out.shape[-1],)), level.number)
    return wrap(op(*physical, **kwargs), level.number)


# Samplers the op table does not tag ``random``.
UNTAGGED_RANDOM = frozenset({"poisson", "binomial"})
RANDOM_OPS = sorted(name for name, op in OPS.items() if "random" in op.tags or name in UNTAGGED_RANDOM)


def is_random(op) -> bool:
    return "random" in op.tags or op.name in UNTAGGED_RANDOM
