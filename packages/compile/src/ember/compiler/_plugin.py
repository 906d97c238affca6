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


plugin = _Plugin()
