"""Two things the mini-GPT training step paid for: loop dims an index takes apart with ``/`` and
``%`` (split into one loop per digit instead), and graph outputs that are a contiguous view of a
buffer the graph computed (returned over that buffer instead of copied)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from inductor_test_helpers import check, compile_program, make_input, spy_on_builds

import ember
from ember.compiler.inductor import config

_DIVIDED_INDEX = re.compile(r"[/%] k\d+\b")  # index divisors are kernel arguments


def _kernel_divides(source: str) -> bool:
    return bool(_DIVIDED_INDEX.search(source))


def _heads_joined(m, q, k, v):
    """Attention's q/k/v gradients (B*H, T, D) put back as (B, T, H*D) and joined: the merged
    feature dim is read as head = c / D, d = c % D of each piece (k's comes transposed)."""
    B, H, T, D = 2, 4, 24, 8
    q = (q * 2).view(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)
    k = k.view(B, H, D, T).permute(0, 3, 1, 2).reshape(B, T, H * D)
    v = v.view(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)
    return m.cat([q, k, v], 2) + 1


def test_merged_head_dims_are_loops_not_divisions():
    inputs = [make_input((8, 24, 8), ember.float32, seed=i) for i in range(3)]
    inputs[1] = make_input((8, 8, 24), ember.float32, seed=1)  # (B*H, D, T), as bmm gives k's
    compiled = check(_heads_joined, *inputs, rtol=0, atol=0, lowered=False)
    source = compiled.artifact.cpp_source
    assert not _kernel_divides(source), source
    assert re.search(r"for \(int64_t x\d+_1 = 0", source), source  # the head digit's loop


def _digits(m, x):
    """Three place values of one dim: (x / 4) % 3 and x / 12 of a (5, 24) walk, read back
    permuted (one dim's digits in another order)."""
    return x.view(5, 2, 3, 4).permute(0, 3, 2, 1).reshape(5, 24) * 3


def _not_a_chain(m, x):
    """Divisors that do not divide one another (a reshape of a transposed odd shape): the
    quotient of a sum stays a division, and the values stay right."""
    return x.t().reshape(4, 15).t().reshape(6, 10) - 1


@pytest.mark.parametrize("program,shape,divides", [(_digits, (5, 24), False), (_not_a_chain, (6, 10), True)])
def test_split_dims_keep_values(program, shape, divides):
    x = make_input(shape, ember.float32, seed=4)
    compiled = check(program, x, rtol=0, atol=0)
    assert _kernel_divides(compiled.artifact.cpp_source) is divides, compiled.artifact.cpp_source


def test_split_dims_with_a_symbolic_size_keep_values():
    fn = ember.compile(_heads_joined_dynamic, dynamic=True)
    for b in (2, 3):
        q, k, v = (make_input((b * 4, 6, 8), ember.float32, seed=s) for s in range(3))
        got = fn(q, k, v)
        np.testing.assert_array_equal(got.numpy(), _heads_joined_dynamic(q, k, v).numpy())


def _heads_joined_dynamic(q, k, v):
    B = q.shape[0] // 4
    q = q.view(B, 4, 6, 8).transpose(1, 2).reshape(B, 6, 32)
    v = v.view(B, 4, 6, 8).transpose(1, 2).reshape(B, 6, 32)
    return ember.cat([q, v], 2) * 2


def _logits(m, x, w, b):
    return m.addmm(b, x.view(-1, 16), w).view(3, 5, 12)


def test_a_contiguous_view_of_a_gemm_result_is_returned_not_copied():
    inputs = [make_input((3, 5, 16), ember.float32, specials=False),
              make_input((16, 12), ember.float32, seed=1, specials=False),
              make_input((12,), ember.float32, seed=2, specials=False)]
    compiled = check(_logits, *inputs, rtol=1e-5, atol=1e-5, lowered=False)
    art = compiled.artifact
    assert art.kernel_count == 0, art.wrapper_source
    out = compiled(*inputs)
    out.add_(1)  # a tensor of its own: writable, no view of anything the caller holds
    assert out._base is None


def _two_views(m, x, w):
    y = x @ w
    return y.view(-1), y.view(4, 2, 3), x.view(-1)


def test_outputs_never_share_memory_with_each_other_or_an_input():
    # (an output that views an input is that view of it, as in eager and PyTorch: session 17)
    x, w = make_input((4, 5), ember.float32, specials=False), make_input((5, 6), ember.float32, seed=1, specials=False)
    compiled, _ = compile_program(_two_views, [x, w])
    a, b, c = compiled(x, w)
    ptrs = {a.data_ptr(), b.data_ptr(), x.data_ptr(), w.data_ptr()}
    assert len(ptrs) == 4
    assert c._base is x and c.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(a.numpy(), (x @ w).numpy().reshape(-1))
    np.testing.assert_array_equal(c.numpy(), x.numpy().reshape(-1))


@pytest.fixture
def built(monkeypatch):
    out = spy_on_builds(monkeypatch)
    monkeypatch.setattr(config, "fallback_on_error", False)
    return out


def test_weight_gradients_are_the_gemm_results(built):
    # autograd's linear backward is transpose(transpose(mm)): contiguous, the mm's own layout;
    # each weight gradient was copied out of it by a kernel of its own
    g = np.random.default_rng(0)
    data = [g.standard_normal(s).astype(np.float32) for s in ((6, 8), (5, 8), (5,), (3, 5), (3,))]

    def run(m, fwd):
        x, w1, b1, w2, b2 = (m.tensor(d, requires_grad=i > 0) for i, d in enumerate(data))
        fwd(x, w1, b1, w2, b2).sum().backward()
        return [p.grad for p in (w1, b1, w2, b2)]

    def mlp(m):
        return lambda x, w1, b1, w2, b2: m.nn.functional.linear(
            m.nn.functional.linear(x, w1, b1).relu(), w2, b2) * 2

    got = run(ember, ember.compile(mlp(ember)))
    want = run(torch, mlp(torch))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
        assert a.is_contiguous()
    assert len({t.data_ptr() for t in got}) == len(got)
    backward = built[-1]
    assert "transpose" not in " ".join(re.findall(r"# kernel\d+: (.*)", backward.wrapper_source)), \
        backward.wrapper_source
