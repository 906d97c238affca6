"""``ember.utils.weak``: dictionaries keyed by tensors (or any objects) by identity, held weakly.

A tensor's ``==`` is elementwise, so a plain ``WeakKeyDictionary`` cannot key on tensors; these
compare keys by identity (``WeakIdRef``), as PyTorch's ``torch.utils.weak``.
"""

from __future__ import annotations

import weakref
from collections.abc import MutableMapping

__all__ = ["TensorWeakRef", "WeakIdRef", "WeakIdKeyDictionary", "WeakTensorKeyDictionary"]


class WeakIdRef(weakref.ref):
    """A weak reference hashed and compared by the referent's identity (``id``), which stays the
    hash after the referent dies."""

    __slots__ = ["_id"]

    def __init__(self, key, callback=None):
        self._id = id(key)
        super().__init__(key, callback)

    def __hash__(self):
        return self._id

    def __eq__(self, other):
        a, b = self(), other() if isinstance(other, weakref.ref) else None
        if a is not None and b is not None:
            return a is b
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)


class WeakIdKeyDictionary(MutableMapping):
    """A mapping whose keys are held weakly and compared by identity; an entry leaves when its key
    is collected."""

    def __init__(self, dict=None, ref_type=WeakIdRef):  # noqa: A002 - PyTorch's parameter name
        self.data = {}
        self.ref_type = ref_type
        self_ref = weakref.ref(self)

        def remove(k, selfref=self_ref):
            owner = selfref()
            if owner is not None:
                owner.data.pop(k, None)

        self._remove = remove
        if dict is not None:
            self.update(dict)

    def __getitem__(self, key):
        return self.data[self.ref_type(key)]

    def __setitem__(self, key, value):
        self.data[self.ref_type(key, self._remove)] = value

    def __delitem__(self, key):
        del self.data[self.ref_type(key)]

    def __contains__(self, key):
        try:
            ref = self.ref_type(key)
        except TypeError:
            return False
        return ref in self.data

    def __iter__(self):
        for ref in list(self.data):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self):
        return sum(1 for ref in list(self.data) if ref() is not None)

    def __repr__(self):
        return f"<{self.__class__.__name__} at {id(self):#x}>"

    def copy(self):
        new = WeakIdKeyDictionary(ref_type=self.ref_type)
        for key, value in self.items():
            new[key] = value
        return new

    __copy__ = copy

    def keyrefs(self):
        return list(self.data)


WeakTensorKeyDictionary = WeakIdKeyDictionary


class TensorWeakRef:
    """A weak reference to a tensor (``()`` gives it back, or None once collected)."""

    __slots__ = ["ref"]

    def __init__(self, tensor):
        from ember import Tensor

        if not isinstance(tensor, Tensor):
            raise AssertionError(f"expected a Tensor, got {type(tensor).__name__}")
        self.ref = weakref.ref(tensor)

    def __call__(self):
        return self.ref()
