"""The Tensor class: a strided view (shape, stride, offset, dtype, device) over a storage.

Only metadata and Python protocols live here. Every computation is an op (see
``dispatch.py``); Tensor methods are attached from the functional ops in ``methods.py``.
"""

from __future__ import annotations

import operator
import warnings

from . import dispatch, dtypes, grad_mode, torch_function
from ._native import _C
from .device import CPU, META, device, get_backend
from .device import LAST_EMPTY as _LAST_EMPTY
from .layouts import strided
from .printing import tensor_repr
from .shapes import Size, contiguous_strides, is_contiguous, numel, wrap_dim

# PyTorch warns once per process when float()/int()/complex() reads a tensor that requires grad.
_SCALAR_GRAD_WARNED = [False]
# Class attributes that make a Tensor subclass more than a plain tensor to the dispatcher (besides
# an active __torch_function__: every subclass's, unless it sets _disabled_torch_function_impl).
_OWN_HOOKS = ("__torch_dispatch__", "_autograd_alias", "_layout")

# How many times an existing tensor's dtype has changed in place (``.data =``, ``set_``, swap_tensors,
# a sparse in-place op): a cache of what dtypes some tensors have (the optimizers' "is a parameter
# complex?") holds while this count stays the same.
DTYPE_CHANGES = [0]



def _no_dims(dim) -> None:
    """A 0-d tensor has no size or stride to read at any dim (PyTorch's IndexError)."""
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")

