"""Hand-written entries: ops whose arguments carry constraints a schema cannot state (matrix
shapes, index ranges, kernel sizes), ops without a public name of their own, and the kernels that
only a gradient reaches (backward ops, fused recurrent cells: ``covered_by`` another entry)."""

from __future__ import annotations

from ._calls import aten, both, meth, pub
from ._spec import FLOAT_DTYPES, DType, ErrorInput, OpEntry, Sample, T

F = ("float32", "float64")  # dtypes of the kernels implemented for floats only
FB = ("bfloat16", "float32", "float64")


def _s(*args, desc="", grad=True, inplace=True, **kwargs):
    return Sample(tuple(args), kwargs, desc, grad=grad, inplace=inplace)


def fixed(*samples):
    """A samples function returning the same samples for every dtype."""
    return lambda dtype: list(samples)


X = T((3, 4))
XT = T((3, 4), layout="transposed")
XO = T((2, 3), layout="offset")
IDX4 = T((3,), kind="index", low=0, high=4)


def _matmul_entries():
    e = {}
    for name, shapes in {"mm": [(3, 4), (4, 2)], "bmm": [(2, 3, 4), (2, 4, 2)], "mv": [(3, 4), (4,)],
                         "dot": [(4,), (4,)]}.items():
        a, b = shapes
        e[name] = dict(call=pub(name), out=True, method=name, samples=fixed(
            _s(T(a), T(b, seed=1), desc="contiguous"),
            _s(T(a, layout="transposed"), T(b, layout="offset", seed=1), desc="strided"),
            _s(T((0,) + a[1:]), T(b, seed=1), desc="empty")), dtypes=("int64",) + FB,
            errors=lambda a=a, name=name: [ErrorInput(_s(T(a), T((5,) * len(a), seed=1)), RuntimeError)])
    adds = {"addmm": [(3, 2), (3, 4), (4, 2)], "addmv": [(3,), (3, 4), (4,)], "addbmm": [(3, 2), (2, 3, 4), (2, 4, 2)],
            "baddbmm": [(2, 3, 2), (2, 3, 4), (2, 4, 2)]}
    for name, (c, a, b) in adds.items():
        e[name] = dict(call=pub(name), out=True, method=name, inplace=name + "_", dtypes=("int64",) + FB, samples=fixed(
            _s(T(c), T(a, seed=1), T(b, seed=2), desc="contiguous"),
            _s(T(c), T(a, layout="transposed", seed=1), T(b, seed=2), beta=0.5, alpha=2.0, desc="beta alpha"),
            _s(T(c[-1:]), T(a, seed=1), T(b, seed=2), desc="broadcast self", inplace=False)))
    return e


def _linalg_entries():
    sq, tall = T((3, 3), kind="spd"), T((4, 3))
    rhs = T((3, 2), seed=3)
    specs = {
        "linalg_det": ("linalg.det", [sq, T((2, 3, 3))]),
        "linalg_slogdet": ("linalg.slogdet", [sq]),
        "linalg_inv_ex": ("linalg.inv_ex", [sq]),
        "linalg_cholesky_ex": ("linalg.cholesky_ex", [sq, T((2, 3, 3), kind="spd")]),
        "linalg_qr": ("linalg.qr", [tall]),
        "linalg_eigh": ("linalg.eigh", [sq]),
        "linalg_lu_factor_ex": ("linalg.lu_factor_ex", [sq]),
    }
    square_only = {"linalg_det", "linalg_slogdet", "linalg_inv_ex", "linalg_cholesky_ex", "linalg_eigh"}
    e = {name: dict(call=pub(path), dtypes=F, samples=fixed(*[_s(a, desc=str(a.shape)) for a in args]),
                    errors=(lambda: [ErrorInput(_s(T((3, 4))), RuntimeError)]) if name in square_only else None)
         for name, (path, args) in specs.items()}
    e["linalg_eigh"]["grad"] = False  # eigenvector signs are arbitrary: compared through the Q R Q^T identity elsewhere
    e["linalg_svd"] = dict(call=lambda L: lambda a: L.linalg.svdvals(a), dtypes=F,
                           samples=fixed(_s(tall, desc="svdvals"), _s(T((2, 3, 5)), desc="batched")),
                           reason="compared through svdvals: singular vectors have arbitrary signs")
    e["linalg_solve_ex"] = dict(call=pub("linalg.solve_ex"), dtypes=F, samples=fixed(_s(sq, rhs), _s(sq, T((3,)))))
    e["linalg_lstsq"] = dict(call=lambda L: lambda a, b: L.linalg.lstsq(a, b).solution, dtypes=F,
                             samples=fixed(_s(tall, T((4, 2), seed=4))))
    return e


