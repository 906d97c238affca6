"""The backend registry: names to ``compiler_fn(gm, example_inputs) -> callable``.

"eager" runs the captured GraphModule as it is; "aot_eager" goes through AOT autograd
(forward and backward graphs, both run by the GraphModule); "inductor" (the default) is
``ember.compiler.inductor.compile_fx`` when that package part is present, else "aot_eager";
"cudagraphs" is "aot_eager" with each graph of CUDA inputs replayed as a CUDA graph.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable

log = logging.getLogger("ember.compiler")

_BACKENDS: dict[str, Callable] = {}
_TAGS: dict[str, tuple] = {}  # backend name -> its tags ("debug" for eager and aot_eager, as PyTorch's)


def register_backend(compiler_fn: Callable | None = None, name: str | None = None, tags=()):
    """Registers ``compiler_fn`` under ``name`` (its ``__name__`` by default); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    name = name or compiler_fn.__name__
    _BACKENDS[name] = compiler_fn
    _TAGS[name] = tuple(tags)
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
    """The registered backend names without those tagged ``exclude_tags`` (PyTorch's
    ``torch.compiler.list_backends``: the debug backends "eager" and "aot_eager" are left out)."""
    if "inductor" not in _BACKENDS:
        _register_inductor()
    excluded = set(exclude_tags or ())
    return sorted(name for name in _BACKENDS if not excluded & set(_TAGS.get(name, ())))


def _register_inductor() -> None:
    if importlib.util.find_spec("ember.compiler.inductor") is not None:
        from ember.compiler.inductor import compile_fx

        _BACKENDS["inductor"] = compile_fx
    else:  # the code generator is not installed: run the AOT graphs with the eager kernels
        _BACKENDS["inductor"] = _BACKENDS["aot_eager"]


@register_backend(name="eager", tags=("debug",))
def eager(gm, example_inputs):
    """Runs the captured graph op by op (PyTorch's "eager" debug backend)."""
    return gm.forward


@register_backend(name="aot_eager", tags=("debug",))
def aot_eager(gm, example_inputs):
    """AOT autograd with the eager kernels: a forward and a backward graph."""
    from ..aot_autograd import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, fw_compiler=eager, bw_compiler=eager)


@register_backend(name="cudagraphs")
def cudagraphs(gm, example_inputs):
    """PyTorch's "cudagraphs" backend: AOT autograd with the eager kernels, the forward and the
    backward graph each replayed as a CUDA graph (the inductor's ``cudagraphify``, as
    mode="reduce-overhead" uses it) when its inputs are on CUDA; a graph with CPU inputs runs as it
    is, with PyTorch's warning."""
    from ..aot_autograd import aot_module_simplified

    def graphed(graph, inputs):
        from ..inductor._cudagraphs import _all_cuda, _scalars_to_device, cudagraphify

        inputs = list(_scalars_to_device(tuple(inputs)))
        if not _all_cuda(inputs):
            log.warning("skipping cudagraphs due to cpu device")
            return graph.forward
        return cudagraphify(graph.forward, inputs)

    return aot_module_simplified(gm, example_inputs, fw_compiler=graphed, bw_compiler=graphed)
