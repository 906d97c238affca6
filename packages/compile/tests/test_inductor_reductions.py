"""Reductions and the fused patterns built on them: compiled vs eager ember vs PyTorch.

softmax, log_softmax, layer_norm, logsumexp, var/std, cross-entropy and an optimizer update
each check values and how many kernels the fusion left (fewer kernels = fewer memory passes).
"""

from __future__ import annotations

import pytest
from inductor_test_helpers import check, compile_program, make_input, tolerances

import ember


def test_reduction_family_float():
    def program(m, x):
        return [x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.mean(-1), x.mean((1, 2), keepdim=True),
                x.prod(2), m.amax(x, 1), m.amin(x, (0, 1), keepdim=True), x.max(), x.min(),
                (x > 0).any(1), (x > -5).all(), x.nansum(0) if False else x.abs().sum(0)]

    x = make_input((4, 5, 6), ember.float32, specials=False)
    check(program, x, rtol=1e-5, atol=1e-5)


def test_reductions_propagate_nan_and_inf():
    def program(m, x):
        return [m.amax(x, 1), m.amin(x, 1), x.sum(1), x.mean(1), x.max(), x.prod(1)]

    x = make_input((13, 7), ember.float32, seed=3)  # NaN, +-inf spread over the rows
    check(program, x)


@pytest.mark.parametrize("dtype", [ember.int32, ember.bool, ember.uint8])
def test_reductions_of_integers(dtype):
    def program(m, x):
        return [x.sum(), x.sum(0), x.sum(1, keepdim=True), x.prod(0), x.any(1), x.all(0),
                m.amax(x, 1) if x.dtype != m.bool else x.any(0)]

    check(program, make_input((6, 9), dtype))


def test_reductions_of_a_zero_dim_value_are_its_element():
    # amax(...) of a vector is 0-dim; reducing that again (over "all" of no dims) is a copy, and a
    # reduction after it must still fuse (it once failed to compile: a reduction over no dims)
    def program(m, v, s):
        a = m.amax(v, 0)
        b = m.amin(a, (), keepdim=True)
        return [b, b.mean(), a.sum(), s.prod(), s.any(), s.sum(dtype=m.float64), m.amax(s, 0, keepdim=True)]

    art = check(program, make_input((5,), ember.float32, specials=False), make_input((), ember.int32)).artifact
    assert art.extern_count == 0


def test_reduction_dtype_argument_and_half():
    def program(m, x, h):
        return [x.sum(1, dtype=m.float64), h.sum(1), h.mean(0), m.amax(h, 1), h.float().sum()]

    check(program, make_input((5, 40), ember.int64), make_input((5, 40), ember.float16, specials=False),
          rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_softmax_and_log_softmax_fuse_into_one_kernel(dtype):
    def program(m, x):
        return m.softmax(x, -1), m.log_softmax(x, -1)

    rtol, atol = tolerances(dtype)
    x = make_input((6, 33), dtype, specials=False, low=-8, high=8)
    check(program, x, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6), kernels=1)


def test_softmax_inner_dim_rows_of_inf_and_nan():
    def program(m, x, y):
        return m.softmax(x, 1), m.log_softmax(y, -1)

    x = make_input((3, 5, 4), ember.float32, seed=5, specials=False)
    y = ember.tensor([[float("-inf")] * 4, [1.0, float("nan"), 2.0, 0.0], [float("inf"), 1.0, 2.0, 3.0],
                      [0.5, -1.0, 3.0, 2.0]])
    check(program, x, y)


