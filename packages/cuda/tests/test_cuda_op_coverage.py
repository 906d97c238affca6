"""Ops that had no CUDA path or failed on CUDA (issue 16, session 18): 1-d, grouped and transposed
convolutions, the unary ops' scalar parameters by default and by keyword, linspace/logspace and the window
functions on the device, the cross-entropy backward of huge scores; session 19: depthwise convolution kernels,
binomial, the math attention backward (the recurrent layer ops: test_cuda_rnn.py). Checked without a GPU where possible
(the convolution's kernels in Triton's interpreter, the rest on the fake host of benchmarks/host_cuda_fake.py),
and on the GPU (marked ``gpu``) against the CPU kernels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import assert_same, needs_gpu, rand, run_interpreter_check

import ember

F = pytest.importorskip("ember.nn.functional")


def test_convolutions_in_the_interpreter():
    """1-d, 2-d and 3-d, plain and transposed, grouped, strided, padded, dilated convolutions and their three
    gradients through _ops_conv's composition, im2col/col2im in Triton's interpreter; depthwise ones (channel
    multipliers 1-3, 1-d too, float64) through _ops_depthwise's kernels, one launch per output and gradient."""
    run_interpreter_check("coverage_interp_check.py", 25)


_FAKE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
import ember.nn.functional as F
from ember._src.dispatch import OPS

out = {}
x = ember.ones(3, 4, device="cuda")
calls = {"elu": lambda: ember.ops.elu(x), "elu kw": lambda: ember.ops.elu(x, alpha=2.0, input_scale=0.5),
         "elu_": lambda: ember.ops.elu_(x.clone(), scale=2.0), "hardtanh": lambda: ember.ops.hardtanh(x),
         "leaky_relu": lambda: ember.ops.leaky_relu(x), "softplus": lambda: ember.ops.softplus(x, threshold=5.0),
         "celu": lambda: ember.ops.celu(x), "threshold_": lambda: ember.ops.threshold_(x.clone()),
         "nan_to_num": lambda: ember.ops.nan_to_num(x, posinf=1.0)}
for name, call in calls.items():
    r = call()
    out[name] = [r.device.type, list(r.shape), str(r.dtype)]
for name, call in {"bad kw": lambda: ember.ops.elu(x, beta=1.0), "twice": lambda: ember.ops.elu(x, 1.0, alpha=1.0),
                   "too many": lambda: ember.ops.leaky_relu(x, 0.1, 0.2)}.items():
    try:
        call()
        out[name] = "no error"
    except TypeError:
        out[name] = "TypeError"
made = {"linspace": ember.linspace(0, 1, 5, device="cuda"), "linspace 1": ember.linspace(2, 3, 1, device="cuda"),
        "linspace 0": ember.linspace(0, 1, 0, device="cuda"),
        "linspace i64": ember.linspace(0, 10, 4, dtype=ember.int64, device="cuda"),
        "linspace f64": ember.linspace(-1, 1, 7, dtype=ember.float64, device="cuda", requires_grad=True),
        "logspace": ember.logspace(0, 2, 3, device="cuda"),
        "hann": ember.hann_window(8, device="cuda"), "hamming": ember.hamming_window(5, False, device="cuda"),
        "blackman": ember.blackman_window(1, device="cuda"), "bartlett": ember.bartlett_window(0, device="cuda"),
        "kaiser": ember.kaiser_window(6, dtype=ember.float64, device="cuda", requires_grad=True)}
for name, t in made.items():
    out[name] = [t.device.type, list(t.shape), str(t.dtype), t.requires_grad, t.is_leaf, t._version]
w = ember.ones(4, 2, 3, device="cuda")
for name, call in {"conv1d": lambda: F.conv1d(ember.ones(2, 4, 9, device="cuda"), w.repeat(1, 2, 1)),
                   "conv1d groups": lambda: F.conv1d(ember.ones(2, 4, 9, device="cuda"), w, groups=2, padding=1),
                   "conv_transpose1d": lambda: F.conv_transpose1d(ember.ones(2, 4, 5, device="cuda"), w, stride=2),
                   "conv2d depthwise": lambda: F.conv2d(ember.ones(1, 6, 5, 5, device="cuda"),
                                                        ember.ones(6, 1, 3, 3, device="cuda"), groups=6),
                   "conv_transpose2d": lambda: F.conv_transpose2d(ember.ones(1, 4, 3, 3, device="cuda"),
                                                                  ember.ones(4, 2, 3, 3, device="cuda"),
                                                                  ember.ones(2, device="cuda"), stride=2,
                                                                  output_padding=1),
                   "conv3d": lambda: F.conv3d(ember.ones(1, 2, 4, 5, 6, device="cuda"),
                                              ember.ones(3, 2, 3, 3, 2, device="cuda"), ember.ones(3, device="cuda"),
                                              padding=1),
                   "conv_transpose3d": lambda: F.conv_transpose3d(ember.ones(1, 2, 3, 3, 3, device="cuda"),
                                                                  ember.ones(2, 4, 2, 2, 2, device="cuda"),
                                                                  stride=2)}.items():
    r = call()
    out[name] = [r.device.type, list(r.shape), str(r.dtype), r._version]
