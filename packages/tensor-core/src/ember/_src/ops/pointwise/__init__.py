"""Elementwise ops: arithmetic, math and activations, fused updates, complex numbers,
special and number-theory functions, closeness comparisons."""