def test_float32_exp_is_eagers_bit_for_bit_and_inline():
    """Generated float32 exp is the inline polynomial of the prelude (a loop using it vectorizes
    whole): bit for bit eager's exp over random bit patterns, the overflow and underflow edges,
    the subnormal range and the specials; within 1 ulp of PyTorch's."""
    import numpy as np
    import torch

    g = np.random.default_rng(0)
    edges = np.array([88.72283935546875, 88.7228317, 88.72284, 89.0, 100.0, -87.33, -87.34, -100.0, -103.972084,
                      -103.97209, -104.0, -1e4, 1e-45, -1e-45, 0.0, -0.0, float("inf"), float("-inf"), float("nan")],
                     np.float32)
    vals = np.concatenate([g.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                           np.linspace(-110, 95, 100_001, dtype=np.float32), edges])
    x = ember.tensor(vals)
    compiled = ember.compile(lambda x: [x.exp(), x.sigmoid()])
    got, got_sig = (t.numpy() for t in compiled(x))
    want = x.exp().numpy()
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), vals[~same][:10]
    ref = torch.exp(torch.from_numpy(vals)).numpy()
    assert (np.isnan(got) == np.isnan(ref)).all()
    ulps = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))[~np.isnan(ref)]
    assert ulps.max() <= 1
    np.testing.assert_allclose(got_sig, torch.sigmoid(torch.from_numpy(vals)).numpy(), rtol=1e-6, atol=1e-30)
    fn, _ = compile_program(lambda m, x: m.exp(x) + m.exp(x.double()).float(), [x[:100]])
    text = "\n".join(kernel_lines(fn.artifact.cpp_source))
    assert "ember_expf(" in text and "expf(" not in text.replace("ember_expf(", ""), text
    assert " exp(" in text  # float64 keeps libm's exp


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_softmax_rows_values_and_row_invariant_work(dtype):
    """softmax / log_softmax over rows (contiguous, a transposed input, a sliced one, rows of
    -inf, NaN and +inf) against eager and PyTorch; log_softmax's log(sum) is computed once per
    row before the row's last loop, not in it."""

    def program(m, x, y, z):
        return [m.softmax(x, -1), m.log_softmax(x, -1), m.softmax(y.t(), -1), m.log_softmax(y.t(), 1),
                m.softmax(z[:, 1::2], -1), m.log_softmax(z[::2], -1)]

    x = make_input((9, 300), dtype, specials=False, low=-30, high=30)
    x[1] = float("-inf")
    x[2, 7] = float("nan")
    x[3, 5] = float("inf")
    x[4, :150] = float("-inf")
    y = make_input((70, 11), dtype, seed=1, specials=False, low=-90, high=90)
    z = make_input((12, 41), dtype, seed=2, specials=False)
    rtol, atol = tolerances(dtype)
    compiled = check(program, x, y, z, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6))
    log = "logf(" if dtype is ember.float32 else "log("
    ctype = "float " if dtype is ember.float32 else "double "
    logs = [line for line in kernel_lines(compiled.artifact.cpp_source) if log in line]
    assert len(logs) == 3, logs  # one per log_softmax, each a row's (in the row loop, before its loops)
    assert all(line.startswith(" " * 8 + ctype) for line in logs), logs


def kernel_lines(source) -> list:
    """The lines of the generated kernels' bodies (the prelude left out)."""
    out, inside = [], False
    for line in source.splitlines():
        if line.startswith("EMBER_KERNEL void"):
            inside = True
        elif inside and line == "}":
            inside = False
        elif inside:
            out.append(line)
    return out


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_layer_norm_is_one_kernel(dtype):
    def program(m, x, w, b):
        return m.nn.functional.layer_norm(x, (32,), w, b, 1e-5), m.nn.functional.layer_norm(x, (4, 32))

    x = make_input((3, 4, 32), dtype, specials=False)
    w = make_input((32,), dtype, seed=1, specials=False)
    b = make_input((32,), dtype, seed=2, specials=False)
    rtol, atol = tolerances(dtype)
    check(program, x, w, b, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5), kernels=2)


def test_var_std_logsumexp():
    def program(m, x):
        return [m.var(x, 1), m.std(x, (0, 1), keepdim=True), m.var(x, 0, correction=0), m.logsumexp(x, 1),
                m.logsumexp(x, (0, 2), keepdim=True), *m.var_mean(x, -1)]

    check(program, make_input((4, 6, 5), ember.float32, specials=False), rtol=1e-5, atol=1e-5)


def test_cross_entropy_and_nll_run_with_fused_log_softmax():
    def program(m, logits, target):
        return m.nn.functional.cross_entropy(logits, target), m.nn.functional.log_softmax(logits, 1).sum(1)

    logits = make_input((8, 10), ember.float32, specials=False)
    target = ember.tensor([1, 0, 9, 3, 3, 7, 2, 5])
    check(program, logits, target, lowered=False)


def test_optimizer_update_mutates_inputs_in_one_kernel():
    # an Adam-style step as AOT autograd hands it over: new values computed, copied into the inputs
    def program(m, p, g, exp_avg, exp_avg_sq):
        exp_avg.mul_(0.9).add_(g, alpha=0.1)
        exp_avg_sq.mul_(0.999).addcmul_(g, g, value=0.001)
        denom = (exp_avg_sq / 0.999).sqrt().add_(1e-8)
        p.addcdiv_(exp_avg, denom, value=-0.01)
        return p

    args = [make_input((40,), ember.float32, seed=s, specials=False) for s in range(4)]
    args[3] = args[3].abs()
    from inductor_test_helpers import compile_program

    eager_args = [a.clone() for a in args]
    compiled, _ = compile_program(program, [a.clone() for a in args])
    program(ember, *eager_args)
    compiled(*args)
    for got, want in zip(args, eager_args):
        assert float((got - want).abs().max()) <= 1e-6


