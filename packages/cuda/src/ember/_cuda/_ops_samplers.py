"""The samplers beyond uniform_/normal_/bernoulli_ (``_random``) on CUDA: exponential_,
geometric_, log_normal_, cauchy_ and bernoulli_ with a tensor of probabilities, by the inverse
CDF of a uniform draw (or the exp of a normal one) on the device's counter-based stream;
normal with tensor mean/std, random_ (and so randint), randperm (a sort of random keys) and
poisson (rounds of uniform draws over the elements still pending: multiplication below rate 10,
Hormann's transformed rejection PTRS, PyTorch's method, from 10; one host sync per round),
_standard_gamma (Marsaglia and Tsang's rejection, PyTorch's method, in rounds the same way) and binomial
(inversion below count * p = 10, Hormann's BTRS from 10, PyTorch's methods, in rounds the same way).

The core's checks run first, so errors match the CPU's. Written with dispatched ops only (the
draws through ``uniform_``/``normal_``), so the same code samples correctly on any device; values
differ from PyTorch's (its own generator), the distributions do not.
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.random import samplers as core
from ember._src.tensor import new_empty_tensor


def _uniform(self, generator):
    """Uniform [0, 1) draws of self's shape, in float32 (float64 for a float64 self)."""
    dtype = dt.float64 if self.dtype is dt.float64 else dt.float32
    return new_empty_tensor(self._shape, dtype, self._device).uniform_(0.0, 1.0, generator=generator)


def _store(self, values):
    """self <- values (a fresh draw of self's shape) as the sampler's write: bumped as the CPU kernels
    bump (not when a factory fills a fresh result: ``fill_fresh``, PyTorch's _version 0)."""
    from ._ops_copy import device_copy

    device_copy(self, values)
    core.bump_written(self)
    return self


def _exponential(self, lambd=1.0, *, generator=None):
    core._check_exponential(self, lambd)
    return _store(self, (-_uniform(self, generator)).log1p() * (-1.0 / lambd))


def _geometric(self, p, *, generator=None):
    core._check_geometric(self, p)
    # Trials up to the first success: ceil(log(1 - u) / log(1 - p)), at least 1.
    draws = ((-_uniform(self, generator)).log1p() / math.log1p(-p)).ceil().clamp(min=1.0)
    return _store(self, draws)


def _log_normal(self, mean=1.0, std=2.0, *, generator=None):
    core._check_log_normal(self, mean, std)
    dtype = dt.float64 if self.dtype is dt.float64 else dt.float32
    normal = new_empty_tensor(self._shape, dtype, self._device).normal_(mean, std, generator=generator)
    return _store(self, normal.exp())


def _cauchy(self, median=0.0, sigma=1.0, *, generator=None):
    core._check_cauchy(self, median, sigma)
    return _store(self, ((_uniform(self, generator) - 0.5) * math.pi).tan() * sigma + median)


def _bernoulli_tensor(self, p, *, generator=None):
    core._check_bernoulli_tensor(self, p)
    if p._device is not self._device:
        p = p.to(self._device)
    return _store(self, _uniform(self, generator) < p.expand(self._shape))


def _normal_tensor(mean, std, *, generator=None, dtype=None):
    from ._ops_index import assert_async

    dtype = dtype or mean.dtype
    shape = core._normal_result(mean, std, dtype)
    if std._device is not mean._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{mean._device} and {std._device}!")
    work = dt.float64 if dtype is dt.float64 else dt.float32
    if std.numel():
        assert_async(std < 0, "normal expects all elements of std >= 0.0")
    noise = new_empty_tensor(shape, work, mean._device).normal_(0.0, 1.0, generator=generator)
    return (mean.to(work) + std.to(work) * noise).to(dtype)