def _view_entries():
    x234 = T((2, 3, 4))
    return {
        "view": dict(call=meth("view"), samples=fixed(_s(X, [2, 6]), _s(X, [-1]), _s(T((0, 4)), [0, 2, 2])),
                     errors=lambda: [ErrorInput(_s(XT, [12]), RuntimeError), ErrorInput(_s(X, [5, 5]), RuntimeError)]),
        "view_dtype": dict(call=meth("view"), samples=fixed(_s(X, DType("int16"), grad=False), _s(X, DType("uint8"),
                                                                                                   grad=False))),
        "expand": dict(call=meth("expand"), samples=fixed(_s(T((3, 1)), [2, 3, 4]), _s(T((3, 1)), -1, 5)),
                       errors=lambda: [ErrorInput(_s(X, [3, 5]), RuntimeError)]),
        "permute": dict(call=meth("permute"), samples=fixed(_s(x234, [2, 0, 1]), _s(T((2, 3, 4), layout="sliced"),
                                                                                     (1, 0, 2))),
                        errors=lambda: [ErrorInput(_s(x234, [0, 0, 1]), RuntimeError)]),
        "transpose": dict(call=meth("transpose"), samples=fixed(_s(x234, 0, -1), _s(XO, 0, 1)),
                          errors=lambda: [ErrorInput(_s(X, 0, 5), IndexError)]),
        "squeeze": dict(call=meth("squeeze"), samples=fixed(_s(T((3, 1, 4)), [1]), _s(T((3, 1, 4))), _s(T(()), 0))),
        "unsqueeze": dict(call=meth("unsqueeze"), samples=fixed(_s(X, -1), _s(T(()), 0)),
                          errors=lambda: [ErrorInput(_s(X, 4), IndexError)]),
        "narrow": dict(call=meth("narrow"), samples=fixed(_s(X, 1, 1, 2), _s(XT, 0, 0, 0)),
                       errors=lambda: [ErrorInput(_s(X, 1, 3, 4), RuntimeError)]),
        "select": dict(call=meth("select"), samples=fixed(_s(X, 1, 2), _s(X, 0, -1)),
                       errors=lambda: [ErrorInput(_s(X, 0, 3), IndexError)]),
        "slice": dict(call=lambda L: lambda x, d, a, b, s: x[(slice(None),) * d + (slice(a, b, s),)],
                      samples=fixed(_s(X, 1, 0, 4, 2), _s(XT, 0, 1, 100, 1), _s(X, 1, 3, 1, 1))),
        "diagonal": dict(call=meth("diagonal"), samples=fixed(_s(T((3, 4, 2)), 0, 0, 1), _s(X, 1), _s(X, -2))),
        "unfold": dict(call=meth("unfold"), samples=fixed(_s(T((3, 6)), 1, 2, 2), _s(T((5,)), 0, 5, 1))),
        "as_strided": dict(call=meth("as_strided"), samples=fixed(_s(X, [2, 2], [4, 1], 1), _s(X, [3], [0]))),
        "view_as_complex": dict(call=pub("view_as_complex"), dtypes=F, samples=fixed(_s(T((3, 2))))),
        "view_as_real": dict(call=lambda L: lambda a: L.view_as_real(L.complex(a, a * 2)), dtypes=F,
                             samples=fixed(_s(X))),
        "flip": dict(call=pub("flip"), samples=fixed(_s(X, [0, 1]), _s(XO, [1]), _s(T(()), []))),
        "alias": dict(call=aten("alias"), samples=fixed(_s(X))),
        "clone": dict(call=pub("clone"), samples=fixed(_s(X), _s(XT), _s(XO))),
        "_to_copy": dict(call=meth("to"), samples=fixed(_s(X, DType("float64")), _s(XT, DType("int32"), grad=False),
                                                        _s(XO, DType("bfloat16"), grad=False))),
    }


