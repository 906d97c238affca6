"""batch_norm, layer_norm, group_norm, rms_norm, instance_norm and their native backward ops vs torch."""

from __future__ import annotations

import pytest
import torch.nn.functional as F

import ember
from ember._src.ops.nn import norm as nn_norm

from conftest import assert_same, from_torch, make_pair, torch

FLOATS = ["float32", "float64"]


def _opt(shape, name, seed, present=True):
    if not present:
        return None, None
    return make_pair(shape, name, seed=seed)


@pytest.mark.parametrize("name", FLOATS + ["float16"])
@pytest.mark.parametrize("shape,nshape", [((4, 6), (6,)), ((2, 3, 5), (3, 5)), ((3, 0, 4), (4,)), ((7,), (7,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(name, shape, nshape, affine):
    e, t = make_pair(shape, name)
    ew, tw = _opt(nshape, name, 1, affine)
    eb, tb = _opt(nshape, name, 2, affine)
    assert_same(nn_norm.layer_norm(e, nshape, ew, eb, 1e-5), F.layer_norm(t, nshape, tw, tb, 1e-5))
    assert_same(ember.layer_norm(e, list(nshape), ew, eb), torch.layer_norm(t, list(nshape), tw, tb))


@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_layer_norm_layouts(layout):
    e, t = make_pair((4, 5), "float32", layout=layout)
    assert_same(nn_norm.layer_norm(e, (5,)), F.layer_norm(t, (5,)))


@pytest.mark.parametrize("name", FLOATS)
def test_native_layer_norm_and_backward(name):
    e, t = make_pair((3, 4, 6), name)
    ew, tw = make_pair((6,), name, seed=1)
    eb, tb = make_pair((6,), name, seed=2)
    eg, tg = make_pair((3, 4, 6), name, seed=3)
    res = ember.native_layer_norm(e, [6], ew, eb, 1e-5)
    ref = torch.native_layer_norm(t, [6], tw, tb, 1e-5)
    assert_same(res, ref)
    grads = nn_norm.native_layer_norm_backward(eg, e, [6], res[1], res[2], ew, eb, [True, True, True])
    tref = torch.ops.aten.native_layer_norm_backward(tg, t, [6], ref[1], ref[2], tw, tb, [True, True, True])
    assert_same(grads, tref)
    # Cross-check with autograd through torch's layer_norm.
    tx = t.clone().requires_grad_()
    F.layer_norm(tx, (6,), tw, tb).backward(tg)
    assert_same(grads[0], tx.grad)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_layer_norm_half_input_float32_parameters(name):
    # CPU autocast's LayerNorm (bf16 activations, float32 weights): PyTorch's "mixed type" kernels keep
    # mean/rstd and the weight/bias gradients in float32; ember rounded the saved statistics to the
    # half type, which changed the input's gradient (AMP training losses drifted from PyTorch's)
    e, t = make_pair((5, 8), name)
    ew, tw = make_pair((8,), "float32", seed=1)
    eb, tb = make_pair((8,), "float32", seed=2)
    eg, tg = make_pair((5, 8), name, seed=3)
    res = ember.native_layer_norm(e, [8], ew, eb, 1e-5)
    ref = torch.native_layer_norm(t, [8], tw, tb, 1e-5)
    assert_same(res, ref)
    grads = nn_norm.native_layer_norm_backward(eg, e, [8], res[1], res[2], ew, eb, [True, True, True])
    tx, tw, tb = (v.clone().requires_grad_() for v in (t, tw, tb))
    F.layer_norm(tx, (8,), tw, tb).backward(tg)
    assert_same(grads[1:], (tw.grad, tb.grad), rtol=1e-6, atol=1e-6)
    assert_same(grads[0], tx.grad, rtol=1e-2, atol=1e-2)  # one rounding of the half type at most
    assert ember.native_layer_norm(e, [8], None, eb, 1e-5)[1].dtype is ember.float32


@pytest.mark.parametrize("which", ["batch_train", "batch_eval", "group"])
def test_batch_group_norm_half_input_float32_parameters(which):
    # a conv under CPU autocast feeds bf16 into BatchNorm2d/GroupNorm with float32 weights: PyTorch keeps
    # the statistics and the weight/bias gradients float32 (ember rounded them to bf16)
    e, t = make_pair((4, 8, 3, 3), "bfloat16")
    ew, tw = make_pair((8,), "float32", seed=1)
    eb, tb = make_pair((8,), "float32", seed=2)
    eg, tg = make_pair((4, 8, 3, 3), "bfloat16", seed=3)

    def run(lib, x, w, b, g):
        x, w, b = (v.clone().requires_grad_() for v in (x, w, b))
        if which == "group":
            out = lib.nn.functional.group_norm(x, 2, w, b)
        else:
            out = lib.nn.functional.batch_norm(x, lib.zeros(8) + 0.1, lib.ones(8) * 2, w, b,
                                               training=which == "batch_train")
        out.backward(g)
        grads = (x.grad, w.grad, b.grad)
        x, w, b = x.detach(), w.detach(), b.detach()
        if which == "group":
            stats = lib.native_group_norm(x, w, b, 4, 8, 9, 2, 1e-5)[1:]
        else:
            stats = lib.native_batch_norm(x, w, b, lib.zeros(8), lib.ones(8), True, 0.1, 1e-5)[1:]
        return out.detach(), grads[0], grads[1], grads[2], *stats

    got, expected = run(ember, e, ew, eb, eg), run(torch, t, tw, tb, tg)
    assert_same(got[0], expected[0])
    assert_same(got[1], expected[1], rtol=1e-2, atol=1e-2)
    assert_same(got[2:], expected[2:], rtol=1e-5, atol=1e-5)


def test_layer_norm_mixed_dtype_errors():
    x = ember.ones(2, 4)
    w = ember.ones(4)
    cases = [((x, w.bfloat16()), "mixed dtype (CPU): expect parameter to have scalar type of Float"),
             ((x.bfloat16(), w, w.bfloat16()), "mixed dtype (CPU): expect parameter to have scalar type of Float"),
             ((x.double(), w), "mixed dtype (CPU): all inputs must share same datatype."),
             ((x.half(), w.half(), w), "expected scalar type Half but found Float")]
    for args, message in cases:
        for lib, conv in ((ember, lambda v: v), (torch, lambda v: torch.from_numpy(v.float().numpy()).to(
                getattr(torch, str(v.dtype).split(".")[1])))):
            lib_args = [conv(a) for a in args]
            with pytest.raises(RuntimeError) as info:
                lib.nn.functional.layer_norm(lib_args[0], (4,), *lib_args[1:])
            assert str(info.value) == message


def test_layer_norm_errors():
    e = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        nn_norm.layer_norm(e, (4,))
    with pytest.raises(RuntimeError, match="weight"):
        nn_norm.layer_norm(e, (3,), ember.ones(4))


@pytest.mark.parametrize("name", FLOATS + ["float16"])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 2, 4)])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(name, shape, eps):
    e, t = make_pair(shape, name)
    ew, tw = make_pair(shape[-1:], name, seed=1)
    assert_same(nn_norm.rms_norm(e, shape[-1:], ew, eps), F.rms_norm(t, shape[-1:], tw, eps))
    assert_same(ember.rms_norm(e, list(shape[-2:]), None, eps), torch.rms_norm(t, list(shape[-2:]), None, eps))


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 2, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_updates_running_stats(name, shape, affine):
    e, t = make_pair(shape, name)
    ew, tw = _opt((3,), name, 1, affine)
    eb, tb = _opt((3,), name, 2, affine)
    erm, trm = make_pair((3,), name, seed=4)
    erv, trv = make_pair((3,), name, low=0.5, high=2, seed=5)
    out = nn_norm.batch_norm(e, erm, erv, ew, eb, True, 0.2, 1e-5)
    ref = F.batch_norm(t, trm, trv, tw, tb, True, 0.2, 1e-5)
    assert_same(out, ref)
    assert_same(erm, trm)
    assert_same(erv, trv)


@pytest.mark.parametrize("name", FLOATS + ["float16"])
def test_batch_norm_eval_and_torch_signature(name):
    e, t = make_pair((4, 3, 5), name)
    erm, trm = make_pair((3,), name, seed=4)
    erv, trv = make_pair((3,), name, low=0.5, high=2, seed=5)
    ew, tw = make_pair((3,), name, seed=1)
    assert_same(nn_norm.batch_norm(e, erm, erv, ew, None), F.batch_norm(t, trm, trv, tw, None))
    assert_same(ember.batch_norm(e, ew, None, erm, erv, False, 0.1, 1e-5, False),
                torch.batch_norm(t, tw, None, trm, trv, False, 0.1, 1e-5, False))


def test_batch_norm_no_running_stats_and_errors():
    e, t = make_pair((4, 3, 2), "float32")
    assert_same(nn_norm.batch_norm(e, None, None, training=True), F.batch_norm(t, None, None, training=True))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn_norm.batch_norm(ember.ones(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        nn_norm.batch_norm(e, ember.zeros(4), ember.ones(4))


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("train", [True, False])
def test_native_batch_norm_backward(name, train):
    e, t = make_pair((4, 3, 5), name)
    eg, tg = make_pair((4, 3, 5), name, seed=3)
    ew, tw = make_pair((3,), name, seed=1)
    erm, trm = make_pair((3,), name, seed=4)
    erv, trv = make_pair((3,), name, low=0.5, high=2, seed=5)
    res = ember.native_batch_norm(e, ew, None, erm, erv, train, 0.1, 1e-5)
    ref = torch.native_batch_norm(t, tw, None, trm, trv, train, 0.1, 1e-5)
    assert_same(res, ref)
    grads = nn_norm.native_batch_norm_backward(eg, e, ew, erm, erv, res[1], res[2], train, 1e-5, [True] * 3)
    tref = torch.ops.aten.native_batch_norm_backward(tg, t, tw, trm, trv, ref[1], ref[2], train, 1e-5, [True] * 3)
    assert_same(grads, tref)


@pytest.mark.parametrize("name", FLOATS + ["float16"])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4), 2), ((2, 4, 2, 3), 1), ((1, 6, 3), 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(name, shape, groups, affine):
    e, t = make_pair(shape, name)
    ew, tw = _opt(shape[1:2], name, 1, affine)
    eb, tb = _opt(shape[1:2], name, 2, affine)
    assert_same(nn_norm.group_norm(e, groups, ew, eb), F.group_norm(t, groups, tw, tb))
    assert_same(ember.group_norm(e, groups, ew, eb), torch.group_norm(t, groups, tw, tb))


@pytest.mark.parametrize("name", FLOATS)
def test_native_group_norm_backward(name):
    e, t = make_pair((2, 6, 5), name)
    eg, tg = make_pair((2, 6, 5), name, seed=3)
    ew, tw = make_pair((6,), name, seed=1)
    eb, tb = make_pair((6,), name, seed=2)
    res = ember.native_group_norm(e, ew, eb, 2, 6, 5, 3, 1e-5)
    ref = torch.native_group_norm(t, tw, tb, 2, 6, 5, 3, 1e-5)
    assert_same(res, ref)
    grads = nn_norm.native_group_norm_backward(eg, e, res[1], res[2], ew, 2, 6, 5, 3, [True] * 3)
    tref = torch.ops.aten.native_group_norm_backward(tg, t, ref[1], ref[2], tw, 2, 6, 5, 3, [True] * 3)
    assert_same(grads, tref)


def test_group_norm_errors():
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        nn_norm.group_norm(ember.ones(2, 5, 3), 2)


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm(use_input_stats):
    e, t = make_pair((2, 3, 5), "float64")
    erm, trm = make_pair((3,), "float64", seed=4)
    erv, trv = make_pair((3,), "float64", low=0.5, high=2, seed=5)
    out = nn_norm.instance_norm(e, erm, erv, use_input_stats=use_input_stats)
    assert_same(out, F.instance_norm(t, trm, trv, use_input_stats=use_input_stats))
    assert_same(erm, trm)
    assert_same(erv, trv)


def test_meta_shapes():
    m = ember.empty(2, 3, 4, device="meta")
    out, mean, rstd = ember.native_layer_norm(m, [4], None, None, 1e-5)
    assert out.shape == (2, 3, 4) and mean.shape == (2, 3, 1) and str(out.device) == "meta"
    assert ember.native_group_norm(m, None, None, 2, 3, 4, 3, 1e-5)[1].shape == (2, 3)


def test_top_level_not_tensor_methods():
    assert not hasattr(ember.Tensor, "layer_norm") and not hasattr(ember.Tensor, "batch_norm")
    assert from_torch(torch.ones(1)).shape == (1,)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_layer_norm_backward_half_weight_bias_grads_match_torch_exactly(dtype, threads):
    # PyTorch sums dweight/dbias of a half-type input per thread block of rows with a half-type
    # accumulator, then adds the blocks in float: the same inputs give bit-identical grads.
    import numpy as np
    import torch

    old_t, old_e = torch.get_num_threads(), ember.get_num_threads()
    torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        for m, n in [(4, 8), (37, 25), (64, 96), (5, 131)]:
            arrs = [rng.standard_normal(s).astype("float32") for s in [(m, n), (n,), (n,), (m, n)]]
            x, w, b, g = (torch.tensor(a).to(getattr(torch, dtype)) for a in arrs)
            _, mean, rstd = torch.native_layer_norm(x, (n,), w, b, 1e-5)
            ref = torch.ops.aten.native_layer_norm_backward(g, x, (n,), mean, rstd, w, b, [True, True, True])
            ge, xe, me, re, we, be = (ember.from_numpy(t.float().numpy()).to(getattr(ember, dtype))
                                      for t in (g, x, mean, rstd, w, b))
            got = ember.ops.aten.native_layer_norm_backward(ge, xe, (n,), me, re, we, be, [True, True, True])
            for k in (1, 2):
                np.testing.assert_array_equal(got[k].float().numpy(), ref[k].float().numpy())
    finally:
        torch.set_num_threads(old_t)
        ember.set_num_threads(old_e)