def _randperm(n, *, generator=None, dtype=None, device=None):
    """A random permutation as the stable argsort of 31 random bits per position (two uniform
    draws: 15 and 16 bits), ties (rare) broken by position."""
    from ember._src.random_factories import _check_randperm

    dtype = dtype or dt.int64
    _check_randperm(n, dtype)
    if n == 0:
        return new_empty_tensor((0,), dtype, device)
    u = new_empty_tensor((2, n), dt.float32, device).uniform_(0.0, 1.0, generator=generator)
    keys = (u[0] * 32768.0).floor().to(dt.int32) * 65536 + (u[1] * 65536.0).floor().to(dt.int32)
    return keys.sort(stable=True)[1].to(dtype)


def _random(self, low=0, high=None, *, generator=None):
    """Integers uniform in [low, high) (high None: up to the largest integer the dtype holds
    exactly): floor(u * span) from a float64 draw for spans of up to 2**53, else 63 bits from two
    draws (and one more bit for a span past 2**63), reduced modulo the span."""
    core._check_random(self, low, high)
    if high is None:
        high = 2 if self.dtype is dt.bool else core._int_bounds(self.dtype)[1] + 1
    span = high - low
    u = new_empty_tensor((3,) + tuple(self._shape), dt.float64, self._device).uniform_(0.0, 1.0, generator=generator)
    if span <= 1 << 53:
        r = (u[0] * float(span)).floor().to(dt.int64)
    else:
        r = (u[0] * 2.0 ** 31).floor().to(dt.int64) * (1 << 32) + (u[1] * 2.0 ** 32).floor().to(dt.int64)
        if span > 1 << 63:  # the whole int64 range: one more random bit, wrapping around
            r = r * 2 + (u[2] < 0.5).to(dt.int64)
        elif span < 1 << 63:
            r = r.remainder(span)
    return _store(self, r + low if low else r)


def _poisson(self, generator=None):
    """Poisson draws of rate ``self`` (the CPU kernel's checks and results for rates 0, NaN and inf).
    Each round draws uniforms for the whole tensor and settles the elements still pending; a rate
    below 10 multiplies uniforms until their product falls below exp(-rate) (Knuth; ~rate + 1
    rounds), a larger one takes PTRS's rounds (~1.1 on average). Rounds end when no element is
    pending (one sync each, as the CPU kernel's rate check)."""
    from ember._src.ops.random import counting

    counting._poisson_meta(self)
    rates = self.to(dt.float64)
    if not rates.numel():
        return new_empty_tensor(self._shape, self.dtype, self._device)
    if bool(((rates < 0) | rates.isnan()).any().item()):  # a NaN rate too, as the CPU kernel
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    finite = rates.isfinite()
    out = rates.where(~finite, 0.0)  # NaN and inf rates give themselves, as the CPU kernel's
    small = finite & (rates > 0) & (rates < 10)
    if bool(small.any().item()):
        limit = (-rates).exp()
        prod = ember_ones(rates)
        k = ember_zeros(rates)
        pending = small
        while bool(pending.any().item()):
            prod = prod.where(~pending, prod * new_empty_tensor(self._shape, dt.float64, self._device).uniform_(
                0.0, 1.0, generator=generator))
            go = pending & (prod > limit)
            k = k.where(~go, k + 1.0)
            pending = go
        out = out.where(~small, k)
    large = finite & (rates >= 10)
    if bool(large.any().item()):
        lam = rates.where(large, 10.0)
        slam, loglam = lam.sqrt(), lam.log()
        b = slam * 2.53 + 0.931
        a = b * 0.02483 - 0.059
        invalpha = (b - 3.4).reciprocal() * 1.1328 + 1.1239
        vr = 0.9277 - (b - 2.0).reciprocal() * 3.6224
        k = ember_zeros(rates)
        pending = large
        while bool(pending.any().item()):
            u = new_empty_tensor((2,) + tuple(self._shape), dt.float64, self._device).uniform_(0.0, 1.0,
                                                                                                generator=generator)
            us_ = u[0] - 0.5
            v = u[1]
            us = 0.5 - us_.abs()
            kk = ((a * 2.0 / us + b) * us_ + lam + 0.43).floor()
            quick = (us >= 0.07) & (v <= vr)
            reject = (kk < 0) | ((us < 0.013) & (v > us))
            bound = -lam + kk * loglam - (kk.clamp(min=0.0) + 1.0).lgamma()
            slow = v.log() + invalpha.log() - (a / (us * us) + b).log() <= bound
            accept = pending & (quick | (~reject & slow))
            k = k.where(~accept, kk)
            pending = pending & ~accept
        out = out.where(~large, k)
    return out.to(self.dtype)