class Tensor(_C.TensorBase):
    """An n-dimensional array with PyTorch's semantics."""

    # Named where the public API binds it, as PyTorch's class is torch.Tensor: programs print
    # type(x) (the tensors tutorials: <class 'torch.Tensor'>).
    __module__ = "ember"

    # The fields (_storage, _shape, _stride, _offset, dtype, _device, _requires_grad, grad,
    # grad_fn, _base, _autograd_meta, __dict__, __weakref__) live in the C struct of
    # _C.TensorBase (csrc/common/tensor_impl.h), where kernels read them without lookups.
    __slots__ = ()

    # Sparse tensors set their own ``_layout`` (an instance attribute): see _src/sparse.
    _layout = strided

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__torch_dispatch__" in cls.__dict__:
            dispatch._SUBCLASS_DISPATCH[0] = True
        # As in PyTorch, a subclass's type survives ops through Tensor.__torch_function__ (or its
        # own), which switches the protocol on; nn.Parameter opts out (_disabled_torch_function_impl).
        active = cls.__torch_function__ is not torch_function._disabled_torch_function_impl
        if active:
            torch_function.enable()
        # A subclass with no hooks (nn.Parameter) takes the native fast path as a Tensor does: its
        # ops give plain tensors either way.
        below = cls.__mro__[:cls.__mro__.index(Tensor)]
        if not active and not any(name in k.__dict__ for k in below for name in _OWN_HOOKS):
            _C._set_plain_subclass(cls)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """PyTorch's default handler (ember.overrides): runs ``func`` and returns its tensors as
        ``cls`` instances."""
        return torch_function.default_torch_function(cls, func, types, args, kwargs)

    def __new__(cls, *args, **kwargs):
        # PyTorch's legacy constructor: ``Tensor(2, 3)`` is uninitialized float data of that
        # shape, ``Tensor([1, 2])`` copies a sequence as float, ``Tensor()`` is empty.
        from .ops.creation import factories as creation

        if kwargs:
            raise TypeError(f"Tensor() got unexpected keyword arguments {sorted(kwargs)}")
        if not args:
            data = creation.empty((0,))
        elif len(args) == 1 and (isinstance(args[0], (list, tuple)) or _is_array_like(args[0])):
            data = creation.tensor(args[0], dtype=dtypes.get_default_dtype())
        elif len(args) == 1 and isinstance(args[0], Tensor):
            data = args[0]
        elif len(args) == 1 and _storage_module().is_storage_object(args[0]):
            data = _storage_module().tensor_over_storage(args[0], dtypes.get_default_dtype())
        else:
            data = creation.empty(args)
        return data if cls is Tensor else data.as_subclass(cls)

    @staticmethod
    def _make_subclass(cls, data: Tensor, require_grad: bool = False) -> Tensor:
        """A ``cls`` instance sharing ``data``'s storage (how ``nn.Parameter`` is built)."""
        out = data.detach().as_subclass(cls)
        if require_grad:
            if not (data.dtype.is_floating_point or data.dtype.is_complex):
                raise RuntimeError(FACTORY_GRAD_DTYPE_ERROR)  # PyTorch's wording on this path
            out.requires_grad_(True)
        return out

    # -- metadata ---------------------------------------------------------------------
    # ``shape`` and ``ndim`` are _C.TensorBase's getters (no Python frame): Size(self._shape), len(self._shape).

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._shape)
        if not self._shape:
            _no_dims(dim)
        return self._shape[wrap_dim(dim, len(self._shape))]

    def stride(self, dim: int | None = None):
        if self._layout is not strided:
            raise RuntimeError(f"{_impl_name(self)} do not have strides")
        if dim is None:
            return self._stride
        if not self._shape:
            _no_dims(dim)
        return self._stride[wrap_dim(dim, len(self._shape))]

    def storage_offset(self) -> int:
        return self._offset

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    # numel()/nelement() and is_contiguous() are _C.TensorBase's methods (from the C mirrors); symbolic sizes,
    # a memory format or a sparse layout call these.
    def _numel(self) -> int:
        return numel(self._shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def device(self) -> device:
        return self._device

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_sparse(self) -> bool:
        return self._layout.name == "sparse_coo"

    # Devices and layouts this build has none of (PyTorch's properties, for programs that test them).
    is_xpu = is_mps = is_xla = is_ipu = is_hpu = is_maia = is_mtia = is_vulkan = is_mkldnn = property(
        lambda self: False)
    is_nested = property(lambda self: False)

    @property
    def is_sparse_csr(self) -> bool:
        return self._layout.name == "sparse_csr"

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def layout(self):
        return self._layout

    def get_device(self) -> int:
        return -1 if self._device.type in ("cpu", "meta") else (self._device.index or 0)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    @property
    def real(self) -> Tensor:
        """The real parts, as a view for complex tensors (the tensor itself otherwise)."""
        from .ops.pointwise.complex import real

        return real(self)

    @property
    def imag(self) -> Tensor:
        from .ops.pointwise.complex import imag

        return imag(self)

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    def _is_contiguous(self, memory_format=None) -> bool:
        if self._layout is not strided:
            # As PyTorch: COO tensors answer False (for any memory format); compressed layouts raise.
            if self._layout.name == "sparse_coo":
                return False
            raise RuntimeError(f"Sparse {self._layout.name[len('sparse_'):].upper()} tensors do not have is_contiguous")
        if memory_format is None:
            answer = _C_CONTIGUOUS(self)  # from the C mirrors; None for symbolic sizes
            if answer is not None:
                return answer
        else:
            from . import memory_format as mf

            mf.check(memory_format, "is_contiguous")
            if mf.rank_for(memory_format) is not None:
                return mf.is_dense_in(self._shape, self._stride, memory_format)
        return is_contiguous(self._shape, self._stride)

    # data_ptr() is _C.TensorBase's method: the common case natively, anything else calls this.
    def _data_ptr(self) -> int:
        if dispatch._SYNC_HOOK[0] is not None:
            dispatch._SYNC_HOOK[0](self, "Tensor.data_ptr()")
        if self._layout is not strided:
            raise RuntimeError(f"Cannot access data pointer of Tensor that doesn't have storage ({self._layout})")
        if self._storage.device_type == "meta":
            return 0
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        if dispatch._SYNC_HOOK[0] is not None:
            dispatch._SYNC_HOOK[0](self, "Tensor.untyped_storage()")
        return self._storage

    def storage(self):
        """The tensor's storage as a (deprecated) ``TypedStorage`` of its dtype, as PyTorch's."""
        if dispatch._SYNC_HOOK[0] is not None:
            dispatch._SYNC_HOOK[0](self, "Tensor.storage()")
        from .storage import TypedStorage, _warn_typed_storage_removal

        _warn_typed_storage_removal()
        return TypedStorage(wrap_storage=self._storage, dtype=self.dtype, _internal=True)

    def _typed_storage(self):
        from .storage import TypedStorage

        return TypedStorage(wrap_storage=self._storage, dtype=self.dtype, _internal=True)

    # _version, _version_value and _bump_version() are the C base's (Note [Version counters]).

    @property
    def requires_grad(self) -> bool:
        # A view requires grad through its base too, as PyTorch's: one made without recording (under
        # no_grad or inference_mode, Note [Views made without recording]) or before its base required
        # grad has no history of its own, yet reports True (and no grad_fn: a leaf).
        if self._requires_grad:
            return True
        base = self._base
        return base is not None and base._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        requires_grad = bool(requires_grad)
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            # PyTorch's wording differs by entry point: this method's, the attribute's (above) and
            # the factories' (FACTORY_GRAD_DTYPE_ERROR).
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if requires_grad and grad_mode.INFERENCE_USED[0] and self._storage.inference and not grad_mode.STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        if requires_grad:
            from . import plugins

            plugins.load("autograd")
        self._requires_grad = requires_grad
        return self

    def _is_view(self) -> bool:
        """Whether this tensor is a (differentiable) view of another, its ``_base``."""
        return self._base is not None

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def data(self) -> Tensor:
        out = self.detach()
        _C._new_version_counter(out)  # the same memory, a counter of its own (PyTorch's variable_data())
        return out

    @data.setter
    def data(self, other: Tensor) -> None:
        if not isinstance(other, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(other).__name__}")
        if self.requires_grad and not (other.dtype.is_floating_point or other.dtype.is_complex):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        _C._keep_version_counter(self)  # self keeps its counter (shared with its views), not other's
        if other.dtype is not self.dtype:
            DTYPE_CHANGES[0] += 1
        self._storage = other._storage
        self._shape = other._shape
        self._stride = other._stride
        self._offset = other._offset
        self.dtype = other.dtype
        self._device = other._device

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from . import plugins

        if dispatch._SYNC_HOOK[0] is not None:
            dispatch._SYNC_HOOK[0](self, "Tensor.backward()")
        engine = plugins.get("autograd")
        if engine is None:
            raise RuntimeError(
                "Tensor.backward() needs the autograd engine: install the 'ember-autograd' package"
            )
        return engine.backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        from . import plugins

        engine = plugins.get("autograd")
        if engine is None:
            raise RuntimeError("Tensor.register_hook needs the 'ember-autograd' package")
        return engine.register_hook(self, hook)

    def set_(self, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
        """Points this tensor at another storage (or tensor), as PyTorch's ``set_``."""
        if self._requires_grad and self.grad_fn is None and grad_mode.STATE.grad_enabled:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if source is None:
            source = _C.Storage.allocate(0) if self._device.type == "cpu" else _C.Storage.meta(0)
            size, stride, storage_offset = (0,), (1,), 0
        _C._keep_version_counter(self)  # self keeps its own counter over the new memory
        if isinstance(source, Tensor):
            if source.dtype is not self.dtype:
                DTYPE_CHANGES[0] += 1
            self._storage, self._shape, self._stride = source._storage, source._shape, source._stride
            self._offset, self.dtype = source._offset, source.dtype
            self._bump_version()
            return self
        from .storage import TypedStorage

        if isinstance(source, TypedStorage):
            if source.dtype is not self.dtype:
                raise RuntimeError(
                    f"Expected a Storage of type {self.dtype} or an UntypedStorage, but got type {source.dtype} "
                    "for argument 1 'storage'")
            source = source._untyped_storage
        if not isinstance(source, _C.Storage):
            raise TypeError(f"set_ expects a Tensor or a storage, got {type(source).__name__}")
        if size is None:
            size = (source.nbytes() // self.dtype.itemsize,)
        size = tuple(int(s) for s in size)
        stride = contiguous_strides(size) if stride is None else tuple(int(s) for s in stride)
        if source.resizable() and numel(size) and all(st >= 0 for st in stride) and storage_offset >= 0 and \
                len(size) == len(stride) and all(n >= 0 for n in size):
            # PyTorch grows a resizable storage that is too small for the geometry (in place: every
            # tensor on it sees the new size; new bytes are zero here).
            needed = (storage_offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1) * self.dtype.itemsize
            if needed > source.nbytes():
                source.resize_(needed)
        check_view_bounds(source, size, stride, storage_offset, self.dtype)
        self._storage, self._shape, self._stride, self._offset = source, size, stride, int(storage_offset)
        self._bump_version()
        return self

    def as_subclass(self, cls):
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError("as_subclass expects a subclass of ember.Tensor")
        if self._requires_grad and grad_mode.STATE.grad_enabled and self._layout is strided:
            # As PyTorch's: the result stays in the autograd graph (an alias recorded as one).
            out = dispatch.OPS["alias"](self)
            if type(out) is not cls:
                out.__class__ = cls
            return out
        out = object.__new__(cls)
        _init_fields(out, self._storage, self._shape, self._stride, self._offset, self.dtype, self._device)
        _C._share_version_counter(out, self)
        return copy_layout(out, self)

    # -- Python protocols ---------------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            what = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype is dtypes.bool or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def _scalar(self):
        """The value for float()/int()/complex(): PyTorch's ValueError for several elements, and its
        warning (once per process) for a tensor that requires grad, read with grad mode on."""
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self._requires_grad and not _SCALAR_GRAD_WARNED[0] and grad_mode.STATE.grad_enabled:
            _SCALAR_GRAD_WARNED[0] = True
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                          "Consider using tensor.detach() first.", UserWarning, stacklevel=3)
        return self.item()

    # hash(t) == id(t) as PyTorch's; _C.TensorBase's slot, so hashing runs no Python frame (the class
    # would otherwise get __hash__ = None from its __eq__).
    __hash__ = _C.TensorBase.__hash__

    def __repr__(self, *, tensor_contents=None) -> str:
        return tensor_repr(self)

    def __str__(self) -> str:
        return self.__repr__()

    def __format__(self, spec: str) -> str:
        if dispatch._SYNC_HOOK[0] is not None:
            dispatch._SYNC_HOOK[0](self, "formatting a tensor")
        if self.ndim == 0 and not self.is_meta and type(self) is Tensor:
            return self.item().__format__(spec)
        return object.__format__(self, spec) if spec else self.__repr__()

    def __reduce_ex__(self, protocol):
        from .interop import tensor_reduce

        return tensor_reduce(self)

    def __deepcopy__(self, memo):
        # PyTorch copies leaves only: a copy of an interior node could not keep its graph.
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                "because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001"
            )
        if id(self) in memo:
            return memo[id(self)]
        import copy

        with grad_mode.no_grad():
            result = self.clone()
            if type(self) is not Tensor:
                result = Tensor._make_subclass(type(self), result, False)
            result._requires_grad = self._requires_grad
            memo[id(self)] = result
            if self.grad is not None:
                result.grad = copy.deepcopy(self.grad, memo)
            for name, value in self.__dict__.items():
                if name not in _LAYOUT_MEMBERS:
                    setattr(result, name, copy.deepcopy(value, memo))
        return result

    def __contains__(self, element) -> bool:
        # Without it, `x in t` would iterate t's rows (an ambiguous bool for a 2-d tensor).
        import numbers

        if isinstance(element, (Tensor, numbers.Number)):
            return bool((element == self).any().item())
        raise RuntimeError(
            f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}."
        )

    def __reversed__(self):
        return self if self.ndim == 0 else self.flip(0)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        # A NumPy ufunc over a tensor (np.exp(t), ndarray + t) gives a tensor, as with PyTorch,
        # whose bool results arrive as uint8.
        from .interop import from_numpy

        if array.dtype == bool:
            array = array.astype("uint8")
        return from_numpy(array)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr

    __array_priority__ = 1000

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        from .interop import to_dlpack

        return to_dlpack(self, max_version=max_version, dl_device=dl_device, copy=copy, stream=stream)

    def __dlpack_device__(self):
        from .interop import dlpack_device

        return dlpack_device(self)


