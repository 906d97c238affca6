"""``torch._inductor.utils`` names programs use: a fresh compile cache for a block, and clearing
the in-memory caches.

ember's compiler keeps its generated libraries under ``$EMBER_CACHE_DIR/compile`` and the ones it
has loaded in memory; ``fresh_cache`` points both PyTorch's variables (``TORCHINDUCTOR_CACHE_DIR``,
``TRITON_CACHE_DIR``) and ``EMBER_CACHE_DIR`` at a new temporary directory, so that everything
compiled inside is compiled anew and removed afterwards (``delete=False`` keeps it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["clear_caches", "clear_inductor_caches", "fresh_cache", "fresh_inductor_cache"]


def clear_caches() -> None:
    """Forgets the compiled libraries loaded so far: the next compilation looks in the cache
    directory again (and builds what is not there)."""
    from ember.compiler.inductor import _codecache

    with _codecache._LOCK:
        _codecache._LOADED.clear()


clear_inductor_caches = clear_caches


@contextlib.contextmanager
def _set_env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def fresh_cache(cache_entries: dict[str, Any] | None = None, dir: str | None = None,  # noqa: A002 - PyTorch's name
                delete: bool = True) -> Iterator[None]:
    """A new, empty compile cache directory for the block (in ``dir``, default the system's temporary
    directory), deleted afterwards unless ``delete`` is false. A dict passed as ``cache_entries`` (it
    must be empty) receives the name and size of each file of the block's ``triton`` cache."""
    clear_caches()
    cache_dir = tempfile.mkdtemp(dir=dir)
    try:
        with _set_env("TORCHINDUCTOR_CACHE_DIR", cache_dir), _set_env("EMBER_CACHE_DIR", cache_dir):
            log.debug("Using inductor cache dir %s", cache_dir)
            triton_cache_dir = os.path.join(cache_dir, "triton")
            with _set_env("TRITON_CACHE_DIR", triton_cache_dir):
                yield
                if isinstance(cache_entries, dict):
                    assert len(cache_entries) == 0, "expected empty cache_entries dict"
                    if os.path.exists(triton_cache_dir):
                        cache_entries.update({f: os.path.getsize(os.path.join(triton_cache_dir, f))
                                              for f in os.listdir(triton_cache_dir) if ".lock" not in f})
        if delete:
            shutil.rmtree(cache_dir, onerror=lambda func, path, exc_info: log.warning(
                "Failed to remove temporary cache dir at %s", cache_dir, exc_info=exc_info))
    except Exception:
        log.warning("on error, temporary cache dir kept at %s", cache_dir)
        raise
    finally:
        clear_caches()


fresh_inductor_cache = fresh_cache
