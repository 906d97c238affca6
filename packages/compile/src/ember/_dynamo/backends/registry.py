"""``torch._dynamo.backends.registry``: the names of ember.compiler's backend registry."""

from ember.compiler.backends.registry import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]
