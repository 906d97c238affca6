"""Per-sample inputs for every op of the op table, for the vmap-vs-loop tests.

Most ops get their sample from their schema: a Tensor argument becomes a random tensor (float, or
int for ops that take integers only), a Scalar the schema default or 0.5, a dim 1. Ops whose
arguments carry constraints a schema cannot say (matrix shapes, index ranges, kernel sizes) have
a hand-written sample in ``MANUAL``. ``sample(name)`` returns ``(args, kwargs)`` or None for ops
checked elsewhere (random ops, which the randomness tests cover).
"""

from __future__ import annotations

import ember
from ember._src.dispatch import OPS
from ember.func.batching._common import signature

SHAPE = (3, 4)


def rand(*shape, low=-2.0, high=2.0, dtype=None):
    return ember.rand(*shape, dtype=dtype or ember.float32) * (high - low) + low


def pos(*shape):
    return ember.rand(*shape) + 1.5


def ints(*shape, low=0, high=5):
    return ember.randint(low, high, shape)


def _spd(n):
    a = ember.randn(n, n, dtype=ember.float64)
    return a @ a.T + n * ember.eye(n, dtype=ember.float64)


def _manual():
    conv_x, conv_w = rand(2, 3, 6, 6), rand(4, 3, 3, 3)
    grad_conv = ember.ops["convolution"](conv_x, conv_w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    pool_x = rand(2, 3, 6, 6)
    _, pool_idx = ember.ops["max_pool2d_with_indices"](pool_x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    amax_out, amax_idx = ember.ops["adaptive_max_pool2d"](pool_x, [3, 3])
    ln_x = rand(2, 5)
    _, ln_mean, ln_rstd = ember.ops["native_layer_norm"](ln_x, [5], rand(5), rand(5), 1e-5)
    fa_q, fa_k, fa_v = rand(2, 2, 3, 4), rand(2, 1, 5, 4), rand(2, 1, 5, 3)
    fa_out, fa_lse = ember.ops["_scaled_dot_product_flash_attention"](fa_q, fa_k, fa_v, None, True, 0.5)
    bn_x = rand(4, 3, 2)
    _, bn_mean, bn_invstd = ember.ops["native_batch_norm"](bn_x, rand(3), rand(3), None, None, True, 0.1, 1e-5)
    gn_x = rand(2, 4, 3)
    _, gn_mean, gn_rstd = ember.ops["native_group_norm"](gn_x, rand(4), rand(4), 2, 4, 3, 2, 1e-5)
    return {
        "mm": ((rand(3, 4), rand(4, 2)), {}),
        "bmm": ((rand(2, 3, 4), rand(2, 4, 2)), {}),
        "mv": ((rand(3, 4), rand(4)), {}),
        "dot": ((rand(4), rand(4)), {}),
        "addmm": ((rand(3, 2), rand(3, 4), rand(4, 2)), {"beta": 0.5, "alpha": 2.0}),
        "addmv": ((rand(3), rand(3, 4), rand(4)), {}),
        "addbmm": ((rand(3, 2), rand(2, 3, 4), rand(2, 4, 2)), {}),
        "baddbmm": ((rand(2, 3, 2), rand(2, 3, 4), rand(2, 4, 2)), {}),
        "linalg_det": ((rand(3, 3),), {}),
        "linalg_slogdet": ((rand(3, 3),), {}),
        "linalg_inv_ex": ((_spd(3),), {}),
        "linalg_cholesky_ex": ((_spd(3),), {}),
        "linalg_qr": ((rand(4, 3),), {}),
        "linalg_svd": ((rand(4, 3),), {"full_matrices": False}),
        "linalg_eigh": ((_spd(3),), {}),
        "linalg_eig": ((rand(3, 3),), {}),
        "linalg_ldl_factor_ex": ((_spd(3),), {}),
        "linalg_ldl_solve": ((*ember.linalg.ldl_factor(_spd(3)), ember.randn(3, 2, dtype=ember.float64)), {}),
        "linalg_lu_factor_ex": ((_spd(3),), {}),
        "linalg_solve_ex": ((_spd(3), ember.randn(3, 2, dtype=ember.float64)), {}),
        "linalg_lstsq": ((ember.randn(4, 3, dtype=ember.float64), ember.randn(4, 2, dtype=ember.float64)), {}),
        "view": ((rand(3, 4), [2, 6]), {}),
        "expand": ((rand(3, 1), [2, 3, 4]), {}),
        "permute": ((rand(2, 3, 4), [2, 0, 1]), {}),
        "transpose": ((rand(2, 3, 4), 0, -1), {}),
        "squeeze": ((rand(3, 1, 4), [1]), {}),
        "unsqueeze": ((rand(3, 4), -1), {}),
        "narrow": ((rand(3, 4), 1, 1, 2), {}),
        "select": ((rand(3, 4), 1, 2), {}),
        "slice": ((rand(3, 4), 1, 0, 4, 2), {}),
        "diagonal": ((rand(3, 4, 2), 0, 0, 1), {}),
        "unfold": ((rand(3, 6), 1, 2, 2), {}),
        "as_strided": ((rand(3, 4), [2, 2], [4, 1], 1), {}),
        "view_as_complex": ((rand(3, 2),), {}),
        "view_dtype": ((rand(3, 4), ember.int32), {}),
        "flip": ((rand(3, 4), [0, 1]), {}),
        "cat": (([rand(2, 3), rand(1, 3)], 0), {}),
        "index": ((rand(4, 5), [ints(3, high=4), None]), {}),
        "index_put_": ((rand(4, 5), [ints(3, high=4)], rand(3, 5), True), {}),
        "index_select": ((rand(4, 5), 1, ints(3, high=5)), {}),
        "gather": ((rand(4, 5), 1, ints(4, 2, high=5)), {}),
        "scatter_": ((rand(4, 5), 1, ints(4, 2, high=5), rand(4, 2)), {}),
        "scatter_add_": ((rand(4, 5), 1, ints(4, 2, high=5), rand(4, 2)), {}),
        "scatter_reduce_": ((rand(4, 5), 1, ints(4, 2, high=5), rand(4, 2), "amax"), {}),
        "index_add_": ((rand(4, 5), 0, ember.tensor([0, 2]), rand(2, 5)), {}),
        "index_copy_": ((rand(4, 5), 0, ember.tensor([3, 1]), rand(2, 5)), {}),
        "index_fill_": ((rand(4, 5), 1, ember.tensor([0, 3]), ember.tensor(2.5)), {}),
        "masked_fill_": ((rand(3, 4), rand(3, 4) > 0, ember.tensor(7.0)), {}),
        "masked_scatter_": ((rand(3, 4), rand(3, 4) > 0, rand(12)), {}),
        "convolution": ((conv_x, conv_w, rand(4), [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {}),
        "convolution_backward": ((grad_conv, conv_x, conv_w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                  [True, True, True]), {}),
        "max_pool2d": ((pool_x, [2, 2], [2, 2], [0, 0], [1, 1], False), {}),
        "max_pool2d_with_indices": ((pool_x, [2, 2], [2, 2], [0, 0], [1, 1], False), {}),
        "max_pool2d_with_indices_backward": ((rand(2, 3, 3, 3), pool_x, [2, 2], [2, 2], [0, 0], [1, 1], False,
                                              pool_idx), {}),
        "avg_pool2d": ((pool_x, [2, 2], [2, 2], [0, 0], False, True, None), {}),
        "avg_pool2d_backward": ((rand(2, 3, 3, 3), pool_x, [2, 2], [2, 2], [0, 0], False, True, None), {}),
        "adaptive_max_pool2d": ((pool_x, [3, 3]), {}),
        "adaptive_max_pool2d_backward": ((rand(*amax_out.shape), pool_x, amax_idx), {}),
        "_adaptive_avg_pool2d": ((pool_x, [2, 3]), {}),
        "_adaptive_avg_pool2d_backward": ((rand(2, 3, 2, 3), pool_x), {}),
        "im2col": ((rand(2, 3, 5, 5), [2, 2], [1, 1], [0, 0], [1, 1]), {}),
        "col2im": ((rand(2, 12, 16), [5, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
        "_upsample": ((rand(2, 3, 4, 4), [8, 8], "bilinear", False, [None, None]), {}),
        "_upsample_backward": ((rand(2, 3, 8, 8), [2, 3, 4, 4], "bilinear", False, [None, None]), {}),
        "_pad_enum": ((rand(2, 3, 4, 4), [1, 1, 2, 0], 1, None), {}),
        "_pad_enum_backward": ((rand(2, 3, 6, 6), rand(2, 3, 4, 4), [1, 1, 1, 1], 1), {}),
        "constant_pad_nd": ((rand(3, 4), [1, 2], 0.5), {}),
        "native_layer_norm": ((ln_x, [5], rand(5), rand(5), 1e-5), {}),
        "native_layer_norm_backward": ((rand(2, 5), ln_x, [5], ln_mean, ln_rstd, rand(5), rand(5),
                                        [True, True, True]), {}),
        "_fused_rms_norm": ((rand(2, 5), [5], rand(5), 1e-5), {}),
        "native_batch_norm": ((bn_x, rand(3), rand(3), None, None, True, 0.1, 1e-5), {}),
        "native_batch_norm_backward": ((rand(4, 3, 2), bn_x, rand(3), None, None, bn_mean, bn_invstd, True,
                                        1e-5, [True, True, True]), {}),
        "native_group_norm": ((gn_x, rand(4), rand(4), 2, 4, 3, 2, 1e-5), {}),
        "native_group_norm_backward": ((rand(2, 4, 3), gn_x, gn_mean, gn_rstd, rand(4), 2, 4, 3, 2,
                                        [True, True, True]), {}),
        "embedding": ((rand(6, 3), ints(4, high=6)), {}),
        "embedding_dense_backward": ((rand(4, 3), ints(4, high=6), 6, -1, False), {}),
        "_class_nll": ((ember.log_softmax(rand(4, 5), 1), ints(4, high=5), None, -100, True, False), {}),
        # probabilities at most 0.5: the tests scale samples by up to 1.875 and must stay in [0, 1]
        "binary_cross_entropy": ((ember.sigmoid(rand(3, 4)) * 0.5, ember.rand(3, 4) * 0.5, rand(4), 1), {}),
        "_class_nll_backward": ((rand(4), None, rand(4, 5), ints(4, high=5), None, -100, False), {}),
        "scaled_dot_product_attention": ((rand(2, 3, 4), rand(2, 5, 4), rand(2, 5, 4)), {}),
        "_scaled_dot_product_attention_math_backward": ((rand(2, 3, 4), rand(2, 3, 4), rand(2, 5, 4), rand(2, 5, 4),
                                                         None, False, 0.5), {}),
        "gelu_backward": ((rand(3, 4), rand(3, 4)), {}),
        "_softmax_backward_data": ((rand(3, 4), ember.softmax(rand(3, 4), 1), 1, ember.float32), {}),
        "_log_softmax_backward_data": ((rand(3, 4), ember.log_softmax(rand(3, 4), 0), 0, ember.float32), {}),
        "_scaled_dot_product_flash_attention": ((fa_q, fa_k, fa_v, None, True, 0.5), {}),
        "_scaled_dot_product_flash_attention_backward": ((rand(2, 2, 3, 3), fa_q, fa_k, fa_v, fa_out, fa_lse, None,
                                                          True, 0.5), {}),
        "_fft_c2c": ((ember.ops["complex"](rand(4, 6), rand(4, 6)), [1], 0, True), {}),
        "_fft_r2c": ((rand(4, 6), [1], 0, True), {}),
        "_fft_c2r": ((ember.ops["complex"](rand(4, 4), rand(4, 4)), [1], 0, 6), {}),
        "sort": ((rand(3, 4),), {"dim": 1, "stable": True}),
        "topk": ((rand(3, 4), 2, 1), {}),
        "kthvalue": ((rand(3, 4), 2, 1), {}),
        "median": ((rand(3, 5), 1), {}),
        "nanmedian": ((rand(3, 5), 1), {}),
        "mode": ((ints(3, 6), 1), {}),
        "histc": ((rand(10), 4, -2, 2), {}),
        "searchsorted": ((ember.sort(rand(6)).values, rand(3)), {}),
        "cummax": ((rand(3, 4), 1), {}),
        "cummin": ((rand(3, 4), 1), {}),
        "cumsum": ((rand(3, 4), 1), {}),
        "cumprod": ((rand(3, 4), 1), {}),
        "cumsum_": ((rand(3, 4), 1), {}),
        "cumprod_": ((rand(3, 4), 1), {}),
        "softmax": ((rand(3, 4), 1), {}),
        "log_softmax": ((rand(3, 4), 0), {}),
        "logcumsumexp": ((rand(3, 4), 1), {}),
        "logsumexp": ((rand(3, 4), [1]), {}),
        "max_dim": ((rand(3, 4), 1), {}),
        "min_dim": ((rand(3, 4), 0, True), {}),
        "argmax": ((rand(3, 4),), {}),
        "argmin": ((rand(3, 4), 1), {}),
        "std": ((rand(3, 4), [1]), {}),
        "var_mean": ((rand(3, 4),), {}),
        "polygamma": ((1, pos(3, 4)), {}),
        "div_rounding": ((rand(3, 4), pos(3, 4), "floor"), {}),
        "complex": ((rand(3, 4), rand(3, 4)), {}),
        "polar": ((pos(3, 4), rand(3, 4)), {}),
        "where": ((rand(3, 4) > 0, rand(3, 4), rand(4)), {}),
        "clamp": ((rand(3, 4), rand(4) - 1, rand(3, 4) + 1), {}),
        "lerp": ((rand(3, 4), rand(3, 4), rand(4)), {}),
        "lerp_": ((rand(3, 4), rand(3, 4), 0.3), {}),
        "round_decimals": ((rand(3, 4), 1), {}),
        "copy_": ((rand(3, 4), rand(4)), {}),
        "fill_": ((rand(3, 4), 1.5), {}),
        "_lstm_cell_fused": ((rand(2, 12), rand(2, 12), rand(2, 3)), {}),
        "_gru_cell_fused": ((rand(2, 9), rand(2, 9), rand(2, 3)), {}),
        "frexp.Tensor": ((rand(3, 4),), {}),
        "alias": ((rand(3, 4),), {}),
        "nonzero": None,
        "_unique2": None,
        "bincount": None,
    }


MANUAL = _manual()

# Factories (nothing to batch), random ops (the randomness tests cover them) and the recurrent
# layer kernels (listed fallbacks, whose packed inputs need a whole RNN module to build: the
# fallback loop itself is tested on histc and masked_scatter_).
SKIP = {
    "_gru_cell_fused_backward", "_gru_layer", "_gru_layer_backward", "_lstm_cell_fused_backward", "_lstm_layer",
    "_lstm_layer_backward", "empty", "full", "arange_affine", "poisson", "binomial",
    # sparse layouts: vmap raises for them (test_sparse_autograd.py checks it)
    "coalesce", "_to_dense", "_to_sparse", "sparse_mask", "_sparse_mm", "_sparse_coo_tensor_unsafe",
    "_sparse_compressed_tensor_unsafe",
}


def _integer_only(name: str) -> bool:
    return name.startswith(("bitwise", "gcd", "lcm")) or name in ("floor_divide_int",)


def _schema_sample(op):
    names, kw_only, defaults = signature(op.schema)
    schema = op.schema
    args, kwargs = [], {}
    integer = _integer_only(op.name)
    for name in names:
        i = schema.find(" " + name)
        decl = schema[schema.rfind("(", 0, i) + 1 if "(" in schema[:i] else 0:i]
        decl = decl.split(",")[-1].strip()
        if "Tensor[]" in decl:
            value = [rand(*SHAPE), rand(*SHAPE)]
        elif decl.startswith("Tensor") or decl.startswith("Scalar|Tensor"):
            if "?" in decl and defaults.get(name, 0) is None:
                continue
            value = ints(*SHAPE, low=1, high=7) if integer else rand(*SHAPE)
        elif name in defaults:
            continue
        elif decl.startswith("Scalar") or decl.startswith("float"):
            value = 0.5
        elif decl.startswith("int"):
            value = 1
        elif decl.startswith("bool"):
            value = False
        else:
            return None
        if name in kw_only:
            kwargs[name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


def sample(name: str):
    if name in SKIP or "random" in OPS[name].tags or "composite" in OPS[name].tags:
        return None  # a composite runs its decomposition's ops, which have samples of their own
    if name in MANUAL:
        return MANUAL[name]
    return _schema_sample(OPS[name])
