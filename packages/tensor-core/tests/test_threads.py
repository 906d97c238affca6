"""Ops called from several Python threads at once give the same results as run serially.

Kernels release the GIL, so these threads really run native code side by side: OpenMP teams
of their own, OpenBLAS calls (whose thread count ember switches around OpenMP regions),
thread-local sort scratch, and per-generator random streams. Each test computes reference
results serially, then has every thread recompute its share at once (started together by a
barrier, several rounds) and compares bit for bit.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import ember

THREADS = 4
ROUNDS = 3


def _run_threads(work, n_threads: int = THREADS) -> list:
    """Runs work(i) on n_threads threads started together; returns the results in order."""
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list = []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return all(_same(x, y) for x, y in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.numpy(), b.numpy(), equal_nan=True)


def _check_concurrent(make_inputs, fn):
    inputs = [make_inputs(i) for i in range(THREADS)]
    expected = [fn(*args) for args in inputs]

    def work(i):
        return [fn(*inputs[i]) for _ in range(ROUNDS)]

    for i, outs in enumerate(_run_threads(work)):
        for out in outs:
            assert _same(out, expected[i]), f"thread {i} differs from the serial result"


def _gen(i):
    return ember.Generator().manual_seed(1000 + i)


CASES = {
    # Large enough for OpenBLAS's own threads.
    "matmul": (lambda i: (ember.randn(192, 160, generator=_gen(i)), ember.randn(160, 144, generator=_gen(i + 50))),
               lambda a, b: a @ b),
    # Small batched products: an OpenMP loop with single-threaded BLAS inside.
    "bmm_small": (lambda i: (ember.randn(64, 8, 8, generator=_gen(i)), ember.randn(64, 8, 8, generator=_gen(i + 50))),
                  ember.bmm),
    "matmul_float64": (lambda i: (ember.randn(96, 96, dtype=ember.float64, generator=_gen(i)),) * 2,
                       lambda a, b: a @ b.t()),
    "int_matmul": (lambda i: (ember.randint(-9, 9, (70, 50), generator=_gen(i)),) * 2, lambda a, b: a @ b.t()),
    # Batch >= threads: per-image OpenMP with single-threaded BLAS; batch 1: BLAS threads.
    "conv2d_batched": (lambda i: (ember.randn(8, 3, 20, 20, generator=_gen(i)),
                                  ember.randn(6, 3, 3, 3, generator=_gen(i))),
                       lambda x, w: ember.conv2d(x, w, padding=1)),
    "conv2d_single": (lambda i: (ember.randn(1, 4, 40, 40, generator=_gen(i)),
                                 ember.randn(8, 4, 5, 5, generator=_gen(i))),
                      lambda x, w: ember.conv2d(x, w, stride=2)),
    "reductions": (lambda i: (ember.randn(300, 700, generator=_gen(i)),),
                   lambda x: (x.sum(), x.sum(dim=0), x.amax(dim=1), x.mean(dim=1), x.argmax(dim=0), x.std())),
    "sort": (lambda i: (ember.randn(40, 3000, generator=_gen(i)),),
             lambda x: (*x.sort(dim=1), *x.sort(dim=0, descending=True), *x.topk(5, dim=1))),
    "sort_ints_with_ties": (lambda i: (ember.randint(0, 20, (5000,), generator=_gen(i)),),
                            lambda x: (*x.sort(stable=True), x.unique(), *x.mode(dim=0))),
    "elementwise": (lambda i: (ember.randn(200_000, generator=_gen(i)), ember.randn(200_000, generator=_gen(i + 1))),
                    lambda a, b: (a.exp(), a * b + 1, ember.where(a > b, a, b), a.to(ember.float16), a.tanh())),
    "strided_copy": (lambda i: (ember.randn(300, 400, generator=_gen(i)),),
                     lambda x: (x.t().contiguous(), x[::3, 1::2].clone(), ember.cat([x, x.t()[:300]], dim=1))),
    "softmax_norm": (lambda i: (ember.randn(64, 512, generator=_gen(i)),),
                     lambda x: (ember.softmax(x, dim=1), ember.layer_norm(x, (512,)), ember.log_softmax(x, dim=0))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_ops_from_threads_match_serial(name):
    make_inputs, fn = CASES[name]
    _check_concurrent(make_inputs, fn)


def test_mixed_ops_at_once():
    """Different kernel families at the same time (BLAS thread count switches under others)."""
    names = ["matmul", "conv2d_batched", "bmm_small", "sort"]
    inputs = {n: CASES[n][0](0) for n in names}
    expected = {n: CASES[n][1](*inputs[n]) for n in names}

    def work(i):
        name = names[i % len(names)]
        return name, [CASES[name][1](*inputs[name]) for _ in range(ROUNDS)]

    for name, outs in _run_threads(work, n_threads=len(names)):
        for out in outs:
            assert _same(out, expected[name]), name


def test_random_per_generator_streams():
    """Same seed in two threads -> the same numbers, whatever runs beside them."""

    def draw(seed):
        g = ember.Generator().manual_seed(seed)
        return [ember.randn(10_000, generator=g), ember.rand(7, 300, generator=g),
                ember.randint(0, 100, (5000,), generator=g), ember.randperm(1000, generator=g)]

    expected = {seed: draw(seed) for seed in (1, 2)}
    results = _run_threads(lambda i: draw(1 + i % 2), n_threads=4)
    for i, got in enumerate(results):
        assert _same(got, expected[1 + i % 2])


def test_default_generator_shared_without_losing_draws():
    """Concurrent draws from the default generator neither reuse nor lose draws: together they
    are exactly the values one thread draws serially from the same seed."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
    try:
        ember.manual_seed(0)
        draws = _run_threads(lambda i: [ember.rand(4, dtype=ember.float64) for _ in range(300)], n_threads=4)
    finally:
        sys.setswitchinterval(old)
    values = np.concatenate([t.numpy() for batch in draws for t in batch])
    assert len(np.unique(values)) == len(values)
    state = ember.get_rng_state()
    ember.manual_seed(0)
    serial = ember.rand(4 * 300 * 4, dtype=ember.float64).numpy()
    assert np.array_equal(np.sort(values), np.sort(serial))
    assert np.array_equal(ember.get_rng_state().numpy(), state.numpy())


def test_set_num_threads_between_concurrent_runs():
    before = ember.get_num_threads()
    try:
        for n in (1, 2, before):
            ember.set_num_threads(n)
            _check_concurrent(*CASES["conv2d_batched"])
            _check_concurrent(*CASES["reductions"])
    finally:
        ember.set_num_threads(before)


def test_dispatch_modes_are_per_thread():
    """A mode entered in one thread sees only that thread's ops (PyTorch keeps modes per thread)."""
    from ember.dispatch import DispatchMode

    class Recorder(DispatchMode):
        def __init__(self):
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.name)
            return func(*args, **(kwargs or {}))

    inside, done = threading.Event(), threading.Event()
    recorder = Recorder()
    x = ember.randn(50)

    def traced():
        with recorder:
            inside.set()
            ember.neg(x)
            done.wait(timeout=30)
        return recorder.names

    def plain():
        inside.wait(timeout=30)
        try:
            for _ in range(50):
                expected = (x * 2).exp()
                assert _same(expected, ember.exp(x * 2))
        finally:
            done.set()
        return ember.dispatch.active_modes()

    results = _run_threads(lambda i: traced() if i == 0 else plain(), n_threads=2)
    assert results[0] == ["neg"]
    assert results[1] == ()