_TINY = {dt.float32: 1.1754943508222875e-38, dt.float64: 2.2250738585072014e-308}


def _standard_gamma(self, generator=None):
    """Gamma(self, 1) draws: Marsaglia and Tsang's rejection (d = a - 1/3, v = (1 + c x)^3 of a normal
    x, accepted when log(u) < x^2 / 2 + d - d v + d log(v)), in rounds over the pending elements; a
    shape below 1 draws at a + 1 and scales by u^(1/a). As the CPU kernel: results at least the
    dtype's smallest normal (also for shapes <= 0 and NaN), inf for an infinite shape."""
    from ember._src.ops.random import counting

    counting._standard_gamma_meta(self)
    if not self.numel():
        return new_empty_tensor(self._shape, self.dtype, self._device)
    a = self.to(dt.float64)
    valid = (a > 0) & a.isfinite()
    boost = valid & (a < 1)
    aa = a.where(valid, 1.0)
    aa = (aa + 1.0).where(boost, aa)
    d = aa - 1.0 / 3.0
    c = (d * 9.0).rsqrt()
    val = ember_zeros(a)
    pending = valid
    while bool(pending.any().item()):
        x = new_empty_tensor(self._shape, dt.float64, self._device).normal_(0.0, 1.0, generator=generator)
        u = new_empty_tensor(self._shape, dt.float64, self._device).uniform_(0.0, 1.0, generator=generator)
        v = (x * c + 1.0) ** 3
        ok = pending & (v > 0) & (u.log() < x * x * 0.5 + d - d * v + d * v.clamp(min=_TINY[dt.float64]).log())
        val = val.where(~ok, d * v)
        pending = pending & ~ok
    if bool(boost.any().item()):
        u = new_empty_tensor(self._shape, dt.float64, self._device).uniform_(0.0, 1.0, generator=generator)
        val = val.where(~boost, val * u ** a.where(boost, 1.0).reciprocal())
    inf = a == float("inf")
    val = val.where(~inf, float("inf"))
    return val.to(self.dtype).clamp(min=_TINY[self.dtype])


# log(k!) - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2] for k = 0..9 (BTRS's Stirling tail; the CPU kernel's)
_BINOMIAL_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _binomial_tail(k, table):
    kp1 = k + 1.0
    kp1sq = kp1 * kp1
    formula = ((1.0 / 360 - (1.0 / 1260) / kp1sq) / kp1sq * -1.0 + 1.0 / 12) / kp1
    small = (k >= 0) & (k < 10)
    return formula.where(~small, table[k.where(small, 0.0).to(dt.int64)])


