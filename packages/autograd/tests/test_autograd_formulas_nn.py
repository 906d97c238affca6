"""Derivatives of the fused nn ops (embedding, norms, pooling, padding, upsampling,
attention, class-index losses): gradients equal to PyTorch's, and gradcheck."""

from __future__ import annotations

import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember._src.dispatch import OPS
from ember.autograd.gradcheck import gradcheck


def _F(m):
    """torch.nn.functional, or ember's functional ops (the nn package is not required here)."""
    if m is torch:
        return torch.nn.functional
    import importlib
    import pkgutil
    import types

    from ember._src import ops

    names = {}
    for info in pkgutil.iter_modules(ops.nn.__path__):  # the nn kernels' modules
        module = importlib.import_module(f"ember._src.ops.nn.{info.name}")
        names.update({n: v for n, v in vars(module).items() if not n.startswith("_") and callable(v)})
    return types.SimpleNamespace(**names)


CASES = [
    ("layer_norm", lambda m, x, w, b: _F(m).layer_norm(x, (3,), w[0], b[0]), [(2, 3), (1, 3), (1, 3)],
     "native_layer_norm"),
    ("batch_norm", lambda m, x, w, b: _F(m).batch_norm(x, None, None, w[0], b[0], training=True),
     [(4, 3), (1, 3), (1, 3)], "native_batch_norm"),
    ("group_norm", lambda m, x, w, b: _F(m).group_norm(x.reshape(2, 4, 1), 2, w.reshape(4), b.reshape(4)),
     [(2, 4), (2, 2), (2, 2)], "native_group_norm"),
    ("max_pool2d", lambda m, x, w, b: _F(m).max_pool2d(x.reshape(1, 1, 4, 4), 2), [(4, 4), (1,), (1,)], "max_pool2d"),
    ("avg_pool2d", lambda m, x, w, b: _F(m).avg_pool2d(x.reshape(1, 1, 4, 4), 2, padding=1), [(4, 4), (1,), (1,)],
     "avg_pool2d"),
    ("adaptive_avg", lambda m, x, w, b: _F(m).adaptive_avg_pool2d(x.reshape(1, 1, 4, 4), 3), [(4, 4), (1,), (1,)],
     "_adaptive_avg_pool2d"),
    ("adaptive_max", lambda m, x, w, b: _F(m).adaptive_max_pool2d(x.reshape(1, 1, 4, 4), 2), [(4, 4), (1,), (1,)],
     "adaptive_max_pool2d"),
    ("pad_constant", lambda m, x, w, b: _F(m).pad(x, (1, 2, 0, 1), value=0.5), [(2, 3), (1,), (1,)], "constant_pad_nd"),
    ("pad_crop", lambda m, x, w, b: _F(m).pad(x, (-1, 1)), [(2, 3), (1,), (1,)], "constant_pad_nd"),
    ("pad_reflect", lambda m, x, w, b: _F(m).pad(x.reshape(1, 2, 3), (1, 1), mode="reflect"), [(2, 3), (1,), (1,)],
     "_pad_enum"),
    ("upsample_bilinear", lambda m, x, w, b: _F(m).interpolate(x.reshape(1, 1, 2, 3), scale_factor=2, mode="bilinear"),
     [(2, 3), (1,), (1,)], "_upsample"),
    ("attention", lambda m, q, k, v: _F(m).scaled_dot_product_attention(q.reshape(1, 2, 3), k.reshape(1, 2, 3),
                                                                         v.reshape(1, 2, 3)), [(2, 3), (2, 3), (2, 3)],
     "scaled_dot_product_attention"),
    ("attention_causal", lambda m, q, k, v: _F(m).scaled_dot_product_attention(q.reshape(1, 2, 3), k.reshape(1, 2, 3),
                                                                                v.reshape(1, 2, 3), is_causal=True),
     [(2, 3), (2, 3), (2, 3)], "scaled_dot_product_attention"),
    ("cross_entropy", lambda m, x, w, b: _F(m).cross_entropy(x, m.tensor([0, 2, 1]), label_smoothing=0.1),
     [(3, 4), (1,), (1,)], "_class_nll"),
    ("cross_entropy_weight", lambda m, x, w, b: _F(m).cross_entropy(
        x, m.tensor([0, 2, -100]), weight=m.tensor([0.5, 1.0, 2.0, 1.5]).double(), reduction="sum"),
     [(3, 4), (4,), (1,)], "_class_nll"),
    ("nll_loss", lambda m, x, w, b: _F(m).nll_loss(x, m.tensor([1, 3, 0])), [(3, 4), (1,), (1,)], "_class_nll"),
]


@pytest.mark.parametrize("name, fn, shapes, op_name", CASES, ids=[c[0] for c in CASES])
def test_nn_op(name, fn, shapes, op_name):
    if op_name not in OPS:
        pytest.skip(f"ember.ops.{op_name} is not in this tensor-core yet")
    arrays = make_arrays(shapes, 0)
    grads_match_torch(fn, arrays, rtol=1e-6, atol=1e-8)
    es, _ = leaves(arrays)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))


def test_embedding():
    if "embedding" not in OPS:
        pytest.skip("ember.ops.embedding is not in this tensor-core yet")
    arrays = make_arrays([(5, 3)], 0)
    fn = lambda m, w: _F(m).embedding(m.tensor([[0, 2], [2, 4]]), w, padding_idx=4)  # noqa: E731
    grads_match_torch(fn, arrays)
    es, _ = leaves(arrays)
    # The padding row gets no gradient by definition: gradcheck without padding_idx.
    plain = lambda w: _F(ember).embedding(ember.tensor([[0, 2], [2, 4]]), w)  # noqa: E731
    assert gradcheck(plain, (es[0],))