# the depthwise kernels build for sm_90 in every floating dtype (forward, input and weight gradients)
for dtype in (ember.float32, ember.float16, ember.bfloat16, ember.float64):
    xd = ember.ones(2, 4, 9, 9, dtype=dtype, device="cuda", requires_grad=True)
    wd = ember.ones(8, 1, 3, 3, dtype=dtype, device="cuda", requires_grad=True)
    yd = F.conv2d(xd, wd, ember.ones(8, dtype=dtype, device="cuda"), stride=2, padding=1, groups=4)
    yd.sum().backward()
    out["depthwise " + str(dtype)] = [list(yd.shape), str(xd.grad.dtype), list(wd.grad.shape)]
i = ember.tensor([1, 2, 3], dtype=ember.int32).cuda()
out["int pow"] = [str(r.dtype) for r in (i ** i, i ** 2, 2 ** i, i.clone().pow_(3), i.square(),
                                         ember.tensor([True]).cuda().square())]
x5, m3 = ember.ones(5, device="cuda"), ember.eye(3, device="cuda")
for name, call in {"isin scalar": lambda: ember.isin(x5, 2.0), "isin scalar first": lambda: ember.isin(2.0, x5),
                   "isin empty": lambda: ember.isin(x5, ember.ones(0, device="cuda")),
                   "vander": lambda: ember.vander(x5),
                   "pdist": lambda: F.pdist(ember.ones(1, 3, device="cuda")),  # (nonzero: fake sizes 0)
                   "chebyshev_t": lambda: ember.special.chebyshev_polynomial_t(x5, 3),
                   "hermite_h": lambda: ember.special.hermite_polynomial_h(2.0, x5),
                   "ormqr": lambda: ember.ormqr(m3, ember.ones(3, device="cuda"), m3),
                   "lu_unpack data": lambda: ember.lu_unpack(m3, ember.ones(3, dtype=ember.int32, device="cuda"),
                                                             unpack_pivots=False)[1]}.items():
    r = call()
    out[name] = [r.device.type, list(r.shape)]
outs = []
for call in (lambda o: ember.arange(4, out=o), lambda o: ember.zeros(4, out=o), lambda o: ember.ones(4, out=o),
             lambda o: ember.full((4,), 2.0, out=o), lambda o: ember.linspace(0, 1, 4, out=o),
             lambda o: ember.logspace(0, 1, 4, out=o), lambda o: ember.empty(4, out=o)):
    o = ember.empty(4, device="cuda")
    outs.append(call(o) is o)
o = ember.empty(3, 3, device="cuda")
outs.append(ember.eye(3, out=o) is o)
out["factories out="] = outs
bools = ember.tensor([True, False]).cuda()
pr = ember.poisson(ember.full((2, 3), 4.0, device="cuda"))
out["poisson"] = [pr.device.type, list(pr.shape), str(pr.dtype), pr._version]
bn = ember.binomial(ember.full((2, 1), 4.0, device="cuda"), ember.full((3,), 0.0, device="cuda"))
out["binomial"] = [bn.device.type, list(bn.shape), str(bn.dtype), bn._version]
sg = ember._standard_gamma(ember.full((2, 3), 0.5, dtype=ember.float64, device="cuda"))
out["_standard_gamma"] = [sg.device.type, list(sg.shape), str(sg.dtype)]
# float64 attention takes the math path on CUDA; its backward the op (it had no CUDA kernel: the composite ran)
backward_op = OPS["_scaled_dot_product_attention_math_backward"]
calls = []
kernel = backward_op.kernels["cuda"]
backward_op.kernels["cuda"] = lambda *a: calls.append(1) or kernel(*a)
qd = ember.ones(2, 4, 5, 8, dtype=ember.float64, device="cuda", requires_grad=True)
F.scaled_dot_product_attention(qd, qd, qd, is_causal=True).sum().backward()
out["sdpa f64 backward"] = [len(calls), list(qd.grad.shape), str(qd.grad.dtype)]
out["fmax bool"] = [str(ember.fmax(bools, bools).dtype), str(ember.fmin(bools, bools).dtype)]
for name, call in {"histogram": lambda: ember.histogram(x5, 3),
                   "histogramdd": lambda: ember.histogramdd(ember.ones(4, 2, device="cuda"), [2, 2])}.items():
    try:
        call()
        out[name] = "no error"
    except NotImplementedError as e:
        out[name] = str(e)