def test_matmul_stays_extern_with_fused_epilogue():
    def program(m, x, w, b):
        return m.nn.functional.gelu(x @ w + b).sum(-1), m.relu(m.nn.functional.linear(x, w.t(), b))

    x = make_input((6, 16), ember.float32, specials=False)
    w = make_input((16, 16), ember.float32, seed=1, specials=False)
    b = make_input((16,), ember.float32, seed=2, specials=False)
    compiled = check(program, x, w, b, lowered=False, rtol=1e-5, atol=1e-5)
    art = compiled.artifact
    assert art.extern_count >= 2 and art.kernel_count <= 2, art.wrapper_source


def test_ops_without_lowering_fall_back_in_place():
    def program(m, x):
        y = m.cumsum(x * 2, 1)            # no lowering: ember's kernel, between two fused kernels
        return (y.exp() + 1).sum(0), m.sort(x, 1)[0] - y

    check(program, make_input((5, 7), ember.float32, specials=False), lowered=False, rtol=1e-5, atol=1e-5)


def test_in_place_ops_on_graph_values():
    def program(m, x, mask):
        y = x * 2
        y.add_(1)                           # rebinds y: later reads see the update
        z = x.clone().masked_fill_(mask, float("-inf"))
        before = y.sum()                    # reads y after its update
        return m.softmax(z, -1), before, y

    x = make_input((4, 6), ember.float32, specials=False)
    mask = make_input((4, 6), ember.bool, seed=3)
    mask[:, 0] = False  # every row keeps one finite entry
    check(program, x, mask)


def test_in_place_op_on_a_viewed_value_stays_correct():
    def program(m, x):
        y = x * 2
        row = y[0]          # a view of y taken before y changes in place
        y.mul_(3)
        return row + 1, y

    x = make_input((3, 5), ember.float32, specials=False)
    check(program, x, lowered=False)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.int32])
def test_column_sums_walk_rows_once_per_block_of_columns(dtype):
    """Sums over rows of side-by-side columns (bias gradients) run as outer reductions: the
    generated loop walks each row once per block of 64 columns (130 columns: a partial block),
    with fused pointwise work before the sum, values stored on the way, a row epilogue after,
    per-row broadcasts and a reshape of contiguous dims in between."""

    def program(m, x, w, r):
        y = x * 2 + w
        return [(x * w).sum(0), (x.abs() * 2).sum(0) * 3 + 1, x.reshape(3, 100, 130).sum((0, 1)),
                y, y.sum(0), (x - r).sum(0)]

    x = make_input((300, 130), dtype, specials=False)
    w = make_input((130,), dtype, seed=1, specials=False)
    r = make_input((300, 1), dtype, seed=2, specials=False)
    compiled = check(program, x, w, r, rtol=1e-5, atol=1e-4)
    source = compiled.artifact.cpp_source
    assert source.count("_blk += 64") == 2, source  # the fused sums, and the reshaped one
    kernels = source.split("EMBER_KERNEL void ")[1:]  # (the prelude's row helpers aside)
    assert all("reduction(+" not in k for k in kernels), source  # no sum left in the row-by-row form


def test_a_reshape_of_contiguous_dims_keeps_the_index_linear():
    import sympy

    from ember.compiler.inductor._ir import FloorDiv, ModularIndexing, simplify_index

    x = sympy.Symbol("x0", integer=True, nonnegative=True)
    s = sympy.Symbol("s0", integer=True, positive=True)
    assert simplify_index(1024 * ModularIndexing(x, 1, 128) + 131072 * FloorDiv(x, 128) + 5) == 1024 * x + 5
    assert simplify_index(s * ModularIndexing(x, 4, 128) + 128 * s * FloorDiv(x, 512)) == s * FloorDiv(x, 4)
    unrelated = 1024 * ModularIndexing(x, 1, 128) + 131 * FloorDiv(x, 128)
    assert simplify_index(unrelated) == unrelated


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_transposed_copy_leaves_the_row_kernel_and_is_tiled(dtype):
    """A transposed copy of a square input has the iteration space of a softmax over its rows,
    but in the row kernel it would read one element per cache line (walk columns): it gets a
    kernel of its own, walked in 16 x 16 tiles inside 256 x 256 blocks, the tiles along the
    source's contiguous dim innermost (sizes that are not multiples of 16: partial tiles). A
    transposed read in a pointwise chain (non-contiguous input) is tiled too. A softmax
    over the transposed input's rows, which walks columns itself, keeps its members."""

    def program(m, x, y, w):
        z = x * 0.5
        return [m.softmax(z, -1), z.transpose(-2, -1).contiguous(), (w.t() + 1).exp(), m.log_softmax(y.t(), -1),
                y.t() * 2]

    x = make_input((3, 45, 45), dtype, specials=False)
    y = make_input((70, 37), dtype, seed=1, specials=False)
    w = make_input((33, 65), dtype, seed=2, specials=False)
    rtol, atol = tolerances(dtype)
    compiled = check(program, x, y, w, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6))
    source = compiled.artifact.cpp_source
    kernels = source.split("EMBER_KERNEL void ")[1:]
    tiled = [k for k in kernels if "_blk += 16" in k and "_sup += 256" in k]
    assert len(tiled) == 2, source  # the copy, and the chain on w.t()
    assert all("reduction(" not in k for k in tiled), source
    rows = [k for k in kernels if "reduction(" in k]
    assert len(rows) == 2 and len(kernels) == 4, source  # softmax(z) without the copy; log_softmax(y.t())
    assert any("log" in k and "* 2" in k for k in rows), source  # with y.t() * 2, which walks as it does


