"""Every op of the op table under ``vmap`` against a Python loop over the samples.

Driven by ``ember.dispatch.ops``: each op gets a per-sample call (``func_op_samples``), which is
batched three ways (every tensor at dim 0; the first tensor at dim 1 and the others unbatched;
the first unbatched and the others at dim 0) and twice (nested vmap), and the vmapped result must
equal the loop's stacked results.
"""

from __future__ import annotations

import warnings

import pytest
from func_op_samples import sample

import ember
from ember._src.dispatch import OPS
from ember.func import vmap
from ember.func.batching import BATCH_RULES, FALLBACK

B = 3


def _is_tensor(x):
    return isinstance(x, ember.Tensor)


def _vary(t, b):
    """Sample ``b`` of a batch built from ``t``: floats scaled (domains survive), others repeated."""
    if t.dtype.is_floating_point:
        return t * (1.0 + 0.125 * b)
    if t.dtype.is_complex:
        return t * (1.0 + 0.125 * b)
    return t.clone()


def _flat_tensors(args):
    """(position, index in list or None) of every tensor argument."""
    out = []
    for i, a in enumerate(args):
        if _is_tensor(a):
            out.append((i, None))
        elif isinstance(a, (list, tuple)):
            out.extend((i, j) for j, x in enumerate(a) if _is_tensor(x))
    return out


def _get(args, pos):
    i, j = pos
    return args[i] if j is None else args[i][j]


def _set(args, pos, value):
    i, j = pos
    if j is None:
        args[i] = value
    else:
        seq = list(args[i])
        seq[j] = value
        args[i] = type(args[i])(seq) if not isinstance(args[i], list) else seq


def _clone_args(args):
    out = []
    for a in args:
        if _is_tensor(a):
            out.append(a.clone())
        elif isinstance(a, list):
            out.append([x.clone() if _is_tensor(x) else x for x in a])
        else:
            out.append(a)
    return out


