"""ember.jit: TorchScript's entry points (``torch.jit``) on ember.export.

- ``trace`` records a program with ember.export's tracer (whole graph, a batch dim kept
  dynamic when possible); ``script`` runs a module's Python under TorchScript's call checks,
  so data-dependent control flow computes exactly what eager does;
- ``save``/``load`` use the ember.export archive, which never runs Python on load;
- ``freeze``, ``optimize_for_inference``, ``is_scripting``/``is_tracing``, and the
  ``export``/``ignore``/``unused`` decorators, ``script_if_tracing`` and ``isinstance``.
  docs/deviations.md says what differs.
"""

from typing import Final

from ._script import freeze, optimize_for_inference, script
from ._script_module import RecursiveScriptModule, ScriptFunction, ScriptModule, TopLevelTracedModule
from ._serialization import load, save
from ._state import annotate, export, ignore, is_scripting, is_tracing, unused
from ._surface import isinstance, script_if_tracing
from ._trace import TracerWarning, TracingCheckError, trace, trace_module

# PyTorch's TracedModule is the base of TopLevelTracedModule; ember's traces are all top-level ones
# (``isinstance(m, jit.TracedModule)`` is the check programs make)
TracedModule = TopLevelTracedModule

__all__ = [
    "Final", "RecursiveScriptModule", "ScriptFunction", "ScriptModule", "TopLevelTracedModule", "TracedModule",
    "TracerWarning", "TracingCheckError", "annotate", "export", "freeze", "ignore", "is_scripting", "is_tracing",
    "isinstance", "load", "optimize_for_inference", "save", "script", "script_if_tracing", "trace", "trace_module",
    "unused",
]
