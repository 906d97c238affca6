"""Regressions for what the seeded 100,000-case fuzz run (`nox -s fuzz100k`, seed 17) found, vs PyTorch.

Each test replays the shrunk falsifying example (and its close relatives) on both libraries and
compares values, dtypes and exception types.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _both(fn):
    """fn(lib) on ember and torch: (kind, value) pairs, kind being the exception type name or 'ok'."""
    out = []
    for lib in (ember, torch):
        try:
            out.append(("ok", fn(lib)))
        except Exception as exc:  # noqa: BLE001 - the type is what gets compared
            out.append((type(exc).__name__, None))
    return out


def _same(fn):
    (e_kind, e_val), (t_kind, t_val) = _both(fn)
    assert e_kind == t_kind, f"ember {e_kind}, torch {t_kind}"
    if e_kind == "ok":
        assert str(e_val.dtype).split(".")[-1] == str(t_val.dtype).split(".")[-1]
        assert e_val.tolist() == t_val.tolist()


@pytest.mark.parametrize("exponent", [False, True, 0, 1, 2, -1, 0.0, 0.5])
@pytest.mark.parametrize("form", ["pow", "pow_", "**", "**=", "torch.pow"])
def test_bool_tensor_to_a_scalar_power(form, exponent):
    # Falsifying example: tensor(True).pow_(False) raised "pow_cpu not implemented for 'Bool'";
    # PyTorch answers the exponents 0 and 1 before it looks for a kernel.
    def run(lib):
        x = lib.tensor([True, False])
        if form == "pow":
            return x.pow(exponent)
        if form == "pow_":
            return x.pow_(exponent)
        if form == "**":
            return x**exponent
        if form == "**=":
            x **= exponent
            return x
        return lib.pow(x, exponent)

    _same(run)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64"])
def test_negative_int_power_in_place_checked_first(dtype):
    # PyTorch raises "Integers to negative integer powers" before its cast check for pow_.
    _same(lambda lib: lib.tensor([1, 0], dtype=getattr(lib, dtype)).pow_(-1))


def test_bool_pow_by_a_bool_tensor_still_refused():
    for fn in (lambda lib: lib.tensor([True]).pow(lib.tensor(True)), lambda lib: lib.pow(True, lib.tensor([True]))):
        (e_kind, _), (t_kind, _) = _both(fn)
        assert e_kind == t_kind == "NotImplementedError"


@pytest.mark.parametrize("dtype", ["bool", "int64", "float32"])
@pytest.mark.parametrize("kw", [None, "float16", "float32", "int64"])
def test_nanmean_checks_the_input_dtype(dtype, kw):
    # Falsifying example: nanmean(tensor(True), dtype=float16) returned 1.0; PyTorch refuses a
    # non-float input whatever dtype= asks for.
    def run(lib):
        kwargs = {} if kw is None else {"dtype": getattr(lib, kw)}
        return lib.nanmean(lib.tensor([1, 0], dtype=getattr(lib, dtype)), **kwargs)

    _same(run)


def test_histc_bins_in_the_input_dtype():
    # Falsifying example: histc(tensor(-3.7955944538116455), bins=2, min=0, max=0): PyTorch's edges
    # (x - 1, x + 1) and its linear interpolation are float32, which puts x in bin 0; ember computed in
    # double and put it in bin 1.
    _same(lambda lib: lib.histc(lib.tensor(-3.7955944538116455), 2, 0, 0))
    rng = np.random.default_rng(17)
    for _ in range(300):
        dtype = str(rng.choice(["float32", "float64"]))
        x = (rng.normal(size=int(rng.integers(1, 6))) * 10.0 ** int(rng.integers(-3, 8))).astype(dtype)
        if rng.random() < 0.3:
            x[:] = x[0]
        bins, (lo, hi) = int(rng.integers(1, 8)), [(0, 0), (-1, 2), (0, 5), (-2, 0)][int(rng.integers(0, 4))]
        _same(lambda lib, x=x, bins=bins, lo=lo, hi=hi: lib.histc(lib.tensor(x), bins, lo, hi))


_EDGES = [0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, float("inf"), float("-inf"), float("nan"), 5.96e-08, 1e-5, 3.0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_nextafter_half_precision(dtype):
    # Falsifying example: nextafter(tensor(inf, float16), bool tensor) returned inf; the neighbour was
    # taken in float32 and rounded back to the input. PyTorch steps in the 16-bit format.
    for y in [*_EDGES, True, False]:
        def run(lib, y=y):
            other = lib.tensor([y] * len(_EDGES), dtype=None if isinstance(y, bool) else getattr(lib, dtype))
            return lib.nextafter(lib.tensor(_EDGES, dtype=getattr(lib, dtype)), other)

        (e_kind, e_val), (t_kind, t_val) = _both(run)
        assert e_kind == t_kind == "ok"
        assert str(e_val.dtype).split(".")[-1] == str(t_val.dtype).split(".")[-1]
        assert str(e_val.tolist()) == str(t_val.tolist()), y  # str: NaN == NaN
    _same(lambda lib: lib.tensor([1.0, 2.0], dtype=getattr(lib, dtype)).nextafter_(
        lib.tensor([0.0, 3.0], dtype=getattr(lib, dtype))))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("eps", [None, 0.0, 1e-6, 0.25, 0.7])
def test_logit_clamp_bounds_in_the_input_dtype(dtype, eps):
    # Falsifying example: logit(tensor(1.5, float16), eps=1e-6) gave 13.80; PyTorch's upper bound
    # 1 - eps is computed in float16, where it is 1, so the result is inf.
    vals = [0.0, 1.0, 1.5, 1e-7, 0.9999999, -1.0, float("nan"), 0.5]

    def run(lib):
        return lib.logit(lib.tensor(vals, dtype=getattr(lib, dtype)), eps=eps)

    (e_kind, e_val), (t_kind, t_val) = _both(run)
    assert e_kind == t_kind == "ok"
    torch.testing.assert_close(torch.from_numpy(e_val.float().numpy()), t_val.float(), equal_nan=True,
                               rtol=1.6e-2 if dtype == "bfloat16" else 4e-3, atol=1e-5)


@pytest.mark.parametrize("p", [float("inf"), float("-inf"), -1, -0.5, 0.5, 2])
@pytest.mark.parametrize("dim", [[1], 1, [0], None, [0, 1], [1, 0]])
@pytest.mark.parametrize("shape", [(0,), (3,), (2, 0)])
@pytest.mark.parametrize("dtype", [None, "bool", "float32"])
def test_norm_of_empty_inputs_checks_in_pytorch_order(p, dim, shape, dtype):
    # Falsifying example: norm(empty float16, inf, [1], dtype=bool): PyTorch checks an empty input's
    # dims (IndexError) before the dtype; and negative orders have no identity over an empty dim.
    def run(lib):
        return lib.norm(lib.zeros(shape), p, dim, False, dtype=None if dtype is None else getattr(lib, dtype))

    (e_kind, e_val), (t_kind, t_val) = _both(run)
    assert e_kind == t_kind
    if e_kind == "ok":
        assert tuple(e_val.shape) == tuple(t_val.shape)


@pytest.mark.parametrize("src", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_norm_dtype_must_not_narrow(src, dtype):
    # Falsifying example: norm(tensor(1.5, bfloat16), 2, [0], dtype=float16) returned 1.5; PyTorch refuses a
    # dtype= the input does not promote to (and a complex one for a real input).
    for fn in (lambda lib, x, d: lib.norm(x, 2, [0], dtype=d), lambda lib, x, d: lib.linalg.vector_norm(x, 2, dtype=d)):
        _same(lambda lib, fn=fn: fn(lib, lib.ones(2, dtype=getattr(lib, src)), getattr(lib, dtype)))