out["no cuda kernel"] = sorted(n for n, op in OPS.items() if "cpu" in op.kernels and "cuda" not in op.kernels)
print(json.dumps(out))
"""


def test_fake_host_ops_that_had_no_cuda_path():
    """On the fake CUDA host (no GPU: results' devices, shapes, dtypes, versions, errors): the unary ops' scalar
    parameters from the schema's defaults and by keyword (they raised IndexError / TypeError), linspace/logspace
    (a pybind cast error) and the window functions (their result stayed on the CPU) on the device,
    1-d/3-d/grouped/transposed convolutions and integer powers (NotImplementedError); and the op-table ops still
    without a CUDA kernel."""
    pytest.importorskip("triton")
    if ember.cuda.is_available():
        pytest.skip("the fake host replaces the driver of a process without a GPU")
    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    done = subprocess.run([sys.executable, "-c", _FAKE, str(benchmarks)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("elu", "elu kw", "elu_", "hardtanh", "leaky_relu", "softplus", "celu", "threshold_", "nan_to_num"):
        assert got[name] == ["cuda", [3, 4], "ember.float32"], name
    assert got["bad kw"] == got["twice"] == got["too many"] == "TypeError"
    f32, f64 = "ember.float32", "ember.float64"
    assert got["linspace"] == ["cuda", [5], f32, False, True, 0]
    assert got["linspace 1"] == ["cuda", [1], f32, False, True, 0]
    assert got["linspace 0"] == ["cuda", [0], f32, False, True, 0]
    assert got["linspace i64"] == ["cuda", [4], "ember.int64", False, True, 0]
    assert got["linspace f64"] == ["cuda", [7], f64, True, True, 0]
    assert got["logspace"] == ["cuda", [3], f32, False, True, 0]
    assert got["hann"] == ["cuda", [8], f32, False, True, 0]
    assert got["hamming"] == ["cuda", [5], f32, False, True, 0]
    assert got["blackman"] == ["cuda", [1], f32, False, True, 0]
    assert got["bartlett"] == ["cuda", [0], f32, False, True, 0]
    assert got["kaiser"] == ["cuda", [6], f64, True, True, 0]
    assert got["conv1d"] == ["cuda", [2, 4, 7], f32, 0]
    assert got["conv1d groups"] == ["cuda", [2, 4, 9], f32, 0]
    assert got["conv_transpose1d"] == ["cuda", [2, 2, 11], f32, 0]
    assert got["conv2d depthwise"] == ["cuda", [1, 6, 3, 3], f32, 0]
    assert got["conv_transpose2d"] == ["cuda", [1, 2, 8, 8], f32, 0]
    assert got["conv3d"] == ["cuda", [1, 3, 4, 5, 7], f32, 0]
    assert got["conv_transpose3d"] == ["cuda", [1, 4, 6, 6, 6], f32, 0]
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        assert got["depthwise ember." + dtype] == [[2, 8, 5, 5], "ember." + dtype, [8, 1, 3, 3]]
    assert got["int pow"] == ["ember.int32"] * 5 + ["ember.int64"]
    for name, shape in (("isin scalar", [5]), ("isin scalar first", []), ("isin empty", [5]), ("vander", [5, 5]),
                        ("pdist", [0]), ("chebyshev_t", [5]), ("hermite_h", [5]), ("ormqr", [3, 3]),
                        ("lu_unpack data", [3, 3])):
        assert got[name] == ["cuda", shape], name
    assert got["sdpa f64 backward"] == [1, [2, 4, 5, 8], f64]
    assert got["fmax bool"] == ["ember.bool", "ember.bool"]
    assert got["poisson"] == ["cuda", [2, 3], "ember.float32", 0]
    assert got["binomial"] == ["cuda", [2, 3], "ember.float32", 0]
    assert got["_standard_gamma"] == ["cuda", [2, 3], f64]
    assert got["factories out="] == [True] * 8  # out's device when none is named (they raised: device cpu)
    # PyTorch's histogram/histogramdd are CPU-only (its CUDA programs use histc): its error, not a cast error
    assert got["histogram"] == "Could not run 'aten::histogram.bin_ct' with arguments from the 'CUDA' backend."
    assert got["histogramdd"].startswith("Could not run 'aten::_histogramdd_bin_edges'")
    # What is left (packages/cuda/NOTES.md, session 19): sparse layouts (complex numbers, the FFTs, eig, the
    # recurrent layer ops, the math attention backward and binomial have CUDA paths since session 19). A new op
    # without a CUDA kernel shows up here.
    assert got["no cuda kernel"] == [
        "_sparse_compressed_tensor_unsafe", "_sparse_coo_tensor_unsafe", "_sparse_mm", "_to_sparse", "coalesce"]


def _poisson_pmf(lam, k):
    from math import lgamma, log

    return np.exp(-lam + k * log(lam) - np.array([lgamma(v + 1.0) for v in k]))


@pytest.mark.parametrize("lam", [0.7, 4.0, 9.5, 10.0, 37.0, 400.0])
def test_poisson_sampler_distribution(lam):
    """The CUDA poisson (_ops_samplers._poisson: dispatched ops only, so it runs on CPU tensors too): a
    chi-square test of 20000 draws against the Poisson pmf, through both regimes (multiplication below
    rate 10, PTRS from 10); rates 0, inf, NaN and negative as the CPU kernel."""
    from ember._cuda import _ops_samplers

    g = ember.Generator().manual_seed(int(lam * 10))
    x = _ops_samplers._poisson(ember.full((20000,), lam, dtype=ember.float64), g).numpy()
    assert (x == np.floor(x)).all() and (x >= 0).all()
    lo, hi = int(max(0, lam - 4 * lam ** 0.5)), int(lam + 4 * lam ** 0.5) + 2
    ks = np.arange(lo, hi)
    expected = _poisson_pmf(lam, ks) * x.size
    keep = expected >= 20
    observed = np.array([(x == k).sum() for k in ks])[keep]
    expected = expected[keep]
    chi2 = ((observed - expected) ** 2 / expected).sum()
    dof = keep.sum() - 1
    assert chi2 < dof + 5 * (2 * dof) ** 0.5, (chi2, dof)  # ~5 sigma of the chi-square's spread
    got = _ops_samplers._poisson(ember.tensor([0.0, float("inf"), 3.0], dtype=ember.float32))
    assert got.dtype is ember.float32 and got[0].item() == 0 and got[1].item() == float("inf")
    for bad in (-1.0, float("nan")):  # a NaN rate raises too, as torch's check
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            _ops_samplers._poisson(ember.tensor([1.0, bad]))


def _binomial_pmf(n, p, k):
    from math import lgamma, log

    return np.exp(np.array([lgamma(n + 1) - lgamma(v + 1) - lgamma(n - v + 1) for v in k]) + k * log(p)
                  + (n - k) * log(1 - p))


# (count, prob): inversion (count * p < 10, also for p > 1/2 through 1 - p), BTRS (from 10), at the switch
BINOMIAL_CASES = [(10, 0.3), (100, 0.05), (25, 0.39), (30, 0.4), (100, 0.5), (1000, 0.9), (50, 0.97), (2000, 0.2)]


def _binomial_chi2(x, n, p):
    assert (x == np.floor(x)).all() and (x >= 0).all() and (x <= n).all()
    sd = (n * p * (1 - p)) ** 0.5
    ks = np.arange(max(0, int(n * p - 5 * sd)), min(n, int(n * p + 5 * sd) + 2) + 1)
    expected = _binomial_pmf(n, p, ks) * x.size
    keep = expected >= 20
    observed = np.array([(x == k).sum() for k in ks])[keep]
    expected = expected[keep]
    chi2 = ((observed - expected) ** 2 / expected).sum()
    dof = keep.sum() - 1
    assert chi2 < dof + 5 * (2 * dof) ** 0.5, (chi2, dof)  # ~5 sigma of the chi-square's spread


INF, NAN = float("inf"), float("nan")
# the cases the CPU kernel decides before drawing: count <= 0 or p <= 0 -> 0, NaN count -> NaN, p >= 1 -> count,
# NaN p -> NaN (in this order: a negative count with a NaN p is 0, a NaN count with p = 0 is 0)
BINOMIAL_EDGES = ([INF, -1.0, 0.0, 5.0, NAN, NAN, 5.0, 5.0, -INF, INF, 3.0, -2.0, NAN, 4.0],
                  [1.0, 0.5, 0.5, 0.0, 0.5, 0.0, NAN, 1.5, 0.5, 0.0, -0.2, NAN, 1.0, -INF])


@pytest.mark.parametrize("case", BINOMIAL_CASES, ids=str)
def test_binomial_sampler_distribution(case):
    """The CUDA binomial (_ops_samplers._binomial: dispatched ops only, run here on CPU tensors): a chi-square
    test of 20000 draws against the binomial pmf, through the inversion and BTRS, p above and below 1/2;
    the CPU kernel's decided cases (NaN/negative counts, p outside (0, 1)), broadcasting and errors."""
    from ember._cuda import _ops_samplers

    n, p = case
    g = ember.Generator().manual_seed(n)
    for dtype in (ember.float64, ember.float32):
        x = _ops_samplers._binomial(ember.full((20000,), float(n), dtype=dtype), ember.tensor(p, dtype=dtype), g)
        assert x.dtype is dtype and tuple(x.shape) == (20000,)
        _binomial_chi2(x.numpy().astype(np.float64), n, p)


def test_binomial_sampler_edges():
    from ember._cuda import _ops_samplers

    for dtype in (ember.float32, ember.float64):
        c, p = (ember.tensor(v, dtype=dtype) for v in BINOMIAL_EDGES)
        np.testing.assert_array_equal(_ops_samplers._binomial(c, p).numpy(), ember.binomial(c, p).numpy())
        # an infinite count with 0 < p < 1: NaN or inf, as the CPU kernel's BTRS formulas give
        big = _ops_samplers._binomial(ember.full((200,), INF, dtype=dtype), ember.tensor([0.3, 0.8], dtype=dtype)
                                      .repeat(100)).numpy()
        assert (np.isnan(big) | (big == INF)).all()
    got = _ops_samplers._binomial(ember.full((3, 1), 40.0), ember.tensor([0.0, 0.5, 1.0, 0.25]))
    assert tuple(got.shape) == (3, 4) and (got[:, 0] == 0).all() and (got[:, 2] == 40).all()
    assert ((got >= 0) & (got <= 40) & (got == got.floor())).all()
    assert tuple(_ops_samplers._binomial(ember.ones(0, 3), ember.ones(3)).shape) == (0, 3)
    with pytest.raises(ValueError, match="floating-point dtypes for count"):
        _ops_samplers._binomial(ember.ones(3, dtype=ember.int64), ember.ones(3))
    with pytest.raises(NotImplementedError, match="binomial_cpu"):
        _ops_samplers._binomial(ember.ones(3, dtype=ember.float16), ember.ones(3, dtype=ember.float16))
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        _ops_samplers._binomial(ember.ones(3), ember.ones(3, dtype=ember.float64))


# (batch, heads, key heads, query rows, keys, width, value width, causal, mask, dtype)
SDPA_BACKWARD_CASES = [
    ((2,), 4, 4, 7, 9, 5, 6, False, None, "float32"),
    ((2, 3), 4, 2, 6, 6, 4, 4, True, None, "float64"),  # grouped heads, two batch dims
    ((1,), 2, 1, 5, 8, 3, 3, False, "bool", "float32"),
    ((2,), 2, 2, 4, 5, 3, 2, True, "float", "float64"),  # causal and an additive mask
    ((), 3, 3, 4, 4, 2, 2, False, "dead row", "float32"),  # a query row that sees no key: zero gradients
    ((2,), 2, 2, 3, 0, 2, 2, False, None, "float32"),  # no keys
]


def _sdpa_backward_inputs(case, device="cpu"):
    batch, h, hk, lq, s, e, ev, causal, mask, dtype = case
    dtype = getattr(ember, dtype)
    q, k, v, go = (rand(shape, dtype, seed=i).to(device) for i, shape in enumerate(
        (batch + (h, lq, e), batch + (hk, s, e), batch + (hk, s, ev), batch + (h, lq, ev))))
    m = None
    if mask == "bool":
        m = (rand((lq, s), ember.float32, seed=7) > 0.3).to(device)
    elif mask == "float":
        m = rand((h, lq, s), dtype, seed=8).to(device)
    elif mask == "dead row":
        m = ember.ones(lq, s, dtype=ember.bool)
        m[1] = False
        m = m.to(device)
    return go, q, k, v, m, causal


@pytest.mark.parametrize("case", SDPA_BACKWARD_CASES, ids=str)
def test_sdpa_math_backward_composite_matches_cpu_kernel(case, monkeypatch):
    """The CUDA _scaled_dot_product_attention_math_backward (_ops_attention_math: dispatched ops, run here on
    CPU tensors) equals the CPU kernel: grouped heads, causal, bool/additive masks, a row seeing no key, no keys;
    in one block of query rows and in blocks of one row (the key/value gradients summed over blocks)."""
    from ember._cuda import _ops_attention_math as am
    from ember._src.dispatch import OPS

    go, q, k, v, m, causal = _sdpa_backward_inputs(case)
    want = OPS["_scaled_dot_product_attention_math_backward"].kernels["cpu"](go, q, k, v, m, causal, 0.37)
    for block in (1 << 26, 1):
        monkeypatch.setattr(am, "_BLOCK_SCORES", block)
        got = am.sdpa_math_backward(go, q, k, v, m, causal, 0.37)
        for a, b in zip(got, want):
            assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
            assert not np.isnan(a.numpy()).any()
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_sdpa_math_backward_errors_as_the_cpu_kernel():
    from ember._cuda import _ops_attention_math as am

    q, k = ember.ones(2, 3, 4, 5), ember.ones(2, 2, 4, 5)
    for args, message in (((q, q, k, k), "key heads must divide query heads"),
                          ((q, q, ember.ones(3, 3, 4, 5), q), "batch dims must match"),
                          ((q, q, ember.ones(4, 5), q), "at least 3-D and of one rank")):
        with pytest.raises(RuntimeError, match=message):
            am.sdpa_math_backward(*args, None, False, 1.0)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("case", SDPA_BACKWARD_CASES, ids=str)
def test_sdpa_math_backward_on_cuda(case):
    """The op on CUDA against the CPU kernel, and float64 attention's backward (the math path) through the
    engine on CUDA against the CPU's."""
    from ember._src.dispatch import OPS

    op = OPS["_scaled_dot_product_attention_math_backward"]
    args = _sdpa_backward_inputs(case)
    got = op(*(t.cuda() if isinstance(t, ember.Tensor) else t for t in args[:5]), args[5], 0.37)
    for a, b in zip(got, op(*args[:6], 0.37)):
        assert a.device.type == "cuda"
        assert_same(a, b, b.dtype, rtol=1e-5, atol=1e-5)
    go, q, k, v, m, causal = args
    if (m is not None and causal) or k.shape[-2] == 0:
        return  # (the math path refuses a mask with is_causal, as PyTorch's)
    grads = []
    for dev in ("cpu", "cuda"):
        qd, kd, vd = (t.detach().double().to(dev).requires_grad_() for t in (q, k, v))
        y = F.scaled_dot_product_attention(qd, kd, vd, None if m is None else m.to(dev), is_causal=causal,
                                           enable_gqa=k.shape[-3] != q.shape[-3])
        y.backward(go.double().to(dev))
        grads.append((qd.grad, kd.grad, vd.grad))
    for cpu_grad, cuda_grad in zip(*grads):  # (assert_same takes the CUDA tensor first)
        assert_same(cuda_grad, cpu_grad, ember.float64, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 2.5, 30.0])
