"""The control server's liveness channel (``_control``): one watch per rank for the job's life."""

from __future__ import annotations

import threading

import pytest

from ember.distributed._control import ControlServer, Watch


def _watch(server, rank, seen):
    return Watch("127.0.0.1", server.port, rank, lambda r, clean: seen.append((r, clean)), timeout=10.0)


def test_a_second_process_claiming_a_watched_rank_is_refused():
    server = ControlServer(3, timeout=10.0)
    seen0, seen1, seen2 = [], [], []
    try:
        w0, w1 = _watch(server, 0, seen0), _watch(server, 1, seen1)
        with pytest.raises(RuntimeError, match="rank 1 is already taken"):
            _watch(server, 1, seen2)
        with pytest.raises(RuntimeError, match="rank 7 is outside"):
            _watch(server, 7, seen2)
        # the refused claims did not replace rank 1's channel nor report it gone
        assert seen0 == [] and seen1 == []
        done = threading.Event()
        w0._on_exit = lambda r, clean: (seen0.append((r, clean)), done.set())
        w1.close()  # rank 1 leaves on purpose: rank 0 hears it, once, as clean
        assert done.wait(10.0)
        assert seen0 == [(1, True)]
        with pytest.raises(RuntimeError, match="rank 1 is already taken"):  # a rank that left stays taken
            _watch(server, 1, seen2)
        w0.close()
    finally:
        server.close()
