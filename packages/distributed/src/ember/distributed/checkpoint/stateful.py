"""``Stateful``: what ``save``/``load`` call ``state_dict()``/``load_state_dict()`` on."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Stateful(Protocol):
    """Any object with ``state_dict()`` and ``load_state_dict(state_dict)`` (an ``nn.Module``, an
    optimizer, an application's own state holder): a top-level value of the state dict handed to
    ``save`` is saved as its ``state_dict()``, and ``load`` fills that and hands it to
    ``load_state_dict``."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


def to_state_dict(state_dict: dict) -> dict:
    """``state_dict`` with every top-level ``Stateful`` value replaced by its ``state_dict()``."""
    if not isinstance(state_dict, dict):
        return state_dict
    return {k: (v.state_dict() if isinstance(v, Stateful) else v) for k, v in state_dict.items()}


def from_state_dict(state_dict: dict, loaded: dict) -> None:
    """After ``load`` filled ``loaded`` (``to_state_dict(state_dict)``): hands the Stateful values'
    parts to their ``load_state_dict`` and puts the others back into ``state_dict``."""
    if not isinstance(state_dict, dict):
        return
    for k, v in state_dict.items():
        if isinstance(v, Stateful):
            v.load_state_dict(loaded[k])
        else:
            state_dict[k] = loaded[k]
