"""``torch._dynamo.utils``: the compiler's ``counters``."""

from ember.compiler._counters import counters

__all__ = ["counters"]
