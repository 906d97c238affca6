"""``ember.utils._pytree``: PyTorch's ``torch.utils._pytree`` path (many libraries import it).

The implementation is ember's one pytree, ``ember.autograd._pytree`` (the lowest package that
needs it: ``ember.func`` flattens with it); this module re-exports it, registry included, so a
type registered here is a container for ``ember.func``, ``ember.compile`` and ``ember.export``.
"""

from ember.autograd._pytree import *  # noqa: F403 - the public API, as __all__ lists it
from ember.autograd._pytree import (  # noqa: F401 - private names libraries import from torch's module
    BUILTIN_TYPES,
    NO_SERIALIZED_TYPE_NAME_FOUND,
    SERIALIZED_TYPE_TO_PYTHON_TYPE,
    STANDARD_DICT_TYPES,
    SUPPORTED_NODES,
    SUPPORTED_SERIALIZED_TYPES,
    NodeDef,
    PyTreeSpec,
    __all__,
    _broadcast_to_and_flatten,
    _defaultdict_flatten,
    _deque_flatten,
    _deregister_pytree_node,
    _dict_flatten,
    _dict_flatten_with_keys,
    _dict_unflatten,
    _get_node_type,
    _list_flatten,
    _list_unflatten,
    _namedtuple_flatten,
    _namedtuple_unflatten,
    _private_register_pytree_node,
    _register_namedtuple,
    _register_pytree_node,
    _tuple_flatten,
    _tuple_unflatten,
)


def _is_leaf(tree, is_leaf=None) -> bool:
    """Deprecated (PyTorch's private name, still used): ``tree_is_leaf``."""
    import warnings

    warnings.warn("torch.utils._pytree._is_leaf is private and will be removed in a future release. Please use "
                  "torch.utils._pytree.tree_is_leaf instead.", FutureWarning, stacklevel=2)
    return tree_is_leaf(tree, is_leaf=is_leaf)  # noqa: F405 - from the star import