@pytest.mark.parametrize("threads", [1, 2])
def test_transposed_copy_over_several_blocks_of_tiles(threads):
    # past one 256 x 256 block each way, with partial blocks and tiles at both edges; a batch dim
    # shares the threads out with the blocks
    def program(m, x, y):
        return [x.t().contiguous(), (y.transpose(1, 2) * 2).exp()]

    old = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        x = make_input((300, 530), ember.float32, specials=False)
        y = make_input((2, 270, 20), ember.float32, seed=1, specials=False)
        compiled = check(program, x, y)
    finally:
        ember.set_num_threads(old)
    assert compiled.artifact.cpp_source.count("_sup += 256") == 4


@pytest.mark.parametrize("threads", [1, 2])
def test_row_kernels_run_their_first_reduction_a_row_ahead(threads):
    """log_softmax(x * 2)'s max of the next row runs inside this row's second loop (each thread
    carries its own over its rows); a plain float32 softmax and layer_norm run eager's row
    structure instead (the prelude's row helpers, the second pass prefetching the next row):
    values on one and two threads, with rows of NaN, +-inf and -inf at the first, last and
    middle rows (where two threads' chunks meet)."""

    programs = [lambda m, x, w, b: m.softmax(x, -1), lambda m, x, w, b: m.log_softmax(x * 2, -1),
                lambda m, x, w, b: m.nn.functional.layer_norm(x, (401,), w, b)]
    x = make_input((97, 401), ember.float32, specials=False, low=-20, high=20)
    x[0, 3] = float("nan")
    x[48] = float("-inf")
    x[49, 0] = float("inf")
    x[96, 400] = float("-inf")
    w = make_input((401,), ember.float32, seed=3, specials=False)
    b = make_input((401,), ember.float32, seed=4, specials=False)
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for i, program in enumerate(programs):
            compiled = check(program, x, w, b, rtol=1e-5, atol=1e-5, kernels=1)
            kernel = compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1]
            helpers = [("ember_row_max_f32(", "ember_exp_shift_sum_f32("), None,
                       ("ember_row_sum_f32(", "ember_row_sq_dev_f32(")][i]
            if helpers is not None:
                assert all(h in kernel for h in helpers), kernel
                assert "x0 + 1 < k" in kernel and "pipe_row" not in kernel, kernel  # the next row, prefetched
            else:
                assert "firstprivate(pipe_row, pipe_acc, pipe_nan)" in kernel, kernel
    finally:
        ember.set_num_threads(saved)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_an_output_that_is_the_summed_term_is_stored_once(dtype):
    """A residual sum returned beside its layer_norm (a transformer block's) is the term the mean
    sums: the sum's loop stores it, and no later loop reads it back to store it again."""
    import re

    def program(m, a, b, c, w):
        y = a + b + c * 2
        return y, m.nn.functional.layer_norm(y, (40,), w)

    a, b, c = (make_input((6, 40), dtype, seed=s, specials=False) for s in (0, 1, 2))
    w = make_input((40,), dtype, seed=3, specials=False)
    rtol, atol = tolerances(dtype)
    compiled = check(program, a, b, c, w, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5), kernels=1)
    lines = kernel_lines(compiled.artifact.cpp_source)
    for first, second in zip(lines, lines[1:]):
        load = re.match(r"\s*\w+ (tmp\d+) = (\w+\[.*\]);$", first)
        if load:
            assert not re.match(rf"\s*{re.escape(load.group(2))} = .*\({load.group(1)}\)\)?;$", second), lines
