"""``mark_dynamic`` / ``mark_static``: per-tensor hints read by the capture (symbolic_shapes)."""

from ember.compiler.symbolic_shapes import mark_dynamic, mark_static, maybe_mark_dynamic

__all__ = ["mark_dynamic", "mark_static", "maybe_mark_dynamic"]