def _index_entries():
    i45 = T((3,), kind="index", low=0, high=5)
    g = T((4, 2), kind="index", low=0, high=5)
    return {
        "index": dict(call=lambda L: lambda x, i: x[i, :], samples=fixed(
            _s(T((4, 5)), T((3,), kind="index", low=-4, high=4)), _s(T((4, 5), layout="transposed"), IDX4)),
            errors=lambda: [ErrorInput(_s(T((4, 5)), T((2,), kind="index", low=4, high=5)), IndexError)]),
        "index_put_": dict(call=lambda L: lambda x, i, v, acc: x.index_put_((i,), v, acc), samples=fixed(
            _s(T((4, 5)), IDX4, T((3, 5)), True), _s(T((4, 5)), IDX4, T((5,)), False))),
        "index_select": dict(call=pub("index_select"), out=True, samples=fixed(
            _s(T((4, 5)), 1, i45), _s(T((4, 5), layout="offset"), 0, IDX4), _s(T((4, 5)), 1, T((0,), kind="index"))),
            errors=lambda: [ErrorInput(_s(T((4, 5)), 0, T((2,), kind="index", low=4, high=5)), IndexError)]),
        "gather": dict(call=pub("gather"), out=True, samples=fixed(
            _s(T((4, 5)), 1, g), _s(XT, 0, T((2, 4), kind="index", low=0, high=3)))),
        "scatter_": dict(call=meth("scatter_"), samples=fixed(_s(T((4, 5)), 1, g, T((4, 2)), grad=False))),
        "scatter_add_": dict(call=meth("scatter_add_"), samples=fixed(_s(T((4, 5)), 1, g, T((4, 2))))),
        "scatter_reduce_": dict(call=meth("scatter_reduce_"), samples=fixed(
            _s(T((4, 5)), 1, g, T((4, 2)), "amax", grad=False), _s(T((4, 5)), 1, g, T((4, 2)), "sum"),
            _s(T((4, 5)), 1, g, T((4, 2)), "mean", include_self=False, grad=False))),
        "index_add_": dict(call=meth("index_add_"), samples=fixed(_s(T((4, 5)), 0, IDX4, T((3, 5))),
                                                                  _s(T((4, 5)), 0, IDX4, T((3, 5)), alpha=2))),
        "index_copy_": dict(call=meth("index_copy_"), samples=fixed(
            _s(T((4, 5)), 0, T((2,), kind="index", low=0, high=1), T((2, 5)), grad=False))),
        "index_fill_": dict(call=meth("index_fill_"), samples=fixed(_s(T((4, 5)), 1, IDX4, 2.5))),
        "masked_fill_": dict(call=meth("masked_fill_"), samples=fixed(_s(X, T((3, 4), kind="mask"), 7.0),
                                                                      _s(X, T((4,), kind="mask"), -1))),
        "masked_scatter_": dict(call=meth("masked_scatter_"), samples=fixed(
            _s(X, T((3, 4), kind="mask"), T((12,))))),
        "cat": dict(call=pub("cat"), out=True, samples=fixed(_s([T((2, 3)), T((1, 3), layout="offset")], 0),
                                                             _s([T((2, 3)), T((0,))], 0), _s([X, XT], -1)),
                    errors=lambda: [ErrorInput(_s([T((2, 3)), T((2, 4))], 0), RuntimeError)]),
        "take": dict(call=pub("take"), samples=fixed(_s(X, T((5,), kind="index", low=-12, high=12)))),
    }