_LAYOUT_MEMBERS = ("_layout", "_sp_indices", "_sp_values", "_coalesced", "_compressed", "_plain")


def copy_layout(dst: Tensor, src: Tensor) -> Tensor:
    """Gives ``dst`` (an alias made with make_tensor/make_view) ``src``'s non-strided layout and
    members; a no-op for strided ``src``. Aliases of sparse tensors (detach, autograd's saved
    copies) go through here."""
    if src._layout is not strided:
        d = src.__dict__
        for name in _LAYOUT_MEMBERS:
            if name in d:
                setattr(dst, name, d[name])
    return dst


FACTORY_GRAD_DTYPE_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def set_factory_requires_grad(t: Tensor) -> Tensor:
    """``requires_grad=True`` given to a factory (``tensor``, ``zeros``, ``randint``, ...)."""
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise RuntimeError(FACTORY_GRAD_DTYPE_ERROR)
    return t.requires_grad_(True)


def _impl_name(t) -> str:
    kind = "SparseTensorImpl" if t._layout.name == "sparse_coo" else "SparseCsrTensorImpl"
    return f"Tensors of type {kind}"


def _init_fields(t, storage, shape, stride, offset, dtype, dev):
    t._storage = storage
    t._shape = shape
    t._stride = stride
    t._offset = offset
    t.dtype = dtype
    t._device = dev
    t._requires_grad = False
    t.grad = None
    t.grad_fn = None
    t._base = None
    t._autograd_meta = None