def test_standard_gamma_sampler_distribution(alpha):
    """The CUDA _standard_gamma (dispatched ops only: run on CPU tensors) against Gamma(alpha, 1) by a
    Kolmogorov-Smirnov test of 20000 draws; edge shapes as the CPU kernel (tiny for <= 0 and NaN)."""
    stats = pytest.importorskip("scipy.stats")
    from ember._cuda import _ops_samplers

    g = ember.Generator().manual_seed(int(alpha * 100))
    x = _ops_samplers._standard_gamma(ember.full((20000,), alpha, dtype=ember.float64), g).numpy()
    assert stats.kstest(x, "gamma", args=(alpha,)).pvalue > 1e-4
    edge = ember.tensor([0.0, -1.0, float("nan"), float("inf"), 1e-30])
    got, want = _ops_samplers._standard_gamma(edge), ember._standard_gamma(edge)
    assert got.dtype is ember.float32
    np.testing.assert_array_equal(got[:4].numpy(), want[:4].numpy())
    assert got[4].item() >= 1.1754943508222875e-38


# -- on the GPU -------------------------------------------------------------------------------------


CONV_CASES = [  # (input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
    ((2, 3, 11), (5, 3, 3), (2,), (1,), (1,), False, (0,), 1),
    ((2, 4, 12), (4, 2, 3), (1,), (2,), (2,), False, (0,), 2),
    ((2, 6, 9, 9), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), False, (0, 0), 6),
    # depthwise (_ops_depthwise): multipliers, strides, dilation, 7x7, 1-d, many positions (weight-grad splits)
    ((2, 3, 10, 11), (6, 1, 3, 2), (2, 1), (1, 0), (1, 2), False, (0, 0), 3),
    ((1, 4, 15, 13), (8, 1, 7, 7), (1, 1), (3, 3), (1, 1), False, (0, 0), 4),
    ((4, 32, 56, 56), (32, 1, 3, 3), (2, 2), (1, 1), (1, 1), False, (0, 0), 32),
    ((3, 5, 40), (10, 1, 5), (2,), (2,), (1,), False, (0,), 5),
    ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), False, (0, 0), 2),
    ((2, 3, 4, 5), (3, 2, 3, 3), (2, 2), (1, 0), (1, 1), True, (1, 0), 1),
    ((1, 4, 3, 4), (4, 3, 2, 3), (1, 2), (0, 1), (2, 1), True, (0, 1), 2),
    ((2, 3, 6), (3, 4, 4), (3,), (1,), (1,), True, (2,), 1),
    ((2, 3, 5, 4, 6), (4, 3, 3, 2, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1), False, (0, 0, 0), 1),
    ((1, 4, 4, 5, 3), (6, 2, 2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1), False, (0, 0, 0), 2),
    ((2, 3, 3, 2, 4), (3, 2, 2, 3, 3), (2, 1, 2), (1, 1, 0), (1, 1, 1), True, (1, 0, 1), 1),
]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.float64], ids=str)
@pytest.mark.parametrize("case", CONV_CASES, ids=[f"{len(c[0]) - 2}d-t{int(c[5])}-g{c[7]}" for c in CONV_CASES])
@pytest.mark.gpu
@needs_gpu
def test_convolutions_match_cpu(case, dtype):
    xs, ws, stride, padding, dilation, transposed, outpad, groups = case
    x, w = rand(xs, dtype, seed=1), rand(ws, dtype, seed=2)
    b = rand((ws[1] * groups if transposed else ws[0],), dtype, seed=3)
    gout = None
    results = []
    for dev in ("cpu", "cuda"):
        xr, wr, br = (t.to(dev).detach().requires_grad_() for t in (x, w, b))
        y = ember.ops.convolution(xr, wr, br, list(stride), list(padding), list(dilation), transposed, list(outpad),
                                  groups)
        if gout is None:
            gout = rand(tuple(y.shape), dtype, seed=4)
        y.backward(gout.to(dev))
        results.append((y, xr.grad, wr.grad, br.grad))
    tol = {ember.float16: 2e-2, ember.float32: 1e-4, ember.float64: 1e-10}[dtype]
    for g, c in zip(results[1], results[0]):
        assert_same(g, c, dtype, rtol=tol, atol=tol)


