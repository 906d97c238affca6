"""Devices and the backend registry.

A backend is registered under a device type ("cpu", "meta"; a CUDA package registers
"cuda" later). Op definitions never name a device: the dispatcher looks the kernel up by
the device type of the op's tensors, so a new backend needs no change to any op.
"""

from __future__ import annotations


class device:  # noqa: N801 - PyTorch's spelling
    """``ember.device("cpu")``, ``ember.device("cuda", 0)``, ``ember.device("cuda:1")``."""

    __slots__ = ("type", "index")

    def __new__(cls, type_or_str, index=None):  # noqa: A002
        if isinstance(type_or_str, device):
            if index is not None:
                raise ValueError("device(device, index) is not allowed")
            return type_or_str
        if isinstance(type_or_str, int):  # the current accelerator's device of that index
            if not _has_accelerator():
                raise RuntimeError("Cannot access accelerator device when none is available.")
            type_or_str, index = "cuda", type_or_str
        if not isinstance(type_or_str, str):
            raise TypeError(f"device() expects a string, got {type(type_or_str).__name__}")
        text = type_or_str.strip()
        if ":" in text:
            if index is not None:
                raise ValueError(f"type (string) must not include an index because index was passed: {text}")
            text, _, idx = text.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type_or_str}'")
            index = int(idx)
        if text not in KNOWN_DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(sorted(KNOWN_DEVICE_TYPES))} device type at start of device string: "
                f"{type_or_str}"
            )
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
        key = (text, index)
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        self = object.__new__(cls)
        object.__setattr__(self, "type", text)
        object.__setattr__(self, "index", index)
        _CACHE[key] = self
        return self

    def __setattr__(self, name, value):
        raise AttributeError("ember.device is immutable")

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, ValueError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (str(self),))

    # ``with ember.device("cuda"):`` makes it the default device of factories inside the block, as
    # PyTorch's device context does (nested blocks restore the previous default on exit).
    def __enter__(self):
        _ENTERED.append(DEFAULT_DEVICE[0])
        DEFAULT_DEVICE[0] = self
        return self

    def __exit__(self, *exc):
        DEFAULT_DEVICE[0] = _ENTERED.pop()
        return False


_CACHE: dict = {}

# Device types a user may name; a type without a registered backend raises when used.
KNOWN_DEVICE_TYPES = {"cpu", "meta", "cuda", "mps", "xpu"}

CPU = device("cpu")
META = device("meta")


# The device factories use when none is given (``ember.set_default_device``).
DEFAULT_DEVICE = [CPU]
_ENTERED: list = []  # the defaults that device context blocks replaced, innermost last


def to_device(value) -> device:
    if value is None:
        return DEFAULT_DEVICE[0]
    d = device(value)
    # PyTorch's CPU tensors have no device index: device="cpu:0" (or torch.device("cpu", 1)) makes a
    # tensor on "cpu"; the index-less object is the one the kernels and factories recognise
    return CPU if d.type == "cpu" and d is not CPU else d


