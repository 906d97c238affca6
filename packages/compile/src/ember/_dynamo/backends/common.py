"""``torch._dynamo.backends.common.aot_autograd``: a backend that compiles the forward and backward
graphs of a captured graph with the given compilers."""

from __future__ import annotations

from collections.abc import Callable


def aot_autograd(**kwargs) -> Callable:
    """A backend ``(gm, example_inputs) -> callable`` running ember's AOT autograd on the graph.

    Takes ``aot_module_simplified``'s keywords: ``fw_compiler`` (required), ``bw_compiler``
    (defaults to ``fw_compiler``), ``inference_compiler``, ``partition_fn``, ``decompositions``.
    Each compiler receives ``(graph_module, example_inputs)`` and returns a callable.
    """

    def backend(gm, example_inputs):
        from ember.compiler.aot_autograd import aot_module_simplified

        return aot_module_simplified(gm, example_inputs, **kwargs)

    return backend


__all__ = ["aot_autograd"]