def _assert_same(actual, expected, name):
    if expected is None:
        assert actual is None
        return
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), name
        for a, e in zip(actual, expected):
            _assert_same(a, e, name)
        return
    assert _is_tensor(actual), f"{name}: got {type(actual)}"
    assert tuple(actual.shape) == tuple(expected.shape), f"{name}: {tuple(actual.shape)} vs {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{name}: {actual.dtype} vs {expected.dtype}"
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        tol = 1e-4 if expected.dtype in (ember.float32, ember.complex64) else 1e-8
        ember.testing.assert_close(actual, expected, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert ember.equal(actual, expected), name


def _stack(results):
    first = results[0]
    if first is None:
        return None
    if isinstance(first, (tuple, list)):
        return tuple(_stack([r[i] for r in results]) for i in range(len(first)))
    return ember.stack(results)


def _run(name, args, kwargs, batched_positions, in_dim_of_first):
    """vmap result and loop result for one batching choice."""
    op = OPS[name]
    inplace = "inplace" in op.tags
    positions = _flat_tensors(args)
    per_sample = []
    for b in range(B):
        sample_args = _clone_args(args)
        for pos in batched_positions:
            _set(sample_args, pos, _vary(_get(args, pos), b))
        per_sample.append(sample_args)
    batched_args = _clone_args(args)
    in_dims = [None] * len(args)
    for pos in batched_positions:
        stacked = ember.stack([_get(s, pos) for s in per_sample])
        if pos == positions[0] and in_dim_of_first == 1 and stacked.dim() > 1:
            stacked = stacked.movedim(0, 1).contiguous()
            dim = 1
        else:
            dim = 0
        _set(batched_args, pos, stacked)
        i, j = pos
        if j is None:
            in_dims[i] = dim
        else:
            if not isinstance(in_dims[i], list):
                in_dims[i] = [None] * len(args[i])
            in_dims[i][j] = dim
    expected = _stack([op(*s, **kwargs) for s in per_sample])

    def call(*a):
        return op(*a, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if name in FALLBACK else "error")
        actual = vmap(call, in_dims=tuple(in_dims))(*batched_args)
    if inplace:
        actual = batched_args[0] if in_dims[0] == 0 else batched_args[0].movedim(in_dims[0], 0)
        expected = ember.stack([s[0] for s in per_sample])
    return actual, expected


SAMPLED = [n for n in sorted(OPS) if sample(n) is not None]


@pytest.mark.parametrize("name", SAMPLED)
def test_vmap_all_batched(name):
    args, kwargs = sample(name)
    args = list(args)
    actual, expected = _run(name, args, kwargs, _flat_tensors(args), 0)
    _assert_same(actual, expected, name)


@pytest.mark.parametrize("name", SAMPLED)
def test_vmap_first_at_dim1_others_unbatched(name):
    args, kwargs = sample(name)
    args = list(args)
    positions = _flat_tensors(args)
    actual, expected = _run(name, args, kwargs, positions[:1], 1)
    _assert_same(actual, expected, name)


SEVERAL_TENSORS = [n for n in SAMPLED if "inplace" not in OPS[n].tags and len(_flat_tensors(sample(n)[0])) > 1]


@pytest.mark.parametrize("name", SEVERAL_TENSORS)
def test_vmap_first_unbatched(name):
    args, kwargs = sample(name)
    args = list(args)
    positions = _flat_tensors(args)
    actual, expected = _run(name, args, kwargs, positions[1:], 0)
    _assert_same(actual, expected, name)


@pytest.mark.parametrize("name", SAMPLED)
def test_vmap_nested(name):
    """vmap(vmap(op)) over a (2, B) batch of samples equals the doubly nested loop."""
    args, kwargs = sample(name)
    args = list(args)
    op = OPS[name]
    positions = _flat_tensors(args)
    grid = [[_clone_args(args) for _ in range(B)] for _ in range(2)]
    for a in range(2):
        for b in range(B):
            for pos in positions:
                _set(grid[a][b], pos, _vary(_get(args, pos), a * B + b))
    batched = _clone_args(args)
    in_dims = [None] * len(args)
    for pos in positions:
        _set(batched, pos, ember.stack([ember.stack([_get(grid[a][b], pos) for b in range(B)]) for a in range(2)]))
        i, j = pos
        if j is None:
            in_dims[i] = 0
        else:
            if not isinstance(in_dims[i], list):
                in_dims[i] = [None] * len(args[i])
            in_dims[i][j] = 0
    in_dims = tuple(in_dims)
    expected = _stack([_stack([op(*grid[a][b], **kwargs) for b in range(B)]) for a in range(2)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if name in FALLBACK else "error")
        actual = vmap(vmap(lambda *x: op(*x, **kwargs), in_dims), in_dims)(*batched)
    if "inplace" in op.tags:
        actual = batched[0]
        expected = ember.stack([ember.stack([grid[a][b][0] for b in range(B)]) for a in range(2)])
    _assert_same(actual, expected, name)


def test_every_op_has_a_rule_or_a_listed_fallback():
    # Composite ops (ember._src.composite) never reach the batching layer: their decomposition does.
    missing = sorted(name for name in OPS if name not in BATCH_RULES and name not in FALLBACK
                     and "composite" not in OPS[name].tags and "batch_loop" not in OPS[name].tags)
    assert not missing, f"ops with neither a batching rule nor a listed fallback: {missing}"
    both = sorted(FALLBACK & set(BATCH_RULES))
    assert not both, f"ops listed as fallback that also have a rule: {both}"


def test_fallback_warns_like_pytorch():
    x = ember.rand(3, 10)
    with pytest.warns(UserWarning, match="There is a performance drop because we have not yet implemented the "
                                         "batching rule for ember.ops.histc"):
        out = vmap(lambda t: ember.histc(t, bins=4, min=0, max=1))(x)
    expected = ember.stack([ember.histc(r, bins=4, min=0, max=1) for r in x])
    assert ember.equal(out, expected)


def test_dynamic_shape_ops_raise():
    with pytest.raises(RuntimeError, match="dynamic shape"):
        vmap(ember.nonzero)(ember.rand(3, 4))