class Backend:
    """What a device plugin provides to the tensor core (the device-plugin interface).

    - ``allocate(nbytes, zero)``: a storage for a tensor of this device type (an object with
      ``data_ptr()``, ``nbytes()``, ``device_type`` and writable ``version``/``inference``);
      freeing is the storage's own business (it runs when the last view goes away);
    - ``copy(dst, src, non_blocking)``: copies elements between a tensor of this device and
      one of the CPU or of this device (same shape; dtypes may differ);
    - ``pin_memory(t)`` / ``is_pinned(t)``: page-locked host memory, for devices that have it;
    - ``device_count()``;
    - ``compile_triton(source, name, signature, constexprs, aligned, num_warps, num_stages,
      device_index)`` (optional): a launcher for the ``@triton.jit`` function ``name`` of
      ``source`` (``signature``: argument -> Triton type, ``aligned``: arguments divisible by
      16), called as ``launcher(grid, stream, *args)``; ``current_stream(device_index)``: the
      stream handle ember's ops use now. The compiler's Triton backend launches its kernels
      through these (it sits above this core and does not import device plugins).
    - ``empty(shape, numel, dtype, device, zero)`` (optional): what ``new_empty_tensor`` makes for
      an indexed device of this type (a fresh contiguous tensor, zero-filled if asked, inference
      flag as the thread's mode says), made with fewer steps than ``allocate`` and the generic path;
    - ``assert_async(bad, message)`` (optional): raises ``RuntimeError(message)`` at the next
      synchronization if the bool tensor ``bad`` has a true element, without waiting for the
      device now (PyTorch's device-side asserts); without it the core checks ``bad`` at once;
    - ``like_device(device, requested)`` (optional): the device ``*_like(t, device=requested)``
      makes its result on when ``t`` lives on ``device`` of this type (a tensor subclass whose
      device stands for a layout keeps the layout, its pieces moving to ``requested``); without
      it the result is a plain tensor on ``requested``.
    Kernels are registered on the ops themselves (``Op.kernels[device_type]``).
    """

    compile_triton = None
    current_stream = None
    assert_async = None
    empty = None
    like_device = None
    # compiled wrappers' allocation front: wrapper_front(device) -> (tensor_new, storage class, allocator,
    # device object, begin) or None (see ember.compiler.inductor._wrapper._device_front)
    wrapper_front = None

    def __init__(self, name: str, allocate, zero_allocate=None, copy=None, pin_memory=None, is_pinned=None,
                 device_count=None):
        self.name = name
        self.allocate = allocate
        self.zero_allocate = zero_allocate
        self.copy = copy
        self.pin_memory = pin_memory
        self.is_pinned = is_pinned
        if device_count is not None:
            self.device_count = device_count


_BACKENDS: dict[str, Backend] = {}


# new_empty_tensor's cache: the device object it last handed to a plugin's ``empty``, and that function
# (device objects are interned: an identity check finds it). Registering a backend forgets it.
LAST_EMPTY: list = [None, None]


def register_backend(backend: Backend) -> None:
    _BACKENDS[backend.name] = backend
    LAST_EMPTY[:] = None, None


def _has_accelerator() -> bool:
    """Whether a CUDA backend is installed (PyTorch's CPU build has no accelerator for ``device(0)``)."""
    if "cuda" not in _BACKENDS:
        from . import plugins

        plugins.load("cuda")
    return "cuda" in _BACKENDS


def get_backend(device_type: str) -> Backend:
    backend = _BACKENDS.get(device_type)
    if backend is None and device_type not in ("cpu", "meta"):
        # A device plugin (entry point "ember.plugins", named after the device type) registers
        # its backend when it installs; it is looked for on first use only.
        from . import plugins

        plugins.load(device_type)
        backend = _BACKENDS.get(device_type)
    if backend is None and device_type == "cuda":
        # PyTorch's CPU build raises AssertionError here; programs catch that type.
        raise AssertionError("ember not compiled with CUDA enabled: no package providing a 'cuda' backend is "
                             "installed")
    if backend is None and device_type == "xpu":
        raise AssertionError("ember not compiled with XPU enabled: no package providing an 'xpu' backend is "
                             "installed")
    if backend is None:
        # PyTorch's type for a backend its build lacks (MPS off a Mac): NotImplementedError, "Could not run
        # '<op>' with arguments from the 'MPS' backend" (a RuntimeError, so `except RuntimeError` holds).
        raise NotImplementedError(
            f"Could not run ember's ops with arguments from the '{device_type.upper()}' backend: ember was built "
            f"without a '{device_type}' backend (no package providing it is installed)"
        )
    return backend


def like_device(source: device, requested) -> device:
    """The device of ``*_like(t, device=requested)`` for ``t`` on ``source``."""
    requested = to_device(requested)
    backend = _BACKENDS.get(source.type)
    if backend is not None and backend.like_device is not None:
        return backend.like_device(source, requested)
    return requested


def copy_across(dst, src, non_blocking: bool = False) -> None:
    """Copies ``src`` into ``dst`` where either lives on a plugin device (the plugin's ``copy``)."""
    device_type = dst._device.type if dst._device.type not in ("cpu", "meta") else src._device.type
    backend = get_backend(device_type)
    if backend.copy is None:
        raise RuntimeError(f"the '{device_type}' backend cannot copy tensors")
    backend.copy(dst, src, non_blocking)
