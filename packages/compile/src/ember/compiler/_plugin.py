"""The ``compile`` plugin of the core: ``ember.compile`` resolves to ``plugin.compile``."""


class _Plugin:
    @property
    def compile(self):
        from ._api import compile

        return compile


plugin = _Plugin()
