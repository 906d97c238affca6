"""Derivatives of convolution (first and second order), gather and the scatter family.

These ops come from other tensor-core families; each test runs once its op exists.
"""

from __future__ import annotations

import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember._src.dispatch import OPS
from ember.autograd.gradcheck import gradcheck, gradgradcheck

F = torch.nn.functional


def _nn(m):
    return F if m is torch else m


def _requires(op_name):
    return pytest.mark.skipif(op_name not in OPS, reason=f"ember.ops.{op_name} is not in this tensor-core yet")


CONV = [
    ("conv2d", lambda m, x, w, b: _nn(m).conv2d(x, w, b, stride=2, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3), (3,)]),
    ("conv1d_groups", lambda m, x, w, b: _nn(m).conv1d(x, w, b, padding=1, groups=2), [(2, 4, 5), (2, 2, 3), (2,)]),
    ("conv2d_dilation", lambda m, x, w, b: _nn(m).conv2d(x, w, b, dilation=2), [(1, 1, 5, 5), (2, 1, 2, 2), (2,)]),
    ("conv_transpose2d", lambda m, x, w, b: _nn(m).conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
     [(1, 2, 3, 3), (2, 3, 3, 3), (3,)]),
]


@_requires("convolution")
@pytest.mark.parametrize("name, fn, shapes", CONV, ids=[c[0] for c in CONV])
def test_convolution(name, fn, shapes):
    arrays = make_arrays(shapes, 0)
    grads_match_torch(fn, arrays)
    es, _ = leaves(arrays)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    assert gradgradcheck(lambda *xs: fn(ember, *xs), tuple(es))


def _idx(m, values):
    return m.tensor(values)


SCATTER = [
    ("gather", lambda m, x, s: m.gather(x, 1, _idx(m, [[0, 2, 2], [1, 1, 0]])), "gather"),
    ("scatter", lambda m, x, s: x.scatter(1, _idx(m, [[0, 2], [1, 0]]), s[:, :2]), "scatter_"),
    ("scatter_add", lambda m, x, s: x.scatter_add(1, _idx(m, [[0, 0], [1, 2]]), s[:, :2]), "scatter_add_"),
    ("scatter_reduce_sum", lambda m, x, s: x.scatter_reduce(1, _idx(m, [[0, 0], [1, 2]]), s[:, :2], "sum",
                                                             include_self=False), "scatter_reduce_"),
    ("index_add", lambda m, x, s: x.index_add(1, _idx(m, [2, 0, 2]), s, alpha=2.0), "index_add_"),
    ("index_copy", lambda m, x, s: x.index_copy(1, _idx(m, [2, 0, 1]), s), "index_copy_"),
    ("index_fill", lambda m, x, s: x.index_fill(1, _idx(m, [2, 0]), -1.0) * s, "index_fill_"),
    ("masked_scatter", lambda m, x, s: x.masked_scatter(x > 0, s), "masked_scatter_"),
]


@pytest.mark.parametrize("name, fn, op_name", SCATTER, ids=[s[0] for s in SCATTER])
def test_scatter_family(name, fn, op_name):
    if op_name not in OPS:
        pytest.skip(f"ember.ops.{op_name} is not in this tensor-core yet")
    arrays = make_arrays([(2, 3), (2, 3)], 0)
    grads_match_torch(fn, arrays)
    es, _ = leaves(arrays)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))


SELECTION = [
    ("sort", lambda m, x: m.sort(x, dim=1, descending=True)[0] * 1, "sort"),
    ("topk", lambda m, x: m.topk(x, 2, 0)[0] * 1, "topk"),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1)[0] * 1, "kthvalue"),
    ("median_keepdim", lambda m, x: m.median(x, 0, keepdim=True)[0] * 1, "median"),
    ("nanmedian", lambda m, x: m.nanmedian(x, 1)[0] * 1, "nanmedian"),
    ("mode", lambda m, x: m.mode(m.round(x * 2), 1)[0] * x.sum(), "mode"),
]


@pytest.mark.parametrize("name, fn, op_name", SELECTION, ids=[s[0] for s in SELECTION])
def test_selection(name, fn, op_name):
    if op_name not in OPS:
        pytest.skip(f"ember.ops.{op_name} is not in this tensor-core yet")
    arrays = make_arrays([(3, 4)], 2)
    grads_match_torch(fn, arrays)
    es, _ = leaves(arrays)
    assert gradcheck(lambda x: fn(ember, x), (es[0],))