def _binomial(count, prob, generator=None):
    """Binomial draws with the CPU kernel's cases: 0 for a count <= 0 or a probability <= 0, NaN for a NaN
    count, the count for a probability >= 1, NaN for a NaN probability; a probability above 1/2 draws
    count - Binomial(count, 1 - p). Draws: the inversion (sum of geometric waiting times until they pass
    the count: ~count * p + 1 rounds) below count * p = 10, Hormann's BTRS from 10 (~1.2 rounds), each
    round over the elements still pending, one host sync per round. An infinite count with 0 < p < 1
    gives NaN or inf as the CPU kernel's BTRS does (its formulas, not a special case)."""
    from ember._src.ops.random import counting

    result = counting._binomial_meta(count, prob)
    shape, dtype, device = tuple(result._shape), count.dtype, count._device
    if not result.numel():
        return new_empty_tensor(shape, dtype, device)
    count_t, prob_t = count.expand(shape), prob.expand(shape)
    c, p = count_t.to(dt.float64), prob_t.to(dt.float64)
    zero = (c <= 0) | (p <= 0)
    nan_count = ~zero & c.isnan()
    full = ~zero & ~nan_count & (p >= 1)
    drawn = ~zero & ~nan_count & (p < 1)  # (a NaN probability is in none: NaN)
    high = drawn & (p > 0.5)
    q_t = (1.0 - prob_t).where(high, prob_t)  # the probability drawn with, in the dtype as the CPU's
    btrs = drawn & (count_t * q_t >= 10.0)
    inversion = drawn & ~btrs
    q = q_t.to(dt.float64).where(drawn, 0.5)
    n = c.where(drawn, 1.0)
    k = ember_zeros(c)
    if bool(inversion.any().item()):
        logq = (-q_t).log1p().to(dt.float64).where(inversion, -1.0)
        waited = ember_zeros(c)
        pending = inversion
        while bool(pending.any().item()):
            u = new_empty_tensor(shape, dt.float64, device).uniform_(0.0, 1.0, generator=generator)
            waited = waited.where(~pending, waited + (u.log() / logq).ceil())
            go = pending & (waited <= n)
            k = k.where(~go, k + 1.0)
            pending = go
    if bool(btrs.any().item()):
        import ember

        table = ember.tensor(_BINOMIAL_TAIL, dtype=dt.float64, device=device)
        stddev = (n * q * (1.0 - q)).sqrt()
        b = stddev * 2.53 + 1.15
        a = (b * 0.0248 - 0.0873) + q * 0.01
        cc = n * q + 0.5
        v_r = 0.92 - b.reciprocal() * 4.2
        r = q / (1.0 - q)
        alpha = (b.reciprocal() * 5.1 + 2.83) * stddev
        m = ((n + 1.0) * q).floor()
        fixed = ((m + 0.5) * ((m + 1.0) / (r * (n - m + 1.0))).log() + _binomial_tail(m, table)
                 + _binomial_tail(n - m, table))
        pending = btrs
        while bool(pending.any().item()):
            uv = new_empty_tensor((2,) + shape, dt.float64, device).uniform_(0.0, 1.0, generator=generator)
            u, v = uv[0] - 0.5, uv[1]
            us = 0.5 - u.abs()
            kk = ((a * 2.0 / us + b) * u + cc).floor()
            inside = ~((kk < 0) | (kk > n))
            quick = (us >= 0.07) & (v <= v_r)
            nk1 = n - kk + 1.0
            bound = (fixed + (n + 1.0) * ((n - m + 1.0) / nk1).log() + (kk + 0.5) * (r * nk1 / (kk + 1.0)).log()
                     - _binomial_tail(kk, table) - _binomial_tail(n - kk, table))
            slow = (v * alpha / (a / (us * us) + b)).log() <= bound
            accept = pending & inside & (quick | slow)
            k = k.where(~accept, kk)
            pending = pending & ~accept
    out = (c - k).where(high, k)
    out = out.where(drawn, float("nan")).where(~full, c).where(~zero, 0.0)
    return out.to(dtype)


def ember_zeros(like):
    return new_empty_tensor(like._shape, like.dtype, like._device).zero_()


def ember_ones(like):
    return new_empty_tensor(like._shape, like.dtype, like._device).fill_(1.0)


def register() -> None:
    OPS["poisson"].kernels["cuda"] = _poisson
    OPS["binomial"].kernels["cuda"] = _binomial
    OPS["_standard_gamma"].kernels["cuda"] = _standard_gamma
    OPS["random_"].kernels["cuda"] = _random
    OPS["normal.Tensor_Tensor"].kernels["cuda"] = _normal_tensor
    OPS["randperm"].kernels["cuda"] = _randperm
    OPS["exponential_"].kernels["cuda"] = _exponential
    OPS["geometric_"].kernels["cuda"] = _geometric
    OPS["log_normal_"].kernels["cuda"] = _log_normal
    OPS["cauchy_"].kernels["cuda"] = _cauchy
    OPS["bernoulli_.Tensor"].kernels["cuda"] = _bernoulli_tensor
