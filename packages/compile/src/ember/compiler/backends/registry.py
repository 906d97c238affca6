"""The backend registry: names to ``compiler_fn(gm, example_inputs) -> callable``.

"eager" runs the captured GraphModule as it is; "aot_eager" goes through AOT autograd
(forward and backward graphs, both run by the GraphModule); "inductor" (the default) is
``ember.compiler.inductor.compile_fx`` when that package part is present, else "aot_eager".
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

_BACKENDS: dict[str, Callable] = {}


def register_backend(compiler_fn: Callable | None = None, name: str | None = None, tags=()):
    """Registers ``compiler_fn`` under ``name`` (its ``__name__`` by default); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    _BACKENDS[name or compiler_fn.__name__] = compiler_fn
    return compiler_fn


def lookup_backend(compiler_fn) -> Callable:
    """The compiler function a ``backend=`` argument names (a callable is returned as is)."""
    if callable(compiler_fn):
        return compiler_fn
    if not isinstance(compiler_fn, str):
        raise TypeError(f"backend must be a string or a callable, got {type(compiler_fn).__name__}")
    if compiler_fn == "inductor" and "inductor" not in _BACKENDS:
        _register_inductor()
    if compiler_fn not in _BACKENDS:
        from ember._dynamo.exc import InvalidBackend

        raise InvalidBackend(name=compiler_fn)
    return _BACKENDS[compiler_fn]


def list_backends(exclude_tags=("debug", "experimental")) -> list[str]:
    """The registered backend names (PyTorch's ``torch.compiler.list_backends``)."""
    if "inductor" not in _BACKENDS:
        _register_inductor()
    return sorted(_BACKENDS)


def _register_inductor() -> None:
    if importlib.util.find_spec("ember.compiler.inductor") is not None:
        from ember.compiler.inductor import compile_fx

        _BACKENDS["inductor"] = compile_fx
    else:  # the code generator is not installed: run the AOT graphs with the eager kernels
        _BACKENDS["inductor"] = _BACKENDS["aot_eager"]


@register_backend(name="eager")
def eager(gm, example_inputs):
    """Runs the captured graph op by op (PyTorch's "eager" debug backend)."""
    return gm.forward


@register_backend(name="aot_eager")
def aot_eager(gm, example_inputs):
    """AOT autograd with the eager kernels: a forward and a backward graph."""
    from ..aot_autograd import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, fw_compiler=eager, bw_compiler=eager)
