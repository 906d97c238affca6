"""When the lowering stores a value instead of inlining it into every consumer, and the wrapper's
cached device scalars (CPU; the CUDA side runs on the H200)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from inductor_test_helpers import check, make_input

import ember
from ember.compiler.inductor import _wrapper, config


def _residual_stream(m, x, *weights):
    """A residual stream as a transformer's: each step normalizes the running sum, multiplies
    (an extern matmul ends the kernel) and adds the product back."""
    for w in weights:
        x = x + m.nn.functional.layer_norm(x, (x.shape[-1],)) @ w
    return x


def test_a_residual_sum_read_by_later_steps_is_stored_not_recomputed():
    inputs = [make_input((6, 32), ember.float32, specials=False)]
    inputs += [make_input((32, 32), ember.float32, seed=i, specials=False) * 0.2 for i in range(1, 7)]
    compiled = check(_residual_stream, *inputs, rtol=1e-4, atol=1e-5, lowered=False)
    source = compiled.artifact.cpp_source
    # each kernel reads the stored running sum and the last product, not every partial sum again
    signatures = re.findall(r"EMBER_KERNEL void \w+\(([^)]*)\)", source)
    assert max(len(re.findall(r"const float\*", sig)) for sig in signatures) <= 3, source


def test_device_scalars_are_cached_per_value():
    _wrapper._SCALARS.clear()
    a = _wrapper._scalar_to(ember.tensor(2.5), ember.device("cpu"))
    b = _wrapper._scalar_to(ember.tensor(2.5), ember.device("cpu"))
    assert a is b and a.item() == 2.5
    neg, pos = (_wrapper._scalar_to(ember.tensor(v), ember.device("cpu")) for v in (-0.0, 0.0))
    assert neg is not pos and np.signbit(neg.item()) and not np.signbit(pos.item())
    assert np.isnan(_wrapper._scalar_to(ember.tensor(float("nan")), ember.device("cpu")).item())
    ints = _wrapper._scalar_to(ember.tensor(3), ember.device("cpu"))
    assert ints.dtype is ember.int64 and ints is not _wrapper._scalar_to(ember.tensor(3.0), ember.device("cpu"))


def _gelu_grad_two_views(m, g, a, w):
    """GPT-2's MLP backward: the GELU gradient feeds a matmul and the bias gradient through two
    views of it (autograd's graph views it once per consumer)."""
    t = m.tanh(0.79788 * (a + 0.044715 * a * a * a))
    d = g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * 0.79788 * (1 + 0.134145 * a * a))
    return d.view(24, 16) @ w, d.view(24, 16).sum(0)


@pytest.mark.parametrize("fused", [False, True], ids=["column_sum_apart", "column_sum_fused"])
def test_a_view_of_a_stored_value_loads_it_not_a_second_copy(fused):
    # the matmul stores the gradient; the sum over another view of it read the inputs again and
    # stored the same gradient a second time (50 MB a layer in GPT-2), unread
    inputs = [make_input((4, 6, 16), ember.float32, specials=False),
              make_input((4, 6, 16), ember.float32, seed=1, specials=False),
              make_input((16, 8), ember.float32, seed=2, specials=False)]
    with config.patch("cpp.fuse_column_sums", fused):
        compiled = check(_gelu_grad_two_views, *inputs, rtol=1e-4, atol=1e-5, lowered=False)
    art = compiled.artifact
    signatures = re.findall(r"EMBER_KERNEL void \w+\(([^)]*)\)", art.cpp_source)
    if fused:
        # one kernel reads g and a, stores the gradient once and sums its columns as it goes
        assert art.kernel_count == 1 and [s.count("const float*") for s in signatures] == [2], art.cpp_source
        assert art.cpp_source.count("= ((float)(") == 2, art.cpp_source  # the gradient and the sum
    else:
        # the gradient's kernel reads g and a; the sum's reads the stored gradient alone
        assert art.kernel_count == 2 and sorted(s.count("const float*") for s in signatures) == [1, 2], \
            art.cpp_source


def _define_transposed(ns, real_transposed):
    """A custom op whose (fake) result is laid out transposed, as a flash attention output is
    (B, T, H, D) under its (B, H, T, D) shape; the real kernel agrees or returns it contiguous."""

    @ember.library.custom_op(f"{ns}::scaled_t", mutates_args=())
    def scaled_t(x: ember.Tensor) -> ember.Tensor:
        y = (x * 3).transpose(0, 1).contiguous().transpose(0, 1)
        return y if real_transposed else y.contiguous()

    @scaled_t.register_fake
    def _(x):
        return ember.empty_strided(x.shape, (1, x.shape[0]), dtype=x.dtype)

    return scaled_t


def test_an_extern_result_keeps_the_strides_of_its_meta():
    x = make_input((6, 5), ember.float32, specials=False)
    for ns, real_transposed in (("emberrealize_t0", True), ("emberrealize_t1", False)):
        op = _define_transposed(ns, real_transposed)

        def program(v, op=op):
            y = op(v)
            return (y + 1).sum(1) + y[:, 0], y

        compiled = ember.compile(program, fullgraph=True)
        got, want = compiled(x), program(x)
        for g, w in zip(got, want):
            ember.testing.assert_close(g, w)
        assert got[1].stride() == (1, 6)  # the meta's layout: the op's own result, or a copy into it


