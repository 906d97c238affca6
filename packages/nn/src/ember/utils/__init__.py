"""``ember.utils``: shared by distributions (``ember-nn`` ships ``data`` and ``checkpoint``).

Extending ``__path__`` keeps this folder open to ``ember.utils.<name>`` modules from other
distributions in every install mode (notes/build-facts.md).
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ember.utils._swap import swap_tensors  # noqa: E402

__all__ = ["swap_tensors"]


def __getattr__(name: str):
    # `import ember` then `ember.utils.data.DataLoader`, as `torch.utils.data` after `import torch`:
    # submodules are imported on first access.
    if not name.startswith("__"):
        import importlib

        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
