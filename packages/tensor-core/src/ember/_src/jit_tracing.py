"""``torch._C._get_tracing_state()``: None unless a ``jit.trace`` is recording (then a truthy
state object). Programs call it as a cheap "am I being traced?" check. ember's tracer lives in
ember-export (``ember.jit``); the core asks it only when that package is already loaded, so the
check never imports it."""

from __future__ import annotations

import sys


class TracingState:
    """The state of the jit trace being recorded (truthy; ember exposes nothing more of it)."""

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<ember TracingState>"


_STATE = TracingState()


def _get_tracing_state(*args) -> TracingState | None:
    """_get_tracing_state() -> object"""
    if args:
        raise TypeError(f"_get_tracing_state() takes 0 positional arguments but {len(args)} were given")
    state = sys.modules.get("ember.jit._state")
    if state is not None and state.is_tracing():
        return _STATE
    return None
