"""Backend names, ``ReduceOp``, and the interface every engine implements.

A process group holds one engine per device type. ``"gloo"``, ``"mpi"`` and ``None`` pick the
MPI engine for CPU tensors, so programs written for gloo run unchanged; ``"nccl"`` is the slot
for the GPU engine (its own package, later): ``register_engine("nccl", "cuda", factory)`` plugs it
in beside MPI without touching the collectives.
"""

from __future__ import annotations

import enum


class RedOpType(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9


class ReduceOp:
    """``torch.distributed.ReduceOp``: ``ReduceOp.SUM`` and friends are ``RedOpType`` members."""

    RedOpType = RedOpType
    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM
    UNUSED = RedOpType.UNUSED

    def __init__(self, op: RedOpType = RedOpType.SUM):
        self.op = RedOpType(op)

    def __eq__(self, other):
        return RedOpType(other.op if isinstance(other, ReduceOp) else other) == self.op

    def __hash__(self):
        return hash(self.op)


class reduce_op:  # noqa: N801 - PyTorch's deprecated spelling
    SUM = RedOpType.SUM
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX


def as_red_op(op) -> RedOpType:
    if type(op) is RedOpType:
        return op
    if isinstance(op, ReduceOp):
        return op.op
    try:
        return RedOpType(op)
    except ValueError:
        raise ValueError(f"Invalid reduce op: {op!r}") from None


class Backend(str):
    """``torch.distributed.Backend``: a lower-case backend name, checked on construction."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    UCC = "ucc"
    XCCL = "xccl"
    backend_list = ["undefined", "gloo", "nccl", "ucc", "mpi", "xccl"]
    default_device_backend_map = {"cpu": "gloo", "cuda": "nccl"}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: {type(name)}")
        value = name.lower()
        if value not in cls.backend_list and ":" not in value and value not in _ENGINES:
            raise ValueError(f"Invalid backend: '{name}'")
        return super().__new__(cls, value)

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=None):
        for device in [devices] if isinstance(devices, str) else (devices or ["cpu"]):
            register_engine(name.lower(), device, func)
        if name.lower() not in cls.backend_list:
            cls.backend_list.append(name.lower())


class Engine:
    """What a process group asks of an engine, for tensors on its device type.

    Every method starts the operation and returns a ``Work``; the group waits on it unless the
    caller asked for ``async_op``. Ranks are ranks within the group.
    """

    name = "undefined"

    def allreduce(self, tensor, op: RedOpType):
        raise NotImplementedError

    def broadcast(self, tensor, root: int):
        raise NotImplementedError

    def reduce(self, tensor, root: int, op: RedOpType):
        raise NotImplementedError

    def allgather(self, output, tensor):
        raise NotImplementedError

    def gather(self, output, tensor, root: int):
        raise NotImplementedError

    def scatter(self, output, inputs, root: int):
        raise NotImplementedError

    def reduce_scatter(self, output, inputs, op: RedOpType):
        raise NotImplementedError

    def alltoall(self, output, tensor, output_splits, input_splits):
        raise NotImplementedError

    def send(self, tensor, peer: int, tag: int):
        raise NotImplementedError

    def recv(self, tensor, peer: int | None, tag: int):
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


# (backend name, device type) -> factory(group_info) -> Engine
_ENGINES: dict[tuple[str, str], object] = {}


def register_engine(name: str, device: str, factory) -> None:
    _ENGINES[(name, device)] = factory


def engine_factory(name: str, device: str):
    factory = _ENGINES.get((name, device))
    if factory is None:
        if name == "nccl":
            raise RuntimeError(
                "Distributed package doesn't have NCCL built in: ember's NCCL engine is not installed "
                "(this build runs the MPI engine on CPU tensors)"
            )
        raise RuntimeError(f"No backend type associated with device type {device} for backend {name!r}")
    return factory
