"""``torch.storage``: the storage classes (see ``ember._src.storage``)."""

from ember._src.storage import (  # noqa: F401
    TypedStorage,
    UntypedStorage,
    _warn_typed_storage_removal,
)

__all__ = ["TypedStorage", "UntypedStorage"]