@pytest.mark.gpu
@needs_gpu
def test_linspace_logspace_windows_on_cuda_equal_cpu():
    for call in (lambda d: ember.linspace(-3, 7, 11, device=d), lambda d: ember.linspace(0, 1, 1000, device=d),
                 lambda d: ember.linspace(0, 10, 4, dtype=ember.int64, device=d),
                 lambda d: ember.logspace(-2, 2, 9, dtype=ember.float64, device=d),
                 lambda d: ember.hann_window(16, device=d), lambda d: ember.kaiser_window(9, False, 5.0, device=d),
                 lambda d: ember.bartlett_window(7, device=d), lambda d: ember.blackman_window(10, device=d)):
        g, c = call("cuda"), call("cpu")
        assert g.device.type == "cuda" and g._version == 0
        # a few ulps: the device's pow/cos round differently from the CPU's (logspace's 10 ** 0.5: 1 ulp on an H100)
        tol = 0 if not g.dtype.is_floating_point else 4 * ember.finfo(g.dtype).eps
        assert_same(g, c, rtol=tol, atol=tol)


@pytest.mark.gpu
@needs_gpu
def test_unary_scalar_parameters_by_default_and_keyword():
    x = rand((5, 6), low=-3, high=3)
    for call in (lambda t: ember.ops.elu(t), lambda t: ember.ops.elu(t, alpha=0.5, scale=2.0),
                 lambda t: ember.ops.hardtanh(t), lambda t: ember.ops.hardtanh(t, max_val=0.5),
                 lambda t: ember.ops.leaky_relu(t), lambda t: ember.ops.softplus(t, threshold=1.0),
                 lambda t: ember.ops.celu_(t.clone(), alpha=2.0), lambda t: ember.ops.threshold(t, value=-7.0)):
        assert_same(call(x.cuda()), call(x))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("lam", [0.5, 3.0, 12.0, 250.0])
