"""``ember.utils.hooks.RemovableHandle``: the handle every ``register_*_hook`` returns."""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict


class RemovableHandle:
    """Removes one hook from the dict(s) it was registered in; also a context manager."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict: OrderedDict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = next(RemovableHandle._next_id)
        if extra_dict is None:
            extra_dict = []
        elif not isinstance(extra_dict, (list, tuple)):
            extra_dict = [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extra_dict)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            hooks = ref()
            if hooks is not None and self.id in hooks:
                del hooks[self.id]

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()