def _sort_entries():
    return {
        "sort": dict(call=pub("sort"), samples=fixed(_s(X, dim=1, stable=True), _s(XT, dim=0, descending=True,
                                                                                     stable=True), _s(XO))),
        "topk": dict(call=pub("topk"), samples=fixed(_s(X, 2, 1), _s(XT, 1, 0, False))),
        "kthvalue": dict(call=pub("kthvalue"), samples=fixed(_s(X, 2, 1), _s(XO, 1, 0, True))),
        "median": dict(call=pub("median"), samples=fixed(_s(T((3, 5)), 1), _s(T((3, 5))))),
        "nanmedian": dict(call=pub("nanmedian"), samples=fixed(_s(T((3, 5)), 1), _s(T((3, 5))))),
        "mode": dict(call=pub("mode"), dtypes=("int64", "int32"), samples=fixed(_s(T((3, 6), low=0, high=3), 1))),
        "histc": dict(call=pub("histc"), dtypes=F, samples=fixed(_s(T((10,)), 4, -2, 2), _s(X, 3))),
        "searchsorted": dict(call=pub("searchsorted"), dtypes=("int64",) + F, samples=fixed(
            _s(T((6,), kind="sorted"), T((3,), seed=1)), _s(T((2, 6), kind="sorted"), T((2, 3), seed=1), right=True))),
        "bincount": dict(call=pub("bincount"), dtypes=("int64",), samples=fixed(
            _s(T((8,), kind="index", low=0, high=5)), _s(T((8,), kind="index", low=0, high=5), minlength=7))),
        "nonzero": dict(call=pub("nonzero"), samples=fixed(_s(X), _s(T((0, 3))), _s(T(())))),
        "_unique2": dict(call=lambda L: lambda x, **k: L.unique(x, **k), dtypes=("int64", "float32"),
                         samples=fixed(_s(T((10,), low=0, high=3)),
                                       _s(T((10,), low=0, high=3), return_inverse=True, return_counts=True))),
        "cummax": dict(call=pub("cummax"), samples=fixed(_s(X, 1), _s(XT, 0))),
        "cummin": dict(call=pub("cummin"), samples=fixed(_s(X, 1), _s(XO, 0))),
        "max_dim": dict(call=pub("max"), samples=fixed(_s(X, 1), _s(XT, 0, True), _s(T(()), 0)),
                        errors=lambda: [ErrorInput(_s(T((0, 3)), 0), IndexError)]),
        "min_dim": dict(call=pub("min"), samples=fixed(_s(X, 1), _s(XO, 0, True))),
        "max_all": dict(call=pub("max"), samples=fixed(_s(X), _s(XT), _s(T(())))),
        "min_all": dict(call=pub("min"), samples=fixed(_s(X), _s(XO))),
        "frexp.Tensor": dict(call=pub("frexp"), dtypes=F, samples=fixed(_s(X), _s(XT)), grad=False),
        "complex": dict(call=pub("complex"), dtypes=F, samples=fixed(_s(X, T((3, 4), seed=1)), _s(X, T((4,), seed=1)))),
        "polar": dict(call=pub("polar"), dtypes=F, samples=fixed(_s(T((3, 4), kind="positive"), X))),
        "div_rounding": dict(call=pub("div"), samples=lambda d: [
            _s(X, T((3, 4), kind="nonzero", seed=1), rounding_mode="floor"),
            _s(X, T((4,), kind="nonzero", seed=1), rounding_mode="trunc")]),
        "round_decimals": dict(call=lambda L: lambda x, decimals: L.round(x, decimals=decimals), dtypes=F,
                               samples=fixed(_s(X, 1), _s(X, -1))),
        "add_scaled": dict(call=pub("add"), samples=fixed(_s(X, T((3, 4), seed=1), alpha=2))),
        "add_scaled_": dict(call=meth("add_"), samples=fixed(_s(X, T((3, 4), seed=1), alpha=2))),
        "arange_affine": dict(call=pub("arange"), samples=fixed(_s(0, 5, 0.5, grad=False), _s(5, grad=False),
                                                                _s(-3, 3, 2, grad=False))),
        "logcumsumexp": dict(call=pub("logcumsumexp"), dtypes=F, samples=fixed(_s(X, 1), _s(XT, 0))),
        "special_i1": dict(call=pub("special.i1"), dtypes=F, samples=fixed(_s(X), _s(XT))),
        "polygamma": dict(call=pub("polygamma"), dtypes=F, samples=fixed(_s(1, T((3, 4), kind="positive")),
                                                                         _s(2, T((3, 4), kind="positive")))),
        "where": dict(call=pub("where"), samples=fixed(_s(T((3, 4), kind="mask"), X, T((4,), seed=1)),
                                                       _s(T((3, 1), kind="mask"), XT, T((3, 4), seed=1)))),
        "lerp": dict(call=pub("lerp"), dtypes=FB, samples=fixed(_s(X, T((3, 4), seed=1), T((4,), seed=2)),
                                                                _s(X, T((3, 4), seed=1), 0.3))),
        "lerp_": dict(call=meth("lerp_"), dtypes=FB, samples=fixed(_s(X, T((3, 4), seed=1), 0.3))),
        "copy_": dict(call=meth("copy_"), samples=fixed(_s(X, T((4,), seed=1)), _s(XT, T((3, 4), seed=1)))),
        "fill_": dict(call=meth("fill_"), samples=fixed(_s(X, 1.5, grad=False), _s(XO, 2, grad=False))),
        "count_nonzero": dict(call=pub("count_nonzero"), samples=fixed(_s(X), _s(XT, 1), _s(X, dim=(0, 1)))),
    }


