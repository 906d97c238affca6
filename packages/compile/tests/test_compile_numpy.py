"""NumPy inside compiled functions: torch.compile traces NumPy calls (torch._numpy); ember's lazy
capture runs them eagerly (a ``.numpy()`` of a pending result is a graph break), so results,
in-place writes through the array and repeated (replayed) calls equal eager's, and torch.compile
2.13 agrees on each program's result."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _from_array(lib, a):
    return lib.from_numpy(np.ascontiguousarray(a))


def sin_then_tensor(lib, x):
    a = x.numpy()
    return _from_array(lib, np.sin(a) * 2 + a.sum()) + 1


def exp_of_intermediate(lib, x):
    y = x * 2
    return _from_array(lib, np.exp(y.numpy())).sum()


def argmax_scale(lib, x):
    y = lib.relu(x)
    return y * int(np.argmax(y.detach().numpy()))


def write_through_array(lib, x):
    a = x.numpy()
    a += 1  # writes the input's memory
    return x * 2


def numpy_constant(lib, x):
    return x + lib.as_tensor(np.arange(4, dtype=np.float32))


def write_intermediate_through_array(lib, x):
    y = x.clone()
    y.numpy()[0] = 100.0
    return y * 3


def numpy_mask(lib, x):
    m = x.detach().numpy() > 0
    return x * _from_array(lib, m.astype(np.float32))


PROGRAMS = [sin_then_tensor, exp_of_intermediate, argmax_scale, write_through_array, numpy_constant,
            write_intermediate_through_array, numpy_mask]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_numpy_in_compiled_function_gives_eager_result(program, backend):
    ember.compiler.reset()
    compiled = ember.compile(lambda x: program(ember, x), backend=backend)
    rng = np.random.default_rng(0)
    for _ in range(4):  # the later calls replay or re-trace: each must still run the NumPy
        data = rng.standard_normal(4).astype(np.float32)
        xe, xc = ember.tensor(data), ember.tensor(data)
        want, got = program(ember, xe), compiled(xc)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(xc.numpy(), xe.numpy())


@pytest.mark.parametrize("program", [sin_then_tensor, exp_of_intermediate, write_intermediate_through_array],
                         ids=lambda p: p.__name__)
def test_numpy_results_agree_with_torch_compile(program):
    data = np.linspace(-1.5, 1.5, 4).astype(np.float32)
    torch._dynamo.reset()
    want = torch.compile(lambda x: program(torch, x), backend="eager")(torch.tensor(data))
    got = ember.compile(lambda x: program(ember, x), backend="eager")(ember.tensor(data))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_numpy_function_of_arrays_returns_eager_numpy_value():
    # torch.compile of a function of ndarrays returns a 0-d ndarray for np.sum(..., axis=0) of a
    # vector; eager NumPy (and ember, which runs it) returns a NumPy scalar
    def f(a):
        return np.sum(np.sin(a) ** 2, axis=0)

    a = np.linspace(-1, 1, 5).astype(np.float32)
    got = ember.compile(f, backend="eager")(a)
    assert type(got) is type(f(a)) and got == f(a)


def test_fullgraph_numpy_of_a_pending_result_is_a_graph_break():
    # Dynamo traces the NumPy call into the graph; ember must run it eagerly: a break (deviations.md)
    from ember._dynamo.exc import Unsupported

    with pytest.raises(Unsupported, match=r"numpy"):
        ember.compile(lambda x: exp_of_intermediate(ember, x), backend="eager", fullgraph=True)(ember.ones(4))
    # reading an input nothing pending writes is no break
    out = ember.compile(lambda x: sin_then_tensor(ember, x), backend="eager", fullgraph=True)(ember.ones(4))
    np.testing.assert_allclose(out.numpy(), sin_then_tensor(ember, ember.ones(4)).numpy(), rtol=1e-6, atol=1e-6)