# make_tensor(storage, shape, stride, offset, dtype, dev): wraps an existing storage (no checks:
# callers guarantee the view is in bounds). In C: every op result and saved-tensor alias is made here.
make_tensor = _C.make_tensor
_C_CONTIGUOUS = _C._contiguous


def make_view(base: Tensor, shape: tuple, stride: tuple, offset: int) -> Tensor:
    """A view of ``base``'s storage; shares its version counter through the storage."""
    t = make_tensor(base._storage, shape, stride, offset, base.dtype, base._device)
    root = base if base._base is None else base._base
    t._base = root
    if _INFERENCE_USED[0] and _GRAD_STATE.inference and root._requires_grad:
        t._inference_view = True  # Note [Views made without recording]: named in autograd's error
    return t



_MAX_NBYTES = (1 << 63) - 1
_GRAD_STATE = grad_mode.STATE
_INFERENCE_USED = grad_mode.INFERENCE_USED
_C_NEW_EMPTY = _C.new_empty


def _raise_size_overflow(shape: tuple):
    """PyTorch's errors for a byte size past int64: TypeError for a dimension that is no int64 itself."""
    for s in shape:
        if s > _MAX_NBYTES:
            raise TypeError(f"empty(): argument 'size' overflows int64 at dimension {s}")
    raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)}")


