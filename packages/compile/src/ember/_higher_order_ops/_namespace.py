"""``ember.ops.higher_order`` (the compile plugin's ``higher_order``): PyTorch's names for the graph ops that
take functions."""

from __future__ import annotations

from ember._src.dispatch import OPS, Op


class _HigherOrderNamespace:
    """``ember.ops.higher_order``: PyTorch's ``torch.ops.higher_order``, whose ``cond`` and ``while_loop`` are
    the targets of those nodes in ember's graphs (``node.target is torch.ops.higher_order.cond`` holds)."""

    name = "higher_order"
    _OPS = ("cond", "while_loop")

    def __getattr__(self, name: str) -> Op:
        if name in self._OPS:
            return OPS[name]  # (registered when ember._higher_order_ops, this module's package, loaded)
        raise AttributeError(f"'_OpNamespace' 'higher_order' object has no attribute '{name}'")

    def __dir__(self):
        return list(self._OPS)

    def __repr__(self) -> str:
        return "ember.ops.higher_order"


higher_order = _HigherOrderNamespace()
