"""ember.futures against torch.futures: the same programs, the same values and error types."""

from __future__ import annotations

import threading
import time

import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as err:  # noqa: BLE001 - the type is compared
        return ("raised", type(err).__name__)


def _program(lib):
    """Every Future behaviour a user meets, as a list of observations."""
    Future, collect_all, wait_all = lib.futures.Future, lib.futures.collect_all, lib.futures.wait_all
    seen = []
    f = Future()
    seen.append(f.done())
    seen.append(_outcome(f.value)[0])  # not complete yet: raises
    order = []
    f.add_done_callback(lambda fut: order.append(("cb", fut.value())))
    child = f.then(lambda fut: fut.value() + 1)
    grandchild = child.then(lambda fut: fut.wait() * 10)
    seen.append(child.done())
    f.set_result(1)
    seen += [f.done(), f.wait(), f.value(), child.done(), child.wait(), grandchild.wait(), order]
    seen.append(_outcome(lambda: f.set_result(2)))
    seen.append(_outcome(lambda: f.set_exception(ValueError("late"))))
    # an already complete future runs new callbacks inline
    seen.append(f.then(lambda fut: "inline").done())
    f.add_done_callback(lambda fut: order.append("inline"))
    seen.append(order[-1])

    g = Future()
    g.set_exception(ValueError("bad"))
    seen += [g.done(), _outcome(g.wait), _outcome(g.value)]
    seen.append(_outcome(lambda: Future().set_exception("not an exception")))
    # a callback that does not look at the error completes normally; one that does is wrapped
    seen.append(g.then(lambda fut: "ignored").wait())
    wrapped = g.then(lambda fut: fut.value())
    seen.append(_outcome(wrapped.wait))
    try:
        wrapped.wait()
    except RuntimeError as err:
        seen.append(str(err).startswith("Got the following error when running the callback: ValueError: bad"))
    seen.append(_outcome(f.then(lambda fut: 1 / 0).wait))
    # a raising done-callback is logged, not raised, and the future completes
    h = Future()
    h.add_done_callback(lambda fut: 1 / 0)
    h.set_result(5)
    seen.append(h.wait())
    # then() of a callback that returns a Future does not flatten it
    seen.append(type(f.then(lambda fut: Future()).wait()).__name__)

    # collect_all / wait_all
    a, b = Future(), Future()
    both = collect_all([a, b])
    seen.append(both.done())
    a.set_result("a")
    seen.append(both.done())
    b.set_result("b")
    seen += [both.done(), [x.wait() for x in both.wait()], wait_all([a, b]), wait_all([])]
    seen.append(collect_all([]).wait())
    c = Future()
    failing = collect_all([c, g])  # complete once all are, with the error
    seen.append(failing.done())
    c.set_result(0)
    seen += [failing.done(), _outcome(failing.wait), _outcome(lambda: wait_all([c, g]))]
    # (not f: PyTorch's failed set_exception on it above left f raising TypeError from wait())
    seen.append(_outcome(lambda: collect_all([1])))
    seen.append(_outcome(lambda: collect_all(1)))

    # completed from another thread while wait() blocks
    t = Future()
    timer = threading.Timer(0.05, lambda: t.set_result(lib.ones(2) * 3))
    timer.start()
    seen.append(t.wait().tolist())
    timer.join()
    # devices need an index
    seen.append(_outcome(lambda: Future(devices=["cpu"])))
    return seen


def test_futures_match_pytorch():
    assert _program(ember) == _program(torch)


def test_future_is_generic_and_importable_as_torch_names_it():
    import ember.futures as futures_module
    from ember.futures import Future, collect_all, wait_all  # noqa: F401

    assert ember.futures is futures_module
    assert futures_module.__all__ == torch.futures.__all__
    # comm hooks annotate "-> torch.futures.Future[torch.Tensor]"
    assert Future[ember.Tensor] == Future[ember.Tensor]
    assert Future[ember.Tensor] != Future


def test_wait_drives_a_future_that_only_progresses_when_asked():
    # a subclass that completes itself from _drive/_poll (as a collective's future does):
    # waiting on the end of a chain or a collect_all moves its start
    class Lazy(ember.futures.Future):
        def __init__(self):
            super().__init__()
            self.polls = 0

        def _poll(self):
            self.polls += 1
            if self.polls >= 3 and not self._state:
                self.set_result(7)

        def _drive(self):
            self.set_result(7)

    lazy = Lazy()
    chained = lazy.then(lambda fut: fut.value() * 2)
    assert chained.wait() == 14
    polled = Lazy()
    child = polled.then(lambda fut: fut.value())
    assert [child.done() for _ in range(3)] == [False, False, True]
    both = ember.futures.collect_all([Lazy(), Lazy()])
    assert [x.value() for x in both.wait()] == [7, 7]


def test_wait_is_interruptible_and_thread_safe():
    fut = ember.futures.Future()
    results = []
    threads = [threading.Thread(target=lambda: results.append(fut.wait())) for _ in range(4)]
    for th in threads:
        th.start()
    time.sleep(0.02)
    fut.set_result("x")
    for th in threads:
        th.join(5)
    assert results == ["x"] * 4
