"""``ember.jit.script``, ``freeze`` and ``optimize_for_inference``."""

from __future__ import annotations

import ember
from ember import nn

from ._script_module import RecursiveScriptModule, ScriptFunction, ScriptModule, _FunctionModule


def script(obj, optimize=None, _frames_up: int = 0, _rcb=None, example_inputs=None):
    """Scripts a module or function: a ScriptModule / ScriptFunction with TorchScript's call checks.

    ``example_inputs`` (a list of argument tuples, as in PyTorch) gives the inputs whose export
    backs ``.graph``, ``.code`` and ``save``; without it the first call's inputs are used.
    """
    if isinstance(obj, (ScriptModule, ScriptFunction)):
        return obj
    example = None
    if example_inputs:
        first = example_inputs[0]
        example = (tuple(first) if isinstance(first, (tuple, list)) else (first,), {})
    if isinstance(obj, nn.Module):
        return RecursiveScriptModule(obj, example)
    if callable(obj):
        code = getattr(obj, "__code__", None)
        if code is not None and code.co_name == "<lambda>":
            # TorchScript compiles a function's source: a lambda has none of its own
            raise RuntimeError(f"Expected a single top-level function: {code.co_filename}:{code.co_firstlineno}")
        return ScriptFunction(obj, RecursiveScriptModule(_FunctionModule(obj), example))
    raise RuntimeError(f"Type '{type(obj).__name__}' cannot be compiled since it is not a module or function")


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    """A copy whose weights are constants of its graph (requires eval mode, as in PyTorch)."""
    if not isinstance(mod, ScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. Please use torch.jit.script or "
                           "torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. Please call .eval() "
                           "on your module before freezing.")
    if getattr(mod, "_exported", None) is None and mod._example_inputs is None:
        # Scripted and never called: no inputs to export at. It runs its Python with the weights
        # as constants (no grad), which computes what the frozen graph would.
        original = mod._original

        def run_frozen(*args, **kwargs):
            with ember.no_grad():
                return original(*args, **kwargs)

        frozen = RecursiveScriptModule(original, None, run_frozen)
        frozen.eval()
        return frozen
    ep = getattr(mod, "_exported", None) or mod.exported_program()
    program = ep.module()
    for p in program.parameters():
        p.requires_grad_(False)
    frozen = RecursiveScriptModule(mod._original, mod._example_inputs, program)
    object.__setattr__(frozen, "_exported", ep)
    frozen.eval()
    return frozen


def optimize_for_inference(mod, other_methods=None):
    """``freeze`` (scripting/tracing first if needed) and lowering to compile's core op set."""
    if not isinstance(mod, ScriptModule):
        mod = script(mod)
    frozen = freeze(mod.eval())
    lowered = frozen._exported.run_decompositions()
    out = RecursiveScriptModule(frozen._original, frozen._example_inputs, lowered.module())
    object.__setattr__(out, "_exported", lowered)
    out.eval()
    return out
