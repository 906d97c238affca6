"""ember._logging: what ``EMBER_LOGS`` / ``set_logs`` show (PyTorch's ``TORCH_LOGS``, ``torch._logging``).

Artifacts: ``graph_code`` (each captured graph as Python), ``guards`` (what a cached graph
was matched on), ``recompiles`` (why a function compiled again), ``graph_breaks`` (where and
why a capture broke) and ``output_code`` (what the backend produced). Enable them with
``EMBER_LOGS=graph_code,graph_breaks`` (a leading ``+`` is accepted, as in TORCH_LOGS) or
``ember._logging.set_logs(graph_code=True)``. Records go to the ``ember._logging.<artifact>``
loggers, which print to stderr.
"""

from __future__ import annotations

import logging
import os
import sys

ARTIFACTS = ("graph_code", "guards", "recompiles", "graph_breaks", "output_code")
_ON: set = set()
_LOGGERS: dict = {}


def _logger(name: str) -> logging.Logger:
    lg = _LOGGERS.get(name)
    if lg is None:
        lg = logging.getLogger(f"ember._logging.{name}")
        if not lg.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(f"[ember {name}] %(message)s"))
            lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
        _LOGGERS[name] = lg
    return lg


def set_logs(*, all=None, dynamo=None, graph_code: bool = False, guards: bool = False,  # noqa: A002
             recompiles: bool = False, graph_breaks: bool = False, output_code: bool = False, **ignored) -> None:
    """Chooses the artifacts to print (every call replaces the previous choice, as PyTorch)."""
    _ON.clear()
    chosen = {"graph_code": graph_code, "guards": guards, "recompiles": recompiles,
              "graph_breaks": graph_breaks, "output_code": output_code}
    _ON.update(name for name, on in chosen.items() if on)


def _enabled(name: str) -> bool:
    return name in _ON


def _log(name: str, message) -> None:
    """Logs ``message()`` (a thunk: nothing is formatted unless the artifact is on)."""
    if name in _ON:
        _logger(name).info(message())


def _from_env() -> None:
    spec = os.environ.get("EMBER_LOGS", "")
    names = [part.strip().lstrip("+") for part in spec.split(",") if part.strip()]
    unknown = [n for n in names if n not in ARTIFACTS]
    if unknown:
        raise ValueError(f"EMBER_LOGS: unknown artifact(s) {unknown}; known: {', '.join(ARTIFACTS)}")
    _ON.update(names)


_from_env()

__all__ = ["set_logs"]
