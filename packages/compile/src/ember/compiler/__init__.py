"""ember.compiler: ``ember.compile``'s capture, caches and backends (PyTorch's ``torch.compiler``).

The capture is a lazy tracer (``_recorder``): each call of a compiled function re-runs its
Python, records tensor ops on lazy tensors and runs the recorded segments as compiled graphs,
taken from a cache keyed by what was recorded. Graph breaks happen where Python reads tensor
data. See the package README for the design and docs/deviations.md for where it differs
from TorchDynamo.
"""

from . import config
from ._api import OptimizedModule, compile, disable, nested_compile_region
from ._compiled import reset, set_stance
from ._explain import ExplainOutput, explain
from ._fake import FakeTensor, FakeTensorMode
from ._make_fx import make_fx
from .backends.registry import list_backends, lookup_backend, register_backend


def is_compiling() -> bool:
    """True while a compiled function is being captured (``torch.compiler.is_compiling``)."""
    from ._recorder import current

    rec = current()
    return rec is not None and not rec.suspended


is_dynamo_compiling = is_compiling

_EXPORTING = [0]  # ember.export's traces in progress (it counts them)


def is_exporting() -> bool:
    """True while ``ember.export`` traces a module (``torch.compiler.is_exporting``)."""
    return _EXPORTING[0] > 0


def cudagraph_mark_step_begin() -> None:
    """Accepted for programs written for CUDA graphs: the CPU capture has none."""


def allow_in_graph(fn):
    """Accepted for PyTorch programs: the lazy capture records the ops ``fn`` runs anyway."""
    return fn


def assume_constant_result(fn):
    """Accepted for PyTorch programs: Python re-runs each call, so nothing is assumed."""
    return fn


__all__ = [
    "ExplainOutput", "FakeTensor", "FakeTensorMode", "OptimizedModule", "allow_in_graph", "assume_constant_result",
    "compile", "config", "cudagraph_mark_step_begin", "disable", "explain", "is_compiling", "is_dynamo_compiling",
    "is_exporting",
    "list_backends", "lookup_backend", "make_fx", "nested_compile_region", "register_backend", "reset", "set_stance",
]
