"""``ember.utils.dlpack``: exchanging tensors with other libraries through DLPack capsules."""

from ember import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