def test_extern_result_layout_copies_only_a_mismatch():
    y = ember.randn(5, 6).t()  # (6, 5) with strides (1, 6)
    assert _wrapper._layout(y, (1, 6)) is y
    c = _wrapper._layout(y, None)
    assert c.is_contiguous() and ember.equal(c, y)
    x = ember.randn(6, 5)
    t = _wrapper._layout(x, (1, 6))
    assert t.stride() == (1, 6) and ember.equal(t, x)
    row = ember.randn(1, 5)  # a size-1 dim's stride does not matter
    assert _wrapper._layout(ember.as_strided(row, (1, 5), (7, 1)), None).stride() == (7, 1)


def _qkv_grad_cat(m, a, b, c, w):
    """Attention's q/k/v gradients transposed back and joined along the features (GPT-2's qkv
    gradient), a cat along dim 0 of an input with itself, and one with an empty piece."""
    q = (a * 2).transpose(1, 2).reshape(2, 16, 32)
    k = b.transpose(1, 2).reshape(2, 16, 32)
    v = c.transpose(1, 2).reshape(2, 16, 32)
    x = m.cat([q, k, v], 2)
    wt = w.t()
    return x.view(32, 96) @ w, x.sum(-1), m.cat([w, w * 3], 0), m.cat([wt[:, :0], wt.exp()[:, :2], wt[:, 3:]], 1)


def test_cat_stores_each_piece_into_its_slice():
    # the three transposed pieces are one kernel writing the joined buffer: no piece is stored
    # first and copied by eager's cat
    inputs = [make_input((2, 4, 16, 8), ember.float32, seed=i, specials=False) for i in range(3)]
    inputs.append(make_input((96, 5), ember.float32, seed=3, specials=False))
    compiled = check(_qkv_grad_cat, *inputs, rtol=1e-5, atol=1e-5, lowered=False)
    art = compiled.artifact
    assert "# cat" not in art.wrapper_source and "# empty" in art.wrapper_source, art.wrapper_source
    assert art.kernel_count <= 5, art.wrapper_source


def test_view_strides_of_a_strided_layout_match_torch():
    import torch

    from ember.compiler.inductor._lowering_views import _view_strides

    cases = [((8, 1024, 768), (2359296, 2304, 1), (8, 1024, 12, 64)),  # heads of a qkv column slice
             ((8, 1024, 12, 64), (786432, 768, 64, 1), (8, 1024, 768)),  # attention's (B, L, H, E) output
             ((8, 1024, 12, 64), (786432, 64, 65536, 1), (8, 1024, 768)),  # not one run: a copy
             ((4, 6), (1, 4), (2, 2, 6)), ((3, 1, 4), (4, 100, 1), (12,)), ((3, 4), (8, 1), (3, 2, 2)),
             ((3, 4), (8, 1), (12,)), ((2, 3, 4), (1, 8, 2), (6, 4)), ((2, 3, 4), (12, 4, 1), (1, 24, 1))]
    for shape, strides, new in cases:
        t = torch.empty(1 << 25).as_strided(shape, strides)
        try:
            want = [s for s, n in zip(t.view(new).stride(), new) if n != 1]
        except RuntimeError:
            want = None
        got = _view_strides(shape, strides, new)
        got = None if got is None else [int(s) for s, n in zip(got, new) if n != 1]
        assert got == want, (shape, strides, new)


def test_an_extern_takes_a_view_of_a_column_slice_without_a_copy():
    # heads split off column slices of a projection reach attention as strided views: no kernel
    # copies them first
    def program(m, x, w):
        qkv = x @ w
        q, k, v = (qkv[:, :, i * 8:(i + 1) * 8].reshape(2, 6, 2, 4).transpose(1, 2) for i in range(3))
        return m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    inputs = [make_input((2, 6, 5), ember.float32, specials=False), make_input((5, 24), ember.float32, seed=1,
                                                                               specials=False)]
    compiled = check(program, *inputs, rtol=1e-5, atol=1e-5, lowered=False)
    assert compiled.artifact.kernel_count == 0, compiled.artifact.wrapper_source


def test_flash_attention_meta_keeps_the_query_layout():
    # what the CUDA kernels return: a compiled graph keeps that layout instead of copying it
    from ember._src.dispatch import OPS

    q = ember.empty_strided((2, 3, 16, 64), (3 * 16 * 192, 64, 192, 1), dtype=ember.bfloat16, device="meta")
    out, lse = OPS["_scaled_dot_product_flash_attention"](q, q, q, None, True, 0.125)
    assert out.stride() == (3 * 16 * 64, 64, 192, 1) and lse.is_contiguous()
    grads = OPS["_scaled_dot_product_flash_attention_backward"](out, q, q, q, out, lse, None, True, 0.125)
    assert all(g.stride() == (3 * 16 * 64, 64, 192, 1) for g in grads)
    c = ember.empty((2, 3, 16, 24), dtype=ember.bfloat16, device="meta")  # a padded head width: contiguous
    assert OPS["_scaled_dot_product_flash_attention"](c, c, c, None, True, 0.125)[0].is_contiguous()


def test_meta_arguments_keep_only_non_overlapping_layouts():
    # an expanded view's meta stand-in stays contiguous: an in-place op's meta refuses overlap
    from ember.compiler.inductor._graph import _non_overlapping

    assert _non_overlapping((8, 12, 1024, 64), (2359296, 64, 2304, 1))  # heads of a column slice
    assert _non_overlapping((2, 3), (1, 2)) and _non_overlapping((1, 6), (0, 1))
    assert not _non_overlapping((4, 6), (0, 1)) and not _non_overlapping((3, 3), (1, 1))