def test_poisson_on_cuda(lam):
    ember.manual_seed(0)
    rates = ember.full((100000,), lam, device="cuda")
    x = ember.poisson(rates)
    assert x.device.type == "cuda" and x.dtype is ember.float32 and x._version == 0
    h = x.cpu().double().numpy()
    assert (h == np.floor(h)).all() and (h >= 0).all()
    assert abs(h.mean() - lam) < 5 * (lam / h.size) ** 0.5
    assert abs(h.var() / lam - 1) < 0.05
    ember.cuda.manual_seed(3)
    a = ember.poisson(rates[:100])
    ember.cuda.manual_seed(3)
    assert_same(a, ember.poisson(rates[:100]).cpu(), rtol=0, atol=0)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("case", BINOMIAL_CASES, ids=str)
def test_binomial_on_cuda(case):
    """binomial on CUDA: 20000 draws against the pmf (chi-square), a fresh result, the CPU kernel's decided
    cases, seeded reruns equal."""
    n, p = case
    ember.cuda.manual_seed(n)
    for dtype in (ember.float32, ember.float64):
        x = ember.binomial(ember.full((20000,), float(n), dtype=dtype, device="cuda"),
                           ember.tensor(p, dtype=dtype, device="cuda"))
        assert x.device.type == "cuda" and x.dtype is dtype and x._version == 0
        _binomial_chi2(x.cpu().double().numpy(), n, p)
        c, q = (ember.tensor(v, dtype=dtype) for v in BINOMIAL_EDGES)
        np.testing.assert_array_equal(ember.binomial(c.cuda(), q.cuda()).cpu().numpy(), ember.binomial(c, q).numpy())
    counts, probs = ember.full((100,), float(n), device="cuda"), ember.full((100,), p, device="cuda")
    ember.cuda.manual_seed(3)
    a = ember.binomial(counts, probs)
    ember.cuda.manual_seed(3)
    assert_same(a, ember.binomial(counts, probs).cpu(), rtol=0, atol=0)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("alpha", [0.3, 1.0, 7.5])
