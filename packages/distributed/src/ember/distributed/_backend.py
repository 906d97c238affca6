"""Backend names, ``ReduceOp``, and the interface every engine implements.

A process group holds one engine per device type. ``"gloo"``, ``"mpi"`` and ``None`` pick the
MPI engine for CPU tensors, so programs written for gloo run unchanged; ``"nccl"`` runs CUDA
tensors on NVIDIA's NCCL (``_nccl_engine``, loaded on the first CUDA collective). A group maps
device types to backends (``device_backends``): ``None`` is "cpu:gloo,cuda:nccl" as in PyTorch.
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

    # PyTorch's (a pybind enum) print as "RedOpType.SUM", where an IntEnum prints its number
    def __str__(self):
        return f"RedOpType.{self.name}"

    def __format__(self, spec):
        return format(str(self), spec)


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


class _DeprecatedReduceOp:
    """``torch.distributed.reduce_op``, the old spelling of ``ReduceOp``: every attribute read
    warns with a FutureWarning, as PyTorch's does."""

    def __getattribute__(self, key):
        import warnings

        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` "
                      "instead", FutureWarning, stacklevel=2)
        if key == "__members__":
            return {k: v for k, v in RedOpType.__members__.items() if k != "UNUSED"}
        return getattr(RedOpType, key)


reduce_op = _DeprecatedReduceOp()


class PremulSum(int):
    """``ReduceOp.PREMUL_SUM`` with its factor (a number or a one-element tensor): compares equal
    to ``RedOpType.PREMUL_SUM`` and carries ``factor`` to the engine."""

    name = "PREMUL_SUM"

    def __new__(cls, factor):
        obj = super().__new__(cls, int(RedOpType.PREMUL_SUM))
        obj.factor = factor
        return obj


def _make_nccl_premul_sum(factor) -> ReduceOp:
    """``torch.distributed._make_nccl_premul_sum``: multiply every input by ``factor``, then sum."""
    op = ReduceOp(RedOpType.PREMUL_SUM)
    op._factor = factor
    return op


def as_red_op(op) -> RedOpType:
    if type(op) is RedOpType and op is not RedOpType.PREMUL_SUM or type(op) is PremulSum:
        return op
    if op is RedOpType.PREMUL_SUM:
        # PyTorch's bare member converts to no ReduceOp (its pybind setter raises TypeError); the
        # factor comes through _make_nccl_premul_sum
        raise TypeError("(): incompatible function arguments: ReduceOp.PREMUL_SUM needs its factor, "
                        "use torch.distributed._make_nccl_premul_sum(factor)")
    if isinstance(op, ReduceOp):
        factor = getattr(op, "_factor", None)
        return PremulSum(factor) if factor is not None else op.op
    # PyTorch takes ReduceOp members only (its options' setter raises TypeError on ints, strings)
    raise TypeError(f"op must be a torch.distributed.ReduceOp member (ReduceOp.SUM, ...), got {op!r}")


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
        # Any name passes, as PyTorch's (a third-party backend may register it later);
        # ``init_process_group``/``new_group`` refuse one nobody registered.
        return super().__new__(cls, name.lower())

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


# (backend name, device type) -> factory(process group) -> Engine
_ENGINES: dict[tuple[str, str], object] = {}
_CPU_NAMES = ("gloo", "mpi", "undefined")


def _nccl_factory(group):
    from ._nccl_engine import NCCLEngine  # loads nothing of CUDA or NCCL until a CUDA tensor comes

    return NCCLEngine(group)


def nccl_available() -> bool:
    """True when the NCCL library (the ``nvidia-nccl-cu13`` wheel) can be found; loads nothing."""
    from ._nccl_lib import find_library

    return find_library() is not None


def _known(name: str, message: str | None = None) -> str:
    """``name`` if a backend of that name exists, else PyTorch's AssertionError and words."""
    if not name or name not in Backend.backend_list and not any(engine == name for engine, _ in _ENGINES):
        raise AssertionError(message or f"Unknown backend type {name}")
    return name


def device_backends(backend) -> dict[str, str]:
    """Device type -> backend name for ``backend`` as ``init_process_group``/``new_group`` take it.

    ``None`` means "cpu:gloo,cuda:nccl" as in PyTorch (CUDA only where NCCL is installed);
    ``"nccl"`` serves CUDA tensors only (CPU tensors raise, as PyTorch's NCCL group does).
    """
    if backend is None:
        return {"cpu": "gloo", "cuda": "nccl"} if nccl_available() else {"cpu": "gloo"}
    text = str(backend).lower()
    if ":" in text:
        pairs = {}
        for item in text.split(","):
            device, _, name = item.strip().partition(":")
            if not device:
                raise ValueError(f"Invalid backend string: '{backend}' (expected 'device:backend,...')")
            name = name.strip().lower()
            pairs[device.strip()] = _known(name, "Unknown c10d backend type " + name.upper())
        return pairs
    name = _known(str(Backend(text)))
    if name in _CPU_NAMES:
        return {"cpu": "gloo" if name == "undefined" else name}
    if name == "nccl":
        return {"cuda": "nccl"}
    devices = [device for (engine, device) in _ENGINES if engine == name]
    return {device: name for device in devices} or {"cpu": name}


def backend_label(devices: dict[str, str]) -> str:
    """What ``get_backend`` answers: one name, or "cpu:gloo,cuda:nccl" for several."""
    names = set(devices.values())
    if len(names) == 1:
        return names.pop()
    return ",".join(f"{device}:{name}" for device, name in devices.items())


def register_engine(name: str, device: str, factory) -> None:
    _ENGINES[(name, device)] = factory


def engine_factory(name: str, device: str):
    factory = _ENGINES.get((name, device))
    if factory is None:
        raise RuntimeError(f"No backend type associated with device type {device} for backend {name!r}")
    if name == "nccl" and not nccl_available():
        raise RuntimeError(
            "Distributed package doesn't have NCCL built in: libnccl.so.2 was not found "
            "(install the nvidia-nccl-cu13 wheel, or set EMBER_NCCL_LIBRARY)"
        )
    return factory


register_engine("nccl", "cuda", _nccl_factory)
