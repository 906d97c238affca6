"""ember._dynamo: the ``torch._dynamo`` names PyTorch programs commonly use, over ember.compiler.

ember has no bytecode-level Dynamo: ``ember.compile`` captures with a lazy tracer (see
``ember.compiler``). These aliases let programs written for ``torch._dynamo`` run unchanged.
"""

from typing import Any, NamedTuple

from ember.compiler import OptimizedModule, assume_constant_result, config
from ember.compiler._api import _first_compile_setup, disable
from ember.compiler._api import compile as _compile
from ember.compiler._compiled import reset, set_stance
from ember.compiler._explain import explain
from ember.compiler.backends.registry import list_backends, lookup_backend, register_backend

from . import backends, eval_frame, exc, utils
from ._shapes import mark_dynamic, mark_static, maybe_mark_dynamic


def graph_break() -> None:
    """Ends the current graph here (``torch._dynamo.graph_break``): the pending ops run now."""
    from ember.compiler._recorder import current

    rec = current()
    if rec is not None and not rec.suspended:
        reason = "torch._dynamo.graph_break()"
        if not rec.nodes and getattr(rec.owner, "fullgraph", False):
            # No pending op to flush, but a fullgraph=True capture refuses the break all the same.
            from ember.compiler._user_frames import user_frame

            rec.owner.note_break(reason, user_frame(), rec)
        rec.flush(reason)


def is_compiling() -> bool:
    from ember.compiler import is_compiling as _is_compiling

    return _is_compiling()


def allow_in_graph(fn):
    """Accepted: the lazy capture records whatever ops ``fn`` runs."""
    return fn


def disallow_in_graph(fn):
    """``fn`` runs outside the graph (a break around each call), as ``torch._dynamo.disallow_in_graph``."""
    return disable(fn)


def mark_static_address(t, guard: bool = True) -> None:
    """Accepted: CPU graphs take their inputs by reference already (no CUDA-graph copies)."""


def is_dynamo_supported() -> bool:
    return True


def is_inductor_supported() -> bool:
    return True


class ExportResult(NamedTuple):
    graph_module: Any
    guards: Any


def export(f, *extra_args, aten_graph: bool = False, pre_dispatch: bool = False, decomposition_table=None,
           tracing_mode: str = "symbolic", dynamic_shapes=None, **extra_kwargs):
    """``torch._dynamo.export(f)(*args)``: the whole of ``f`` as one graph (``make_fx``), returned
    as ``ExportResult(graph_module, guards)``; the graph module takes ``f``'s positional
    arguments (a number or None argument is a placeholder the graph does not read). A break
    (data-dependent Python) raises ``Unsupported``. Keyword arguments are constants of the graph;
    ``guards`` is empty (the graph is valid for inputs like the example's)."""
    from ember.compiler._make_fx import make_fx

    def inner(*args, **kwargs):
        _first_compile_setup()  # PyTorch's export runs the function under dynamo's optimize
        fn = (lambda *a: f(*a, **kwargs)) if kwargs else f
        gm = make_fx(fn, decomposition_table=decomposition_table, pre_dispatch=pre_dispatch)(*args)
        return ExportResult(gm, set())

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None, disable: bool = False):
    """``torch._dynamo.optimize(backend)(fn)``: ``ember.compile(fn, backend=..., fullgraph=nopython)``."""
    if not disable:
        _first_compile_setup()

    def wrap(fn):
        return _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic, disable=disable)

    return wrap


def run(fn=None):
    """``torch._dynamo.run``: run without compiling anything new (here: eagerly)."""
    return disable(fn) if fn is not None else disable


__all__ = [
    "ExportResult", "OptimizedModule", "allow_in_graph", "assume_constant_result", "backends", "config", "disable",
    "disallow_in_graph", "eval_frame", "exc", "explain", "export", "graph_break", "is_compiling",
    "is_dynamo_supported", "is_inductor_supported", "list_backends", "lookup_backend", "mark_dynamic", "mark_static",
    "mark_static_address", "maybe_mark_dynamic", "optimize", "register_backend", "reset", "run", "set_stance",
    "utils",
]
