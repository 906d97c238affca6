"""Random numbers: the CPU generator, its state, and every sampler's distribution.

The CPU generator is PyTorch's (MT19937 with PyTorch's seeding and transforms), so seeded
draws are compared with torch's bit for bit (test_*_matches_torch); the Philox kernels kept
for poisson/binomial/multinomial are checked through known answers and moments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember

from conftest import torch

FLOATS = ["float16", "bfloat16", "float32", "float64"]
N = 20000  # samples for moment checks: the standard error of a mean is ~0.007 sd


def dtype(name):
    return getattr(ember, name)


def values(t):
    return np.asarray(t.double().numpy() if t.dtype.is_floating_point else t.numpy(), dtype=np.float64)


@pytest.fixture(autouse=True)
def _restore_default_generator():
    state = ember.get_rng_state()
    yield
    ember.set_rng_state(state)


# -- the generator ----------------------------------------------------------------------------------

@pytest.mark.parametrize("counter,key,expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(counter, key, expected):
    # Random123's published test vectors for Philox4x32-10.
    assert ember._C.philox4x32(*counter, *key) == expected


SAMPLERS = {
    "rand": lambda g: ember.rand(7, 5, generator=g),
    "randn": lambda g: ember.randn(7, 5, generator=g, dtype=ember.float64),
    "randint": lambda g: ember.randint(-50, 50, (40,), generator=g),
    "randperm": lambda g: ember.randperm(40, generator=g),
    "normal": lambda g: ember.normal(ember.zeros(30), ember.ones(30), generator=g),
    "bernoulli": lambda g: ember.bernoulli(ember.full((40,), 0.5), generator=g),
    "multinomial": lambda g: ember.multinomial(ember.ones(3, 20), 10, generator=g),
    "multinomial_repl": lambda g: ember.multinomial(ember.ones(20), 30, True, generator=g),
    "exponential_": lambda g: ember.zeros(30).exponential_(generator=g),
    "geometric_": lambda g: ember.zeros(30).geometric_(0.2, generator=g),
    "random_": lambda g: ember.zeros(30, dtype=ember.int64).random_(generator=g),
    "cauchy_": lambda g: ember.zeros(30).cauchy_(generator=g),
    "log_normal_": lambda g: ember.zeros(30).log_normal_(generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_seed_same_values_and_different_seeds_differ(name):
    sample = SAMPLERS[name]
    a = sample(ember.Generator().manual_seed(123))
    b = sample(ember.Generator().manual_seed(123))
    c = sample(ember.Generator().manual_seed(124))
    np.testing.assert_array_equal(values(a), values(b))
    assert not np.array_equal(values(a), values(c))
    # The default generator gives the same stream for the same seed.
    ember.manual_seed(123)
    np.testing.assert_array_equal(values(sample(None)), values(a))


@pytest.mark.parametrize("name", ["rand", "randn", "randint", "bernoulli", "normal", "multinomial"])
def test_values_do_not_depend_on_thread_count(name):
    big = {
        "rand": lambda g: ember.rand(300, 301, generator=g),
        "randn": lambda g: ember.randn(90001, generator=g),
        "randint": lambda g: ember.randint(0, 1000, (70000,), generator=g),
        "bernoulli": lambda g: ember.bernoulli(ember.full((70000,), 0.3), generator=g),
        "normal": lambda g: ember.normal(ember.zeros(300, 1), ember.ones(300), generator=g),
        "multinomial": lambda g: ember.multinomial(ember.ones(64, 50), 20, generator=g),
    }[name]
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = values(big(ember.Generator().manual_seed(7)))
        ember.set_num_threads(2)
        two = values(big(ember.Generator().manual_seed(7)))
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


def test_stream_continues_across_calls():
    # State is (seed, offset): two draws of 4 are the first and second half of one draw of 8.
    g = ember.Generator().manual_seed(99)
    first, second = ember.rand(4, generator=g), ember.rand(4, generator=g)
    whole = ember.rand(8, generator=ember.Generator().manual_seed(99))
    np.testing.assert_array_equal(np.concatenate([values(first), values(second)]), values(whole))


@pytest.mark.parametrize("skip", [0, 1, 2, 3])
def test_normal_pairs_at_any_offset(skip):
    # Normals come in Box-Muller pairs; every path and every split gives the same stream.
    gens = [ember.Generator().manual_seed(21) for _ in range(3)]
    for g in gens:
        ember.rand(skip, generator=g)
    whole = values(ember.randn(9, dtype=ember.float64, generator=gens[0]))
    tensor_path = values(ember.normal(ember.zeros(9, dtype=ember.float64), 1.0, generator=gens[1]))
    split = np.concatenate([values(ember.randn(n, dtype=ember.float64, generator=gens[2])) for n in (5, 1, 3)])
    np.testing.assert_array_equal(whole, tensor_path)
    np.testing.assert_array_equal(whole, split)
    assert len(set(whole.tolist())) == 9


def test_explicit_generator_leaves_default_alone():
    ember.manual_seed(5)
    state = ember.get_rng_state()
    ember.rand(10, generator=ember.Generator())
    assert ember.get_rng_state().tolist() == state.tolist()
    ember.rand(10)
    assert ember.get_rng_state().tolist() != state.tolist()


def test_get_set_state_replays():
    g = ember.Generator().manual_seed(2024)
    ember.randn(3, generator=g)
    state = g.get_state()
    assert state.dtype is ember.uint8 and state.shape == (5056,)
    a = ember.randn(6, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(values(ember.randn(6, generator=g)), values(a))
    # Global helpers.
    ember.manual_seed(3)
    s = ember.get_rng_state()
    x = ember.rand(5)
    ember.set_rng_state(s)
    np.testing.assert_array_equal(values(ember.rand(5)), values(x))


def test_seed_api():
    g = ember.Generator()
    assert g.initial_seed() == torch.Generator().initial_seed()
    assert g.device == ember.device("cpu")
    assert g.manual_seed(42) is g and g.initial_seed() == 42
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    assert ember.manual_seed(1.7) is ember.default_generator and ember.initial_seed() == 1
    s = ember.seed()
    assert isinstance(s, int) and ember.initial_seed() == s
    assert isinstance(g.seed(), int)


@pytest.mark.parametrize("call", [
    lambda m: m.Generator().manual_seed(1.5),
    lambda m: m.Generator().manual_seed("a"),
    lambda m: m.Generator().manual_seed(2**64),
    lambda m: m.Generator().manual_seed(-2**63 - 1),
    lambda m: m.Generator().set_state(m.zeros(16)),
    lambda m: m.Generator().set_state([1]),
    lambda m: m.Generator().set_state(m.zeros(3, dtype=m.uint8)),
    lambda m: m.set_rng_state(m.zeros(3)),
    lambda m: m.Generator(device="meta"),
    lambda m: m.rand(2, generator=3),
    lambda m: m.rand(2, generator=3, device="meta"),
    lambda m: m.randperm(3, generator="x", device="meta"),
])
def test_generator_errors_match_torch(call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(expected.type):
        call(ember)


# -- distributions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
def test_rand_range_and_moments(name):
    x = values(ember.rand(N, dtype=dtype(name), generator=ember.Generator().manual_seed(1)))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 0.02 and abs(x.var() - 1 / 12) < 0.01


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("low,high", [(-3.0, 5.0), (1e3, 1e3 + 1), (-1.0, 0.0)])
def test_uniform_range(name, low, high):
    g = ember.Generator().manual_seed(2)
    x = values(ember.zeros(N, dtype=dtype(name)).uniform_(low, high, generator=g))
    assert x.min() >= low and x.max() < high
    if name in ("float32", "float64"):
        assert abs(x.mean() - (low + high) / 2) < 0.03 * (high - low)


@pytest.mark.parametrize("name", FLOATS)
def test_randn_moments(name):
    x = values(ember.randn(N, dtype=dtype(name), generator=ember.Generator().manual_seed(3)))
    assert abs(x.mean()) < 0.05 and abs(x.std() - 1) < 0.05
    assert abs(np.mean(np.abs(x) < 1) - 0.6827) < 0.02  # shape, not only moments


def test_normal_overloads_moments_and_dtypes():
    g = ember.Generator().manual_seed(4)
    a = ember.normal(2.0, 3.0, (N,), generator=g)
    assert a.dtype is ember.float32 and abs(values(a).mean() - 2) < 0.1 and abs(values(a).std() - 3) < 0.1
    mean = ember.tensor([[-10.0], [10.0]], dtype=ember.float64)
    b = ember.normal(mean, ember.full((N // 2,), 0.5), generator=g)
    assert b.shape == (2, N // 2) and b.dtype is ember.float64
    vb = values(b)
    assert abs(vb[0].mean() + 10) < 0.05 and abs(vb[1].mean() - 10) < 0.05
    assert abs(vb.std(axis=1) - 0.5).max() < 0.03
    c = ember.normal(ember.full((N,), 1.0), 2.0, generator=g)
    assert abs(values(c).std() - 2) < 0.1
    d = ember.normal(5.0, ember.full((N,), 0.1, dtype=ember.float16), generator=g)
    assert d.dtype is ember.float16 and abs(values(d).mean() - 5) < 0.05
    zero_std = ember.normal(ember.arange(4.0), 0.0)
    np.testing.assert_array_equal(values(zero_std), [0, 1, 2, 3])


@pytest.mark.parametrize("mean,std", [
    ("t32", "t64"), ("t64", "t32"), ("t16", 1.0), (1.0, "t64"), ("t32", "t32_2x3"),
])
def test_normal_result_dtype_and_shape_match_torch(mean, std):
    def make(m, spec):
        if not isinstance(spec, str):
            return spec
        d = {"t16": m.float16, "t32": m.float32, "t64": m.float64, "t32_2x3": m.float32}[spec]
        return m.ones((2, 3) if spec.endswith("2x3") else (3,), dtype=d)

    e = ember.normal(make(ember, mean), make(ember, std))
    t = torch.normal(make(torch, mean), make(torch, std))
    assert tuple(e.shape) == tuple(t.shape) and e.dtype.name == str(t.dtype).split(".")[1]


def test_other_distributions_moments():
    g = ember.Generator().manual_seed(5)
    e = values(ember.zeros(N, dtype=ember.float64).exponential_(2.0, generator=g))
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02
    geo = values(ember.zeros(N, dtype=ember.int64).geometric_(0.25, generator=g))
    assert geo.min() >= 1 and abs(geo.mean() - 4) < 0.15 and np.all(geo == np.round(geo))
    ln = values(ember.zeros(N, dtype=ember.float64).log_normal_(1.0, 0.5, generator=g))
    assert abs(np.log(ln).mean() - 1) < 0.02 and abs(np.log(ln).std() - 0.5) < 0.02
    ca = values(ember.zeros(N, dtype=ember.float64).cauchy_(3.0, 2.0, generator=g))
    assert abs(np.median(ca) - 3) < 0.1 and abs(np.percentile(ca, 75) - 5) < 0.2


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("name", ["float32", "float64", "int64", "uint8", "bool"])
def test_bernoulli_scalar_p(p, name):
    x = values(ember.zeros(N, dtype=dtype(name)).bernoulli_(p, generator=ember.Generator().manual_seed(6)))
    assert set(np.unique(x)) <= {0.0, 1.0}
    assert abs(x.mean() - p) < 0.02


def test_bernoulli_tensor_probs():
    probs = ember.tensor([0.0, 0.1, 0.9, 1.0]).expand(N // 4, 4)
    x = values(ember.bernoulli(probs, generator=ember.Generator().manual_seed(7)))
    np.testing.assert_allclose(x.mean(axis=0), [0, 0.1, 0.9, 1], atol=0.02)
    # Broadcast p into an integer tensor; float p for bernoulli(input, p) keeps input's shape and dtype.
    y = ember.zeros(3, 4, dtype=ember.int32).bernoulli_(ember.tensor([1.0, 0.0, 1.0, 0.0]))
    assert y.tolist() == [[1, 0, 1, 0]] * 3
    z = ember.bernoulli(ember.zeros(2, 3, dtype=ember.float64), 1.0)
    assert z.dtype is ember.float64 and z.tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("name", ["int64", "int32", "int16", "int8", "uint8", "float32", "float16"])
def test_randint_range_and_coverage(name):
    x = values(ember.randint(-3 if name != "uint8" else 2, 9, (N,), dtype=dtype(name),
                             generator=ember.Generator().manual_seed(8)))
    low = -3 if name != "uint8" else 2
    assert set(np.unique(x)) == set(range(low, 9))
    assert abs(x.mean() - (low + 8) / 2) < 0.1


def test_randint_forms_and_defaults():
    assert ember.randint(10, (2, 3)).dtype is ember.int64
    assert ember.randint(10, (2, 3)).shape == (2, 3)
    assert ember.randint(3, 10, size=(4,)).shape == (4,)
    assert values(ember.randint(low=2, high=4, size=(100,))).min() >= 2
    assert ember.randint(high=1, size=(5,)).tolist() == [0] * 5
    assert ember.randint(10, []).shape == ()
    big = values(ember.randint(-2**63, 2**63 - 1, (1000,)))
    assert big.min() < -1e18 and big.max() > 1e18
    b = ember.randint(0, 2, (200,), dtype=ember.bool)
    assert b.dtype is ember.bool and set(b.tolist()) == {False, True}


@pytest.mark.parametrize("name,hi", [("uint8", 255), ("int8", 127), ("int16", 32767), ("bool", 1),
                                     ("float16", 2048), ("bfloat16", 256)])
def test_random_full_range(name, hi):
    x = values(ember.zeros(N, dtype=dtype(name)).random_(generator=ember.Generator().manual_seed(9)))
    assert x.min() >= 0 and x.max() <= hi and np.all(x == np.round(x))
    assert x.max() > hi * 0.9


def test_random_forms():
    g = ember.Generator().manual_seed(10)
    assert set(values(ember.zeros(500).random_(4, generator=g))) == {0, 1, 2, 3}
    assert set(values(ember.zeros(500).random_(-2, 2, generator=g))) == {-2, -1, 0, 1}
    x = values(ember.zeros(500, dtype=ember.int64).random_(5, None, generator=g))
    assert x.min() >= 5 and x.max() > 2**62


def test_like_factories():
    src = ember.zeros(3, 4, dtype=ember.float64)
    for fn in (ember.rand_like, ember.randn_like):
        r = fn(src)
        assert r.shape == (3, 4) and r.dtype is ember.float64
    assert ember.rand_like(src, dtype=ember.float16).dtype is ember.float16
    ri = ember.randint_like(ember.zeros(50, dtype=ember.int32), 3, 6)
    assert ri.dtype is ember.int32 and set(ri.tolist()) <= {3, 4, 5}
    assert set(values(ember.randint_like(ember.zeros(50), 2))) <= {0.0, 1.0}
    assert set(values(ember.randint_like(ember.zeros(50), high=2))) <= {0.0, 1.0}


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
@pytest.mark.parametrize("name", ["int64", "int32", "float32"])
def test_randperm_is_a_permutation(n, name):
    p = ember.randperm(n, dtype=dtype(name), generator=ember.Generator().manual_seed(n))
    assert p.dtype is dtype(name) and p.shape == (n,)
    assert sorted(values(p).tolist()) == list(range(n))


def test_randperm_is_uniform_over_first_position():
    g = ember.Generator().manual_seed(11)
    firsts = np.array([ember.randperm(4, generator=g).tolist()[0] for _ in range(2000)])
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 2000, 0.25, atol=0.04)


# -- multinomial ----------------------------------------------------------------------------------------

def test_multinomial_with_replacement_frequencies():
    probs = ember.tensor([1.0, 0.0, 3.0, 6.0])  # unnormalized weights
    x = values(ember.multinomial(probs, N, replacement=True, generator=ember.Generator().manual_seed(12)))
    np.testing.assert_allclose(np.bincount(x.astype(int), minlength=4) / N, [0.1, 0, 0.3, 0.6], atol=0.015)


def test_multinomial_without_replacement():
    g = ember.Generator().manual_seed(13)
    probs = ember.tensor([[0.0, 1.0, 2.0, 0.0, 3.0], [5.0, 5.0, 0.0, 1.0, 1.0]])
    for _ in range(20):
        rows = ember.multinomial(probs, 3, generator=g).tolist()
        assert sorted(rows[0]) == [1, 2, 4]
        assert len(set(rows[1])) == 3 and 2 not in rows[1]
    # The first draw follows the weights.
    firsts = np.array([r[0] for r in ember.multinomial(ember.tensor([1.0, 3.0]).expand(N, 2), 1,
                                                       generator=g).tolist()])
    assert abs(firsts.mean() - 0.75) < 0.02
    # More samples than non-zero weights: the rest are zero-weight categories (as PyTorch).
    assert sorted(ember.multinomial(ember.tensor([1.0, 0.0, 0.0]), 3).tolist()) == [0, 1, 2]


def test_multinomial_without_replacement_pair_distribution():
    # P(first=i, second=j) = p_i * p_j / (1 - p_i) for sampling without replacement.
    w = np.array([1.0, 2.0, 3.0]) / 6
    draws = ember.multinomial(ember.tensor(w.tolist()).expand(N, 3), 2, generator=ember.Generator().manual_seed(15))
    pairs = np.array(draws.tolist())
    for i in range(3):
        for j in range(3):
            if i != j:
                observed = np.mean((pairs[:, 0] == i) & (pairs[:, 1] == j))
                assert abs(observed - w[i] * w[j] / (1 - w[i])) < 0.015


@pytest.mark.parametrize("shape,k,repl", [((5,), 3, False), ((2, 6), 4, True), ((0, 3), 2, False),
                                          ((3, 2), 5, True)])
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_multinomial_shapes_match_torch(shape, k, repl, name):
    e = ember.multinomial(ember.ones(shape, dtype=dtype(name)), k, repl)
    t = torch.multinomial(torch.ones(shape, dtype=getattr(torch, name)), k, repl)
    assert tuple(e.shape) == tuple(t.shape) and e.dtype is ember.int64


# -- meta, layouts, out= ---------------------------------------------------------------------------------

META_CASES = {
    "rand": lambda m: m.rand(2, 3, device="meta", dtype=m.float64),
    "randn": lambda m: m.randn(4, device="meta"),
    "randint": lambda m: m.randint(0, 5, (3, 2), device="meta", dtype=m.int32),
    "randperm": lambda m: m.randperm(6, device="meta"),
    "normal": lambda m: m.normal(m.zeros(3, 1, device="meta"), m.ones(4, device="meta")),
    "normal_ff": lambda m: m.normal(0.0, 1.0, (2, 2), device="meta"),
    "bernoulli": lambda m: m.bernoulli(m.zeros(3, device="meta", dtype=m.float16)),
    "multinomial": lambda m: m.multinomial(m.ones(2, 5, device="meta"), 3),
    "uniform_": lambda m: m.zeros(5, device="meta").uniform_(),
    "rand_like": lambda m: m.rand_like(m.zeros(2, 2, device="meta")),
}


@pytest.mark.parametrize("name", sorted(META_CASES))
def test_meta_device(name):
    state = ember.get_rng_state().tolist()
    e, t = META_CASES[name](ember), META_CASES[name](torch)
    assert e.device.type == "meta" and tuple(e.shape) == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).split(".")[1]
    assert ember.get_rng_state().tolist() == state  # nothing was drawn


@pytest.mark.parametrize("method,args", [("uniform_", (-1.0, 1.0)), ("normal_", ()), ("bernoulli_", (0.5,)),
                                         ("random_", (0, 100)), ("exponential_", ()), ("geometric_", (0.5,))])
def test_inplace_on_views_matches_torch(method, args):
    # A non-contiguous target is filled in memory order, as PyTorch's TensorIterator visits it.
    results = []
    for m in (ember, torch):
        base = m.zeros(6, 5, dtype=m.float64)
        view = base.t().narrow(0, 1, 3)  # non-contiguous (3, 6) view
        out = getattr(view, method)(*args, generator=m.Generator().manual_seed(14))
        assert out is view
        results.append(base.numpy())
    np.testing.assert_array_equal(results[0], results[1])
    assert not results[0][:, [0, 4]].any()


def _same(e, t) -> bool:
    t = t.detach()
    e = e.detach()
    if t.dtype in (torch.float16, torch.bfloat16):
        t, e = t.float(), e.float()
    return tuple(e.shape) == tuple(t.shape) and np.array_equal(e.numpy(), t.numpy())


# Each case runs after manual_seed(seed) in both libraries and must give the same bits.
STREAM_CASES = {
    "rand": lambda m: m.rand(3, 5),
    "rand_f64": lambda m: m.rand(7, dtype=m.float64),
    "rand_f16": lambda m: m.rand(9, dtype=m.float16),
    "rand_bf16": lambda m: m.rand(9, dtype=m.bfloat16),
    "uniform_range": lambda m: m.empty(50).uniform_(-0.37, 0.53),
    "uniform_range_f16": lambda m: m.empty(50, dtype=m.float16).uniform_(-3, 5),
    "randn_fill": lambda m: m.randn(1000),
    "randn_tail": lambda m: m.randn(37),
    "randn_small_cached": lambda m: m.cat([m.randn(5), m.randn(3), m.randn(17), m.randn(3, dtype=m.float64)]),
    "randn_f64": lambda m: m.randn(33, dtype=m.float64),
    "randn_f16": lambda m: m.randn(33, dtype=m.float16),
    "randn_bf16": lambda m: m.randn(7, dtype=m.bfloat16),
    "normal_transposed": lambda m: m.empty(5, 8).t().normal_(),
    "normal_scalar": lambda m: m.normal(2.0, 3.0, (40,)),
    "normal_tensors": lambda m: m.normal(m.arange(20.0), m.ones(20)),
    "randint": lambda m: m.randint(0, 10, (50,)),
    "randint_wide": lambda m: m.randint(-2**40, 2**40, (50,)),
    "randint_i32": lambda m: m.randint(3, 100000, (50,), dtype=m.int32),
    "random_i64": lambda m: m.empty(20, dtype=m.int64).random_(),
    "random_f32": lambda m: m.empty(20).random_(),
    "random_u8": lambda m: m.empty(20, dtype=m.uint8).random_(),
    "random_full_range": lambda m: m.empty(20, dtype=m.int64).random_(-2**63, None),
    "random_from": lambda m: m.empty(20, dtype=m.int16).random_(5, None),
    "randperm": lambda m: m.randperm(100),
    "bernoulli_tensor": lambda m: m.bernoulli(m.full((50,), 0.3)),
    "bernoulli_tensor_f64": lambda m: m.bernoulli(m.full((50,), 0.3, dtype=m.float64)),
    "exponential": lambda m: m.empty(50).exponential_(),
    "geometric": lambda m: m.empty(50).geometric_(0.3),
    "cauchy": lambda m: m.empty(50).cauchy_(),
    "log_normal": lambda m: m.empty(50).log_normal_(),
    "linear_init": lambda m: m.nn.Linear(10, 5).weight,
    "conv_init": lambda m: m.nn.Conv2d(3, 8, 3).weight,
    "embedding_init": lambda m: m.nn.Embedding(10, 4).weight,
    "lstm_init": lambda m: m.cat([p.flatten() for p in m.nn.LSTM(4, 6, 2).parameters()]),
    "xavier_uniform": lambda m: m.nn.init.xavier_uniform_(m.empty(6, 7)),
    "kaiming_normal": lambda m: m.nn.init.kaiming_normal_(m.empty(6, 7)),
    "rand_like": lambda m: m.rand_like(m.zeros(3, 4)),
    "randn_like": lambda m: m.randn_like(m.zeros(30)),
    "randint_like": lambda m: m.randint_like(m.zeros(30), 7),
    "multinomial_replacement": lambda m: m.multinomial(m.rand(4, 30), 7, replacement=True),
    "multinomial_replacement_f64": lambda m: m.multinomial(m.rand(30, dtype=m.float64), 9, replacement=True),
    "multinomial_topk": lambda m: m.multinomial(m.rand(5, 30), 10),
    "multinomial_one": lambda m: m.multinomial(m.rand(5, 30), 1, replacement=True),
    "poisson": lambda m: m.poisson(m.linspace(0, 300, 400)),
    "poisson_f64": lambda m: m.poisson(m.linspace(0, 30, 100, dtype=m.float64)),
    "standard_gamma": lambda m: m._standard_gamma(m.linspace(0, 30, 300)),
    "standard_gamma_f64": lambda m: m._standard_gamma(m.linspace(0, 3, 300, dtype=m.float64)),
    "binomial": lambda m: m.binomial(m.linspace(0, 5000, 300), m.linspace(0, 1, 300)),
    "binomial_f64": lambda m: m.binomial(m.linspace(0, 80, 300, dtype=m.float64),
                                         m.linspace(1, 0, 300, dtype=m.float64)),
    # Dropout draws its mask into empty_like(input): a strided input's memory order.
    "dropout_transposed": lambda m: m.dropout(m.arange(120.).reshape(3, 5, 8).transpose(0, 1), 0.3, True),
    "dropout_permuted": lambda m: m.dropout(m.ones(2, 3, 4, 5).permute(0, 2, 1, 3), 0.6, True),
    "dropout_channels_last": lambda m: m.dropout(
        m.ones(2, 3, 4, 5).contiguous(memory_format=m.channels_last), 0.4, True),
    "dropout_inplace_transposed": lambda m: m.dropout_(m.ones(6, 7).t(), 0.5, True),
    "alpha_dropout_transposed": lambda m: m.alpha_dropout(m.ones(6, 7).t(), 0.5, True),
    "dropout_sliced": lambda m: m.dropout(m.ones(6, 8)[:, ::2], 0.5, True),
    "native_dropout_transposed": lambda m: m.native_dropout(m.ones(5, 7).t(), 0.5, True)[0],
    "multinomial_transposed": lambda m: m.multinomial(m.rand(6, 4).t(), 3),
    "multinomial_transposed_one": lambda m: m.multinomial(m.rand(6, 4).t(), 1),
}


@pytest.mark.parametrize("name", sorted(STREAM_CASES))
@pytest.mark.parametrize("seed", [0, 2**40 + 7])
def test_seeded_stream_matches_torch(name, seed):
    torch.manual_seed(seed)
    t = STREAM_CASES[name](torch)
    ember.manual_seed(seed)
    e = STREAM_CASES[name](ember)
    assert _same(e, t)
    assert np.array_equal(ember.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_large_randn_matches_torch():
    # The 16-wide float32 fill (vector-library log/sin/cos formulas) over many blocks.
    torch.manual_seed(3)
    ember.manual_seed(3)
    n = (1 << 18) + 5
    assert np.array_equal(ember.randn(n).numpy(), torch.randn(n).numpy())


def test_generator_objects_and_state_interop():
    g_t, g_e = torch.Generator().manual_seed(42), ember.Generator().manual_seed(42)
    assert _same(ember.rand(5, generator=g_e), torch.rand(5, generator=g_t))
    assert g_e.get_state().numpy().tobytes() == g_t.get_state().numpy().tobytes()
    # A state saved by torch (here with a cached normal) loads in ember and continues the stream.
    torch.manual_seed(5)
    torch.randn(3)
    ember.set_rng_state(ember.tensor(torch.get_rng_state().numpy()))
    assert _same(ember.randn(7), torch.randn(7))
    assert ember.get_rng_state().numpy().tobytes() == torch.get_rng_state().numpy().tobytes()
    with pytest.raises(RuntimeError, match="Invalid mt19937 state"):
        ember.set_rng_state(ember.zeros(5056, dtype=ember.uint8))


def test_pickled_generator_continues():
    import copy
    import pickle
    g = ember.Generator().manual_seed(9)
    ember.rand(3, generator=g)
    a, b = pickle.loads(pickle.dumps(g)), copy.deepcopy(g)
    x = ember.rand(4, generator=a).numpy()
    assert np.array_equal(x, ember.rand(4, generator=g).numpy())
    assert np.array_equal(x, ember.rand(4, generator=b).numpy())


def test_fork_rng_matches_torch():
    torch.manual_seed(1)
    ember.manual_seed(1)
    with torch.random.fork_rng():
        torch.rand(5)
    with ember.random.fork_rng():
        ember.rand(5)
    assert _same(ember.rand(3), torch.rand(3))


def test_out_and_requires_grad_defaults():
    out = ember.zeros(2, 3)
    r = ember.rand(2, 3, out=out)
    assert r is out and values(out).max() < 1
    assert not ember.rand(2).requires_grad
    assert ember.rand(size=(2, 3)).shape == (2, 3) and ember.rand([]).shape == ()


# -- errors (types checked against PyTorch) ----------------------------------------------------------------

ERRORS = [
    lambda m: m.randint(5, 5, (3,)),
    lambda m: m.randint(6, 2, (3,)),
    lambda m: m.randint(0, 300, (3,), dtype=m.uint8),
    lambda m: m.randint(-1, 3, (3,), dtype=m.uint8),
    lambda m: m.randint(10, 3),
    lambda m: m.rand(3, dtype=m.int64),
    lambda m: m.randn(3, dtype=m.int32),
    lambda m: m.rand(-1),
    lambda m: m.rand_like(m.zeros(2, dtype=m.int32)),
    lambda m: m.bernoulli(m.tensor([0.5, 1.5])),
    lambda m: m.bernoulli(m.tensor([0.5, -0.2])),
    lambda m: m.bernoulli(m.tensor([0.5, 0.2]), p=1.5),
    lambda m: m.zeros(3).bernoulli_(-0.5),
    lambda m: m.bernoulli(m.tensor([1, 0])),
    lambda m: m.multinomial(m.tensor([0.5, -0.2]), 1),
    lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
    lambda m: m.multinomial(m.tensor([1.0, float("nan")]), 1),
    lambda m: m.multinomial(m.tensor([1.0, float("inf")]), 1),
    lambda m: m.multinomial(m.tensor([1.0, 0.0, 0.0]), 4),
    lambda m: m.multinomial(m.tensor([1.0, 1.0]), 0),
    lambda m: m.multinomial(m.tensor([1, 1]), 1),
    lambda m: m.multinomial(m.ones(2, 2, 2), 1),
    lambda m: m.multinomial(m.ones(()), 1),
    lambda m: m.normal(0.0, -1.0, (3,)),
    lambda m: m.normal(m.zeros(3), -1.0),
    lambda m: m.normal(m.zeros(3), m.tensor([1.0, -1.0, 1.0])),
    lambda m: m.normal(m.zeros(3), m.ones(4)),
    lambda m: m.normal(m.zeros(3, dtype=m.int64), 1.0),
    lambda m: m.normal(1.0, m.ones(3, dtype=m.int64)),
    lambda m: m.randperm(-1),
    lambda m: m.randperm(257, dtype=m.uint8),
    lambda m: m.randperm(3000, dtype=m.float16),
    lambda m: m.randperm(5, dtype=m.bool),
    lambda m: m.zeros(3).uniform_(2, 1),
    lambda m: m.zeros(3).uniform_(0, math.inf),
    lambda m: m.zeros(3, dtype=m.int64).uniform_(0, 1),
    lambda m: m.zeros(3).normal_(0, -1),
    lambda m: m.zeros(3).exponential_(0),
    lambda m: m.zeros(3, dtype=m.int64).exponential_(0.5),
    lambda m: m.zeros(3).geometric_(1),
    lambda m: m.zeros(3).geometric_(0),
    lambda m: m.zeros(3).cauchy_(0, -1),
    lambda m: m.zeros(3).log_normal_(0, 0),
    lambda m: m.zeros(3).random_(5, 2),
    lambda m: m.zeros(3, dtype=m.int8).random_(-200, 3),
    lambda m: m.zeros(1).expand(3).normal_(),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(case):
    call = ERRORS[case]
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(expected.type):
        call(ember)


def test_scalar_box_muller_matches_vector_form():
    # Machines without AVX2/FMA run the scalar form of the float32 Box-Muller block: it must
    # give the vector form's bits (which match torch, test_large_randn_matches_torch).
    u = ember.rand(4096, generator=ember.Generator().manual_seed(8))
    u[0] = 0.0  # log(1 - 0) and sin/cos(0) edges
    for block in u.reshape(-1, 16):
        a, b = block.clone(), block.clone()
        ember._C.box_muller16_(a, True)
        ember._C.box_muller16_(b, False)
        assert np.array_equal(a.numpy(), b.numpy())


def test_sampled_tensors_start_at_version_zero():
    """A fresh sampled tensor's version counter reads 0 (PyTorch fills it below the counter); out=
    and the in-place samplers are writes. Every factory and sampler, against PyTorch's counts."""
    import torch

    import ember

    def versions(lib):
        x = lib.zeros(3)
        lib.randn(3, out=x)
        got = [x._version, lib.randn(3)._version, lib.rand(2)._version, lib.randint(0, 5, (3,))._version,
               lib.rand_like(x)._version, lib.randn_like(x)._version, lib.randint_like(x, 5)._version,
               lib.normal(0.0, 1.0, (3,))._version, lib.normal(x, 1.0)._version, lib.normal(x, x.abs())._version,
               lib.randn(3, requires_grad=True)._version, lib.randn(2, dtype=lib.complex64)._version,
               lib.rand(2, dtype=lib.complex64)._version, lib.randperm(4)._version,
               lib.bernoulli(lib.full((3,), 0.5))._version, lib.bernoulli(x.clamp(0, 1), 0.3)._version,
               lib.multinomial(lib.ones(4), 2)._version, lib.poisson(lib.ones(3))._version,
               lib.nn.functional.dropout(x, 0.5)._version]
        w = lib.empty(3)
        for name, args in [("uniform_", ()), ("normal_", ()), ("bernoulli_", ()), ("exponential_", ()),
                           ("geometric_", (0.5,)), ("cauchy_", ()), ("log_normal_", ()), ("random_", ())]:
            before = w._version
            getattr(w, name)(*args)
            got.append(w._version - before)
        lib.manual_seed(0)  # trunc_normal_ writes again where a draw is rejected: the same draws on both sides
        for name in ["uniform_", "normal_", "xavier_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_"]:
            w = lib.empty(4, 4)
            getattr(lib.nn.init, name)(w)
            got.append(w._version)
        got += [p._version for p in lib.nn.Linear(3, 2).parameters()]
        return got

    assert versions(ember) == versions(torch)