def new_empty_tensor(shape: tuple, dtype, dev=CPU, zero: bool = False) -> Tensor:
    """A fresh contiguous tensor; ``shape`` must already be validated as non-negative ints."""
    if dev is CPU:
        t = _C_NEW_EMPTY(shape, dtype, zero, _INFERENCE_USED[0] and _GRAD_STATE.inference)
        if t is not None:
            return t
    n = 1
    for s in shape:
        n *= s
    nbytes = n * dtype.itemsize
    if nbytes > _MAX_NBYTES:
        _raise_size_overflow(shape)
    if dev is _LAST_EMPTY[0]:
        return _LAST_EMPTY[1](shape, n, dtype, dev, zero)  # the last plugin device's empty, looked up once
    if dev is CPU:
        storage = _C.Storage.allocate(nbytes, zero)
    elif dev is META:
        storage = _C.Storage.meta(nbytes)
    else:
        backend = get_backend(dev.type)
        if backend.empty is not None and dev.index is not None:
            _LAST_EMPTY[:] = dev, backend.empty
            return backend.empty(shape, n, dtype, dev, zero)  # the plugin's per-op fast path
        storage = backend.allocate(nbytes, zero, dev)
        dev = getattr(storage, "device", dev)  # a plugin names the device it allocated on ("cuda" -> "cuda:0")
    if _INFERENCE_USED[0] and _GRAD_STATE.inference:
        storage.inference = True  # an inference tensor (Tensor.is_inference), views included
    strides = (1,) if len(shape) == 1 else contiguous_strides(shape)  # 1-d fast path (per-op overhead)
    return make_tensor(storage, shape, strides, 0, dtype, dev)