def _factory_entries():
    return {
        "empty": dict(call=lambda L: lambda *s, **k: L.empty(*s, **k).fill_(1), samples=fixed(
            _s([2, 3], grad=False), _s([0], dtype=DType("int32"), grad=False)),
            errors=lambda: [ErrorInput(_s([-1, 2], grad=False), RuntimeError)]),
        "full": dict(call=pub("full"), samples=fixed(_s([2, 3], 1.5, grad=False), _s([2], 7, grad=False),
                                                     _s([2], True, grad=False))),
    }


def _random_entries():
    # Random ops: only shapes and dtypes are compared (ember's generator is not PyTorch's).
    r = {}
    for name in ("uniform_", "normal_", "log_normal_", "cauchy_", "exponential_", "geometric_", "random_"):
        arg = (0.5,) if name == "geometric_" else ()
        r[name] = dict(call=meth(name), random=True, dtypes=F, samples=fixed(_s(X, *arg, grad=False)))
    r["bernoulli_.float"] = dict(call=meth("bernoulli_"), random=True, dtypes=F, samples=fixed(_s(X, 0.3, grad=False)))
    r["bernoulli_.Tensor"] = dict(call=meth("bernoulli_"), random=True, dtypes=F, samples=fixed(
        _s(X, T((3, 4), low=0, high=1), grad=False)))
    r["normal.Tensor_Tensor"] = dict(call=pub("normal"), random=True, dtypes=F, samples=fixed(
        _s(X, T((3, 4), kind="positive"), grad=False)))
    r["multinomial"] = dict(call=pub("multinomial"), random=True, dtypes=F, samples=fixed(
        _s(T((2, 5), kind="positive"), 3, grad=False), _s(T((5,), kind="positive"), 8, True, grad=False)))
    r["poisson"] = dict(call=pub("poisson"), random=True, dtypes=F, samples=fixed(_s(T((3, 4), kind="positive"),
                                                                                  grad=False)))
    r["binomial"] = dict(call=pub("binomial"), random=True, dtypes=F, samples=fixed(
        _s(T((3, 4), low=1, high=9), T((3, 4), low=0, high=1), grad=False)))
    r["_standard_gamma"] = dict(call=pub("_standard_gamma"), random=True, dtypes=F,
                                samples=fixed(_s(T((3, 4), kind="positive"), grad=False)))
    r["randperm"] = dict(call=pub("randperm"), random=True, samples=fixed(_s(5, grad=False), _s(0, grad=False)))
    return r