def test_standard_gamma_on_cuda(alpha):
    stats = pytest.importorskip("scipy.stats")
    ember.manual_seed(0)
    x = ember._standard_gamma(ember.full((50000,), alpha, device="cuda"))
    assert x.device.type == "cuda" and x.dtype is ember.float32
    assert stats.kstest(x.cpu().double().numpy(), "gamma", args=(alpha,)).pvalue > 1e-4
    d = ember.distributions.Gamma(ember.full((3,), alpha, device="cuda"), ember.ones(3, device="cuda")).sample()
    assert d.device.type == "cuda"


@pytest.mark.gpu
@needs_gpu
def test_functions_that_made_cpu_tensors_match_cpu():
    """isin with a scalar, vander, pdist, the orthogonal polynomials with a scalar, lu/lu_solve/lu_unpack, ormqr,
    matrix_exp and cholesky_inverse made CPU operands (or called a host kernel on device memory)."""
    x = rand((7,), seed=5)
    a = rand((4, 4), ember.float64, seed=6) + 4 * ember.eye(4, dtype=ember.float64)
    spd = a @ a.mT
    b = rand((4, 2), ember.float64, seed=7)
    calls = [lambda d: ember.isin(x.to(d).round(), 1.0), lambda d: ember.isin(1.0, x.to(d).round(), invert=True),
             lambda d: ember.vander(x.to(d), 4), lambda d: F.pdist(rand((5, 3), seed=8).to(d)),
             lambda d: ember.special.chebyshev_polynomial_t(x.to(d), 3),
             lambda d: ember.special.legendre_polynomial_p(0.3, ember.tensor([0.0, 1, 2, 5]).to(d)),
             lambda d: ember.linalg.lu(a.to(d)),
             lambda d: ember.linalg.lu_solve(*ember.linalg.lu_factor(a.to(d)), b.to(d)),
             lambda d: ember.lu_unpack(*ember.linalg.lu_factor(a.to(d))),
             lambda d: ember.linalg.matrix_exp(a.to(d) / 8),
             lambda d: ember.cholesky_inverse(ember.linalg.cholesky(spd.to(d))),
             lambda d: ember.ormqr(*ember.geqrf(a.to(d)), b.to(d))]
    for call in calls:
        got, want = call("cuda"), call("cpu")
        for g, c in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            tol = 1e-9 if c.dtype is ember.float64 else 1e-5
            assert_same(g, c, rtol=tol, atol=tol)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.int16, ember.int8, ember.uint8], ids=str)
