"""The ``compile`` plugin of the core: ``ember.compile`` resolves to ``plugin.compile``."""


class _Plugin:
    @property
    def compile(self):
        from ._api import compile

        return compile

    @property
    def cond(self):
        from ember._higher_order_ops import cond

        return cond

    @property
    def higher_order(self):
        """``ember.ops.higher_order``: the graph ops taking functions (``cond``, ``while_loop``)."""
        from ember._higher_order_ops._namespace import higher_order

        return higher_order


plugin = _Plugin()