def _nn_kernel_entries():
    img = T((2, 3, 6, 6))
    w = T((4, 3, 3, 3), seed=1)
    c = aten
    return {
        "convolution": dict(call=c("convolution"), dtypes=F, samples=fixed(
            _s(img, w, T((4,), seed=2), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            _s(T((2, 4, 5, 5), layout="transposed"), T((4, 2, 3, 3)), None, [2, 1], [0, 1], [1, 2], False, [0, 0],
               2))),
        "im2col": dict(call=c("im2col"), dtypes=F, samples=fixed(_s(T((2, 3, 5, 5)), [2, 2], [1, 1], [0, 0], [1, 1]))),
        "col2im": dict(call=c("col2im"), dtypes=F, samples=fixed(_s(T((2, 12, 16)), [5, 5], [2, 2], [1, 1], [0, 0],
                                                                     [1, 1]))),
        "max_pool2d_with_indices": dict(call=c("max_pool2d_with_indices"), dtypes=F, samples=fixed(
            _s(img, [2, 2], [2, 2], [0, 0], [1, 1], False), _s(img, [3, 3], [2, 2], [1, 1], [1, 1], True))),
        "max_pool2d": dict(call=c("max_pool2d"), dtypes=F, samples=fixed(_s(img, [2, 2], [2, 2], [0, 0], [1, 1],
                                                                            False))),
        "avg_pool2d": dict(call=c("avg_pool2d"), dtypes=F, samples=fixed(
            _s(img, [2, 2], [2, 2], [0, 0], False, True, None), _s(img, [3, 3], [2, 2], [1, 1], True, False, None))),
        "_adaptive_avg_pool2d": dict(call=c("_adaptive_avg_pool2d"), dtypes=F, samples=fixed(_s(img, [2, 3]),
                                                                                           _s(img, [4, 4]))),
        "adaptive_max_pool2d": dict(call=c("adaptive_max_pool2d"), dtypes=F, samples=fixed(_s(img, [3, 3]))),
        "constant_pad_nd": dict(call=pub("constant_pad_nd"), samples=fixed(_s(X, [1, 2], 0.5), _s(X, [-1, 1, 0, 2]))),
        # ember numbers the modes 1 reflect, 2 replicate, 3 circular (ATen: 0, 1, 2): compared with F.pad.
        "_pad_enum": dict(call=both(lambda e: lambda x, pad, m: e.ops["_pad_enum"](x, pad, m, None),
                                    lambda t: lambda x, pad, m: t.nn.functional.pad(
                                        x, pad, mode={1: "reflect", 2: "replicate", 3: "circular"}[m])),
                          dtypes=F, samples=fixed(_s(T((2, 3, 4, 4)), [1, 1, 2, 0], 1), _s(T((2, 3, 4)), [2, 1], 2),
                                                  _s(T((1, 2, 5)), [2, 3], 3))),
        "native_layer_norm": dict(call=c("native_layer_norm"), dtypes=F, samples=fixed(
            _s(T((2, 5)), [5], T((5,), seed=1), T((5,), seed=2), 1e-5), _s(T((2, 3, 4)), [3, 4], None, None, 1e-5))),
        "_fused_rms_norm": dict(call=c("_fused_rms_norm"), dtypes=F, samples=fixed(
            _s(T((2, 5)), [5], T((5,), seed=1), 1e-5))),
        "native_batch_norm": dict(call=c("native_batch_norm"), dtypes=F, samples=fixed(
            _s(T((4, 3, 2)), T((3,), seed=1), T((3,), seed=2), None, None, True, 0.1, 1e-5))),
        "native_group_norm": dict(call=c("native_group_norm"), dtypes=F, samples=fixed(
            _s(T((2, 4, 3)), T((4,), seed=1), T((4,), seed=2), 2, 4, 3, 2, 1e-5))),
        "embedding": dict(call=c("embedding"), dtypes=F, samples=fixed(_s(T((6, 3)), T((4,), kind="index", low=0,
                                                                                          high=6)))),
        "scaled_dot_product_attention": dict(call=both(lambda e: e.ops["scaled_dot_product_attention"],
                                                  lambda t: t.nn.functional.scaled_dot_product_attention),
                                             dtypes=F, samples=fixed(_s(T((2, 3, 4)), T((2, 5, 4), seed=1),
                                                                       T((2, 5, 4), seed=2)))),
        "_fft_c2c": dict(call=lambda L: lambda x, dim: L.fft.fftn(L.complex(x, x * 0.5), dim=dim), dtypes=F,
                         samples=fixed(_s(T((4, 6)), [1]))),
        "_fft_r2c": dict(call=lambda L: lambda x, dim: L.fft.rfftn(x, dim=dim), dtypes=F,
                         samples=fixed(_s(T((4, 6)), [1]), _s(XT, [0, 1]))),
        "_fft_c2r": dict(call=lambda L: lambda x, n: L.fft.irfft(L.complex(x, x * 0.5), n), dtypes=F,
                         samples=fixed(_s(T((4, 4)), 6))),
        "gelu_backward": dict(call=c("gelu_backward"), dtypes=F, samples=fixed(
            _s(T((3, 5)), T((3, 5), seed=1), grad=False, inplace=False),
            _s(T((4, 7)), T((4, 7), seed=1), approximate="tanh", grad=False, inplace=False))),
        "_softmax_backward_data": dict(call=c("_softmax_backward_data"), dtypes=F, samples=lambda dt: [
            _s(T((3, 5)), T((3, 5), seed=1), 1, DType(dt), grad=False, inplace=False),
            _s(T((4, 3, 6)), T((4, 3, 6), seed=1), 0, DType(dt), grad=False, inplace=False)]),
        "_log_softmax_backward_data": dict(call=c("_log_softmax_backward_data"), dtypes=F, samples=lambda dt: [
            _s(T((3, 5)), T((3, 5), seed=1), -1, DType(dt), grad=False, inplace=False),
            _s(T((4, 3, 6)), T((4, 3, 6), seed=1), 1, DType(dt), grad=False, inplace=False)]),
        "_class_nll": dict(requires=("ember.nn",), dtypes=F,
                           call=lambda L: lambda x, t: L.nn.functional.nll_loss(L.log_softmax(x, 1), t),
                           samples=fixed(_s(T((4, 5)), T((4,), kind="index", low=0, high=5)),
                                         _s(T((2, 5, 3, 2)), T((2, 3, 2), kind="index", low=0, high=5)))),
        "binary_cross_entropy": dict(
            requires=("ember.nn",), dtypes=F,
            call=lambda L: lambda x, t, w, reduction: L.nn.functional.binary_cross_entropy(
                x, t, w, reduction=reduction),
            samples=fixed(_s(T((3, 4), low=0.05, high=0.95), T((3, 4), seed=1, low=0, high=1), None, "mean"),
                          _s(T((2, 5), low=0.05, high=0.95), T((2, 5), seed=1, low=0, high=1),
                             T((5,), kind="positive", seed=2, grad=False), "none"),
                          _s(T((4,), low=0.05, high=0.95), T((4,), seed=1, low=0, high=1), None, "sum"))),
        "_upsample": dict(requires=("ember.nn",),
                          call=lambda L: lambda x, size, mode: L.nn.functional.interpolate(x, size=size, mode=mode),
                          dtypes=F, samples=fixed(_s(T((2, 3, 4, 4)), [8, 8], "bilinear"),
                                                  _s(T((2, 3, 4, 4)), [6, 7], "nearest"))),
    }


# Kernels only a gradient reaches: run by the gradient tests of the named entry (autograd suite).
COVERED = {
    "convolution_backward": "convolution",
    "max_pool2d_with_indices_backward": "max_pool2d_with_indices",
    "avg_pool2d_backward": "avg_pool2d",
    "_adaptive_avg_pool2d_backward": "_adaptive_avg_pool2d",
    "adaptive_max_pool2d_backward": "adaptive_max_pool2d",
    "native_layer_norm_backward": "native_layer_norm",
    "native_batch_norm_backward": "native_batch_norm",
    "native_group_norm_backward": "native_group_norm",
    "embedding_dense_backward": "embedding",
    "_pad_enum_backward": "_pad_enum",
    "_upsample_backward": "_upsample",
    "_lstm_cell_fused": "nn.LSTMCell (ember-nn's test_opdb_nn: LSTMCell vs torch)",
    "_lstm_cell_fused_backward": "nn.LSTMCell (ember-nn's test_opdb_nn: LSTMCell gradients vs torch)",
    "_gru_cell_fused": "nn.GRUCell (ember-nn's test_opdb_nn: GRUCell vs torch)",
    "_gru_cell_fused_backward": "nn.GRUCell (ember-nn's test_opdb_nn: GRUCell gradients vs torch)",
    "_lstm_layer": "nn.LSTM (ember-nn's test_opdb_nn: LSTM vs torch)",
    "_lstm_layer_backward": "nn.LSTM (ember-nn's test_opdb_nn: LSTM gradients vs torch)",
    "_gru_layer": "nn.GRU (ember-nn's test_opdb_nn: GRU vs torch)",
    "_gru_layer_backward": "nn.GRU (ember-nn's test_opdb_nn: GRU gradients vs torch)",
    "_class_nll_backward": "cross_entropy / nll_loss",
    "_scaled_dot_product_attention_math_backward": "scaled_dot_product_attention",
}
# Ops whose inputs the dense sample specs cannot describe (sparse layouts, the flash-attention pair's
# CUDA-only route): the suite that compares each with torch.
COVERED_ELSEWHERE = {
    "_sparse_compressed_tensor_unsafe": "sparse_compressed_tensor (test_sparse_layouts.py)",
    "_sparse_coo_tensor_unsafe": "sparse_coo_tensor (test_sparse_layouts.py)",
    "_sparse_mm": "sparse.mm (test_sparse_kernels.py)",
    "_to_sparse": "Tensor.to_sparse (test_sparse_layouts.py)",
    "_scaled_dot_product_flash_attention": "scaled_dot_product_attention (test_autograd_flash_attention_pair.py)",
    "_scaled_dot_product_flash_attention_backward":
        "scaled_dot_product_attention's gradient (test_autograd_flash_attention_pair.py)",
}


def manual_entries() -> dict:
    specs = {}
    for part in (_matmul_entries, _linalg_entries, _view_entries, _index_entries, _sort_entries, _factory_entries,
                 _random_entries, _nn_kernel_entries):
        specs.update(part())
    out = {name: OpEntry(name=name, **kw) for name, kw in specs.items()}
    for name, target in COVERED.items():
        out[name] = OpEntry(name=name, covered_by=target, reason=f"reached only through the gradient of {target}")
    for name, where in COVERED_ELSEWHERE.items():
        out[name] = OpEntry(name=name, covered_by=where, reason="its inputs are no dense sample: tested elsewhere")
    return out


__all__ = ["COVERED", "COVERED_ELSEWHERE", "FLOAT_DTYPES", "manual_entries"]
