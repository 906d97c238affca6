"""Copies and factories on CUDA: copy_, clone, _to_copy, empty, full, arange_affine, and the
view ops (metadata only, so the CPU functions serve every device).

``device_copy(dst, src)`` is the one strided copy between CUDA tensors (any strides, dtype
conversion, broadcasting src to dst): a ``cuMemcpyDtoDAsync`` when both are contiguous
with one dtype, else a generated elementwise kernel.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.device import CPU, META
from ember._src.dispatch import OPS
from ember._src.ops._common import check_write
from ember._src.ops.shape import views as vw

from . import _elementwise, _exprs, _fastcall, _storage
from ._elementwise import _INT31, _SHAPES, contiguous_info, launch, launch_linear
from ._ops_pointwise import fill_values
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import _TLS as _STREAMS_TLS
from ._streams import current_handle


def device_copy(dst, src) -> None:
    """dst <- src, both on CUDA; src broadcast to dst's shape, converted to dst's dtype."""
    if dst._device is not src._device:
        if dst._device.type == "cuda" and src._device.type == "cuda":
            _peer_copy(dst, src)
            return
        _storage.copy(dst, src)
        return
    n = dst.numel()
    if n == 0:
        return
    if src.dtype is dst.dtype and src._shape == dst._shape and src.is_contiguous() and dst.is_contiguous():
        index = dst._device.index or 0
        _fastcall.memcpy_dtod(dst.data_ptr(), src.data_ptr(), n * dst.dtype.itemsize, current_handle(index))
        return
    if src.dtype.is_complex or dst.dtype.is_complex:
        _complex_copy(dst, src)
        return
    if dst.dtype is dt.bool and src.dtype is not dt.bool:
        launch("{0} != 0", dst, [src], [src.dtype if src.dtype not in (dt.float16, dt.bfloat16) else dt.float32])
        return
    launch("{0}", dst, [src], [src.dtype])


def _complex_copy(dst, src) -> None:
    """A copy with a complex side, as (real, imag) pairs: into a complex dst (a real src's imaginary parts
    zero), into bool (either part nonzero), into a real dtype (the real part, as PyTorch's cast)."""
    if dst.dtype.is_complex:
        launch(_exprs.COMPLEX_COPY, dst, [src], [dst.dtype])
    elif dst.dtype is dt.bool:
        launch(_exprs.COMPLEX_TO_BOOL, dst, [src], [src.dtype])
    else:
        launch("{0}", dst, [src], [src.dtype.to_real()])


def _peer_copy(dst, src) -> None:
    """Between two GPUs: through a contiguous staging copy and ``cuMemcpyPeerAsync``."""
    from . import _driver

    tmp_src = src if (src.is_contiguous() and src._shape == dst._shape) else _contiguous_as(src, dst._shape)
    tmp_dst = dst if dst.is_contiguous() and dst.dtype is src.dtype else new_empty_tensor(dst._shape, src.dtype,
                                                                                           dst._device)
    drv = _driver._driver()
    ctx_dst = _driver.ensure_context(dst._device.index or 0)
    ctx_src = _driver.ensure_context(src._device.index or 0)
    n = dst.numel() * src.dtype.itemsize
    _driver.check(drv.cuMemcpyPeerAsync(tmp_dst.data_ptr(), ctx_dst, tmp_src.data_ptr(), ctx_src, n,
                                        current_handle(src._device.index or 0)), "cuMemcpyPeerAsync")
    _driver.check(drv.cuCtxSynchronize(), "cuCtxSynchronize")
    if tmp_dst is not dst:
        device_copy(dst, tmp_dst)


def _contiguous_as(src, shape):
    out = new_empty_tensor(shape, src.dtype, src._device)
    device_copy(out, src)
    return out


def _copy_(self, src, non_blocking: bool = False):
    if src is self or (src._storage is self._storage and src.dtype is self.dtype and src._offset == self._offset
                       and src._stride == self._stride and src._shape == self._shape):
        self._bump_version()
        return self
    check_write(self, (src,))
    vw._copy_check(self, src)
    if src._device is META:
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    if src._device.type == "cuda" and src._storage is self._storage and vw._overlaps(self, src):
        src = src.clone()
    if src._device.type == "cpu":
        _storage.copy(self, src, non_blocking)
    else:
        device_copy(self, src)
    self._bump_version()
    return self


def _clone(self):
    out = vw._empty_preserving(self)
    device_copy(out, self)
    return out


# (source dtype, dtype, aligned, large, device index) -> (launcher, BLOCK) of a contiguous cast: launch_linear's
# plan for the "{0}" expression, found there once (its _FAST entry), then launched here without its frame.
_CASTS: dict = {}


def _to_copy(self, *, dtype=None, device=None):
    if dtype is not None and dtype is not self.dtype and (device is None or device is self._device):
        # autocast's casts and their gradients (~270 a GPT-2 step): _cast_contiguous and launch_linear's cached
        # case inlined (the same checks, result and launch), two frames fewer per cast
        shape = self._shape
        info = _SHAPES.get(shape)
        dev = self._device
        if info is not None and dev.type == "cuda":
            n = info[1]
            src_dtype = self.dtype
            if self._stride == info[0] and 0 < n < _INT31 and dtype is not dt.bool and not dtype.is_complex and \
                    not src_dtype.is_complex:
                index = dev.index or 0
                out = new_empty_tensor(shape, dtype, dev)
                src = self._storage._ptr + self._offset * src_dtype.itemsize
                dst = out._storage._ptr
                aligned = not ((src | dst | n) & 15)
                entry = _CASTS.get((src_dtype, dtype, aligned, n > _elementwise.BIG, index))
                if entry is None:
                    launch_linear("{0}", (("t", src_dtype, src_dtype),), out, dst, [src], n, aligned)
                    _CASTS[(src_dtype, dtype, aligned, n > _elementwise.BIG, index)] = _elementwise._FAST[
                        ("{0}", (("t", src_dtype, src_dtype),), dtype, aligned, n > _elementwise.BIG, index)]
                    return out
                launcher, block = entry
                streams = _STREAMS_TLS.streams  # current_handle(index)
                s = streams.get(index) if streams else None
                launcher(((n + block - 1) // block, 1, 1), 0 if s is None else s.cuda_stream, dst, src, n)
                return out
        out = _cast_contiguous(self, dtype)
        if out is not None:
            return out
    dtype = self.dtype if dtype is None else dtype
    device = self._device if device is None else device
    if device.type == "cuda" and device.index is None:
        device = self._device if self._device.type == "cuda" else device
    if device is META:
        return new_empty_tensor(self._shape, dtype, META)
    out = new_empty_tensor(self._shape, dtype, device)
    if device.type == "cpu":
        _storage.copy(out, self)
    else:
        device_copy(out, self)
    return out


def _cast_contiguous(self, dtype):
    """``self`` (contiguous, on CUDA) converted to ``dtype`` as ``device_copy`` converts it, with the
    launch plan cached per dtype pair; None for anything else (empty, bool or complex, strided)."""
    shape = self._shape
    strides, n = _SHAPES.get(shape) or contiguous_info(shape)
    if self._stride != strides or not 0 < n < _INT31 or dtype is dt.bool or dtype.is_complex or \
            self.dtype.is_complex or self._device.type != "cuda":
        return None
    out = new_empty_tensor(shape, dtype, self._device)
    src = self._storage._ptr + self._offset * self.dtype.itemsize
    dst = out._storage._ptr
    launch_linear("{0}", (("t", self.dtype, self.dtype),), out, dst, [src], n, not ((src | dst | n) & 15))
    return out


def _empty(size, *, dtype=None, device=None):
    return new_empty_tensor(size, dtype, device)


def _full(size, fill_value, *, dtype=None, device=None):
    if fill_value == 0 and not (isinstance(fill_value, float) and str(fill_value).startswith("-")):
        return new_empty_tensor(size, dtype, device, zero=True)
    t = new_empty_tensor(size, dtype, device)
    fill_values(t, fill_value)
    return t


_IOTA = """
import triton
import triton.language as tl


@triton.jit
def k(out, n, start, step, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = start + i.to(start.dtype) * step
    tl.store(out + i, v.to(out.dtype.element_ty), mask=i < n)
"""


def _arange_affine(n, start, step, *, dtype, device):
    """start + i * step computed on the device (in int64, or float64 for a float range, converted once as
    the CPU kernel does): no host buffer, so a range inside a CUDA-graph capture records a kernel."""
    from . import _compile
    from ._elementwise import TRITON
    from ._streams import current_handle

    out = new_empty_tensor((n,), dtype, device)
    if n == 0:
        return out
    if dtype is dt.bool or dtype.is_complex:
        host = OPS["arange_affine"].kernels["cpu"](n, start, step, dtype=dtype, device=CPU)
        _storage.copy(out, host)
        return out
    if not dtype.is_floating_point:
        start, step = int(start), int(step)
    exact = "i64" if isinstance(start, int) and isinstance(step, int) else "fp64"
    cast = int if exact == "i64" else float
    index = device.index or 0
    sig = {"out": "*" + TRITON[dtype], "n": "i64", "start": exact, "step": exact, "BLOCK": "constexpr"}
    launcher = _compile.kernel(_IOTA, "k", sig, {"BLOCK": 1024}, (), 4, 1, index)
    launcher((-(-n // 1024), 1, 1), current_handle(index), out.data_ptr(), n, cast(start), cast(step))
    return out


def register() -> None:
    for op in OPS.values():
        if "view" in op.tags and "cpu" in op.kernels and "cuda" not in op.kernels:
            op.kernels["cuda"] = op.kernels["cpu"]
    OPS["copy_"].kernels["cuda"] = _copy_
    OPS["clone"].kernels["cuda"] = _clone
    OPS["_to_copy"].kernels["cuda"] = _to_copy
    OPS["empty"].kernels["cuda"] = _empty
    OPS["full"].kernels["cuda"] = _full
    OPS["arange_affine"].kernels["cuda"] = _arange_affine
