"""Compiler backends: ``backend(gm, example_inputs) -> callable`` (PyTorch's contract)."""

from .registry import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]