def test_integer_powers_match_cpu(dtype):
    g = np.random.default_rng(3)
    low = 0 if dtype is ember.uint8 else -9
    a = ember.tensor(np.concatenate([[0, 1, 2, 3, 0, 5], g.integers(low, 10, 60)])).to(dtype)
    b = ember.tensor(np.concatenate([[0, 0, 40, 30, 3, 7], g.integers(0, 70, 60)])).to(dtype)
    for call in (lambda x, y: x ** y, lambda x, y: x ** 3, lambda x, y: 3 ** y, lambda x, y: x.clone().pow_(y),
                 lambda x, y: x.square()):
        assert_same(call(a.cuda(), b.cuda()), call(a, b))
    if dtype is not ember.uint8:
        n = ember.tensor([-3, -2, -1, -1, 0, 1, 2]).to(dtype)
        e = ember.tensor([-1, -2, -3, -4, -1, -5, -1]).to(dtype)
        assert_same(n.cuda() ** e.cuda(), n ** e)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("scale", [1e30, -1e30, 1e5, -3e4, 300.0])
def test_cross_entropy_of_huge_scores_on_cuda(scale):
    """Loss and gradient of rows whose log-sum-exp rounds in float32 (the backward no longer reads
    exp(x - lse) from a saved |lse| > 256), against torch in float64 from the same float32 scores."""
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(0)
    noise = g.standard_normal((8, 37))
    x = (scale * (1 + 1e-3 * noise) if abs(scale) > 1e6 else scale + noise).astype(np.float32)
    x[0] = x[0, 0]
    t = g.integers(0, 37, 8)
    t[1] = -100
    for kwargs in ({}, {"label_smoothing": 0.1}, {"reduction": "sum"}):
        xr = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        want = torch.nn.functional.cross_entropy(xr, torch.tensor(t), **kwargs)
        want.backward()
        xe = ember.tensor(x).cuda().requires_grad_()
        got = F.cross_entropy(xe, ember.tensor(t).cuda(), **kwargs)
        got.backward()
        np.testing.assert_allclose(float(got.item()), float(want.item()), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(xe.grad.cpu().numpy(), xr.grad.numpy(), rtol=2e-5, atol=2e-6)


