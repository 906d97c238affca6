"""PyTorch's ``torch.nn.modules.utils``: the layers' argument normalizers (``_pair`` and kin, from
``_utils``) and ``consume_prefix_in_state_dict_if_present`` for checkpoints saved from a wrapped model.

Programs import ``_pair`` from here, and strip DataParallel/DDP's ``module.`` prefix with it.
``ember.nn`` star-imports ``ember.nn.modules`` and then binds ``ember.nn.utils`` back to its own.
"""

from __future__ import annotations

from ._utils import _list_with_default, _ntuple, _pair, _quadruple, _reverse_repeat_tuple, _single, _triple

__all__: list[str] = []
_REEXPORTED = (_list_with_default, _ntuple, _pair, _quadruple, _reverse_repeat_tuple, _single, _triple)


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Removes ``prefix`` from the front of every key of ``state_dict`` that has it, in place, and from
    the keys of its ``_metadata`` (the empty key, the wrapper's own entry, is left as it is)."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is None:
        return
    bare = prefix.replace(".", "")
    for key in list(metadata.keys()):
        if key and (key == bare or key.startswith(prefix)):
            metadata[key[len(prefix):]] = metadata.pop(key)
