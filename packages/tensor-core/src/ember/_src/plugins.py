"""Optional features that upper packages plug into the core, found through entry points.

A distribution advertises a plugin in its pyproject::

    [project.entry-points."ember.plugins"]
    autograd = "ember.autograd._plugin:plugin"

The object named there has ``install()``, called once when the plugin is first needed, and
whatever methods the core calls on it (for autograd: ``backward``, ``register_hook``).
Plugins load lazily, so ``import ember`` never scans installed distributions.
"""

from __future__ import annotations

_LOADED: dict = {}
_LOADING: set = set()


def load(name: str):
    """Returns the plugin registered as ``name``, loading it on first use; None if absent."""
    if name in _LOADED:
        return _LOADED[name]
    if name in _LOADING:  # a plugin's own import asked for itself
        return None
    _LOADING.add(name)
    try:
        from importlib.metadata import entry_points

        plugin = None
        for ep in entry_points(group="ember.plugins", name=name):
            plugin = ep.load()
            install = getattr(plugin, "install", None)
            if install is not None:
                install()
            break
        _LOADED[name] = plugin
        return plugin
    finally:
        _LOADING.discard(name)


get = load


def register(name: str, plugin) -> None:
    """Registers a plugin object directly (tests, or packages loaded without entry points)."""
    install = getattr(plugin, "install", None)
    if install is not None:
        install()
    _LOADED[name] = plugin