def _storage_module():
    from . import storage

    return storage


def check_view_bounds(storage, size, stride, offset, dtype) -> None:
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape ({len(stride)} vs {len(size)})")
    if numel(size) == 0:
        return
    for st in stride:
        if st < 0:
            raise RuntimeError("as_strided: Negative strides are not supported at the moment")
    last = offset + sum((s - 1) * st for s, st in zip(size, stride))
    needed = (last + 1) * dtype.itemsize
    if needed > storage.nbytes():
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and itemsize "
            f"{dtype.itemsize} requiring a storage size of {needed} are out of bounds for storage of size "
            f"{storage.nbytes()}"
        )


def _is_array_like(obj) -> bool:
    return hasattr(obj, "__array_interface__") and not isinstance(obj, Tensor)


def is_tensor(obj, /) -> bool:
    return isinstance(obj, Tensor)


dispatch._Tensor = Tensor
torch_function._Tensor = Tensor
torch_function._install_c_names(_C)

# The descriptors of the C fields also appear in Tensor's own namespace (as the slots did), for
# code that reads them there (``Tensor.__dict__["grad_fn"].__set__``).
for _name in ("_storage", "_shape", "_stride", "_offset", "dtype", "_device", "_requires_grad", "grad",
              "grad_fn", "_base", "_autograd_meta"):
    setattr(Tensor, _name, _C.TensorBase.__dict__[_name])
del _name

# C++'s type names, which PyTorch's .grad assignment error uses for the gradient's dtype.
_CPP_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                   "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                   "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
                   "complex128": "c10::complex<double>"}


def check_grad_assignment(tensor, grad) -> None:
    """``tensor.grad = grad`` where dtype, device or shape differ (the native setter checks the match):
    PyTorch's errors, checked in its order. Tensor subclasses with their own dispatch decide for
    themselves; a sparse gradient needs only the dtype and device."""
    if not isinstance(grad, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(grad).__name__}")
    if _custom_dispatch(type(tensor)) or _custom_dispatch(type(grad)):
        return
    from .ops._common import type_name

    if grad.dtype is not tensor.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{_CPP_TYPE_NAMES.get(grad.dtype.name, grad.dtype.name)}' "
            f"to a tensor with grad_dtype '{type_name(tensor.dtype)}'. The gradient must match the tensor's "
            "grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype attribute with a "
            "specific dtype, or None to allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a "
            "tensor and its gradient may break downstream systems that assume they match.")
    if grad._device.type != tensor._device.type:
        raise RuntimeError(f"attempting to assign a gradient with device type '{grad._device.type}' to a tensor "
                           f"with device type '{tensor._device.type}'. Please ensure that the gradient and the "
                           "tensor are on the same device")
    if grad._layout is strided and tuple(grad._shape) != tuple(tensor._shape):
        raise RuntimeError(f"attempting to assign a gradient of size '{list(grad._shape)}' to a tensor of size "
                           f"'{list(tensor._shape)}'. Please ensure that the gradient and the tensor are the same "
                           "size")


def _custom_dispatch(cls) -> bool:
    return any(name in vars(klass) for klass in cls.__mro__[:-3] for name in _OWN_HOOKS if name != "_layout")


_C._set_grad_check(check_grad_assignment)

_C._tensor_setup(Tensor, list(dtypes.BY_CODE), CPU, META, dispatch._MODES_ENTERED, dispatch._SUBCLASS_DISPATCH,
                 dispatch._AUTOCAST_ON, dispatch._LAYOUT_DISPATCH, grad_mode.INFERENCE_USED, grad_mode.STATE)
_C._tensor_public_setup(Size, dispatch._SYNC_HOOK, strided)
Tensor.numel = Tensor.nelement = _C.TensorBase.numel  # one method, two names, as PyTorch's (handlers see numel)
