"""Optimizer updates as ops: one native pass over every parameter of a group (fused.py)."""
