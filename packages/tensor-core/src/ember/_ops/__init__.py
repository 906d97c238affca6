"""``torch.ops.aten`` and ``torch._ops`` names over ember's ops.

ember's graphs hold ember's ops (``ember.ops.relu``), one op per name, where PyTorch's hold ATen
overloads (``aten.relu.default``, ``aten.add.Tensor``). Programs that inspect graphs compare
targets with those overloads (``node.target == torch.ops.aten.relu.default``), keep them in
sets or dicts, or call them. ``ember.ops.aten.<name>`` is an ``OpOverloadPacket`` over the ember
op of that name, and any of its overload attributes (``.default``, ``.Tensor``, ``.Scalar`` ...)
an ``OpOverload``: both call the op, and compare and hash equal to it (so all overloads of one
name are equal to each other: ember's op takes every form). ``docs/deviations.md`` says more.
"""

from __future__ import annotations

from typing import Any

from ember._src.dispatch import OPS, Op
from ember._src.torch_function import native_of


class _OverloadType(type):
    def __instancecheck__(cls, obj: object) -> bool:
        # Graph targets are ember ops: ``isinstance(node.target, torch._ops.OpOverload)`` holds.
        return type.__instancecheck__(cls, obj) or isinstance(obj, Op)


class _OpView:
    """What an overload and its packet share: they call the ember op ``self.op``, and compare and
    hash as it does."""

    op: Op

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.op(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if type(other) in _WRAPPERS:
            return other.op is self.op
        return other is self.op

    def __hash__(self) -> int:
        return hash(self.op)

    @property
    def _schema(self) -> str:
        return f"aten::{self.op.schema}"


class OpOverload(_OpView, metaclass=_OverloadType):
    """``torch.ops.aten.<name>.<overload>``: calls, and equals, the ember op ``<name>``.

    ``isinstance(op, OpOverload)`` is also true of an ember op (a graph node's target)."""

    def __init__(self, packet: OpOverloadPacket, overload: str) -> None:
        self.overloadpacket = packet
        self._overloadname = overload
        self.op = packet.op
        self.__name__ = f"{packet.__name__}.{overload}"
        self.__qualname__ = self.__name__
        self.__module__ = "ember.ops.aten"

    def __repr__(self) -> str:
        return f"<OpOverload(op='aten.{self.overloadpacket.__name__}', overload='{self._overloadname}')>"

    def __str__(self) -> str:
        return f"aten.{self.__name__}"

    def name(self) -> str:
        suffix = "" if self._overloadname == "default" else f".{self._overloadname}"
        return f"aten::{self.overloadpacket.__name__}{suffix}"

    @property
    def tags(self):
        return self.op.tags

    def __reduce__(self):
        return (_overload, (self.overloadpacket.__name__, self._overloadname))


class OpOverloadPacket(_OpView):
    """``torch.ops.aten.<name>``: calls, and equals, the ember op ``<name>``."""

    def __init__(self, op: Op) -> None:
        self.op = op
        self.__name__ = op.name
        self.__qualname__ = op.name
        self.__module__ = "ember.ops.aten"
        self._overloads: dict[str, OpOverload] = {}

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        found = self._overloads.get(overload)
        if found is None:
            found = self._overloads[overload] = OpOverload(self, overload)
        return found

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self.__name__}')>"

    def __str__(self) -> str:
        return f"aten.{self.__name__}"

    def overloads(self) -> list[str]:
        return ["default", *(k for k in self._overloads if k != "default")]

    def __reduce__(self):
        return (_packet, (self.__name__,))


class _AtenNamespace:
    """``ember.ops.aten``: an ``OpOverloadPacket`` per ember op."""

    name = "aten"

    def __init__(self) -> None:
        self._packets: dict[str, OpOverloadPacket] = {}

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name.startswith("__"):
            raise AttributeError(name)
        packet = self._packets.get(name)
        if packet is None:
            op = OPS.get(name)
            if not isinstance(op, Op) or "::" in name:
                raise AttributeError(f"'_OpNamespace' 'aten' object has no attribute '{name}'")
            packet = self._packets[name] = OpOverloadPacket(op)
        return packet

    def __dir__(self):
        return sorted(name for name in OPS if name.isidentifier())

    def __repr__(self) -> str:
        return "ember.ops.aten"


aten = _AtenNamespace()
_WRAPPERS = (OpOverload, OpOverloadPacket)


def _packet(name: str) -> OpOverloadPacket:
    return getattr(aten, name)


def _overload(name: str, overload: str) -> OpOverload:
    return getattr(getattr(aten, name), overload)


def unwrap(target: Any) -> Any:
    """The ember op behind an ``aten`` overload or packet, or behind a ``__torch_function__`` gate
    (``ember.add`` once the protocol is on); anything else as it is."""
    if type(target) in _WRAPPERS:
        return target.op
    return native_of(target)


__all__ = ["OpOverload", "OpOverloadPacket", "aten", "unwrap"]
