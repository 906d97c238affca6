"""``libdevice`` for generated Triton kernels run by Triton's interpreter.

Generated sources import Triton's own ``triton.language.extra.libdevice`` (NVIDIA's math
library, what a GPU build calls). Triton's interpreter (``TRITON_INTERPRET=1``, how the
kernels are tested without a GPU) cannot call extern functions, so a module loaded for the
interpreter gets this stand-in as its ``libdevice``: each function is plain Python applying
the NumPy ufunc of the same meaning to the block's array (the interpreter runs kernel bodies
as Python, so such a call works like any ``tl`` op there).
"""

from __future__ import annotations

__all__ = ["numpy_libdevice"]

_INSTANCE: list = []


def numpy_libdevice():
    if not _INSTANCE:
        _INSTANCE.append(_NumpyLibdevice())
    return _INSTANCE[0]


class _NumpyLibdevice:
    """The subset of libdevice the code generator emits, on interpreter tensors."""

    def __init__(self):
        import numpy as np

        self._np = np
        unary = {"expm1": np.expm1, "log10": np.log10, "log1p": np.log1p, "tan": np.tan, "asin": np.arcsin,
                 "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
                 "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "trunc": np.trunc,
                 "rint": np.rint, "signbit": np.signbit}
        binary = {"fmod": np.fmod, "pow": np.power, "atan2": np.arctan2, "hypot": np.hypot,
                  "copysign": np.copysign, "nextafter": np.nextafter, "fmax": np.fmax, "fmin": np.fmin}
        for name, fn in unary.items():
            setattr(self, name, self._wrap(fn, 1))
        for name, fn in binary.items():
            setattr(self, name, self._wrap(fn, 2))
        self.erfc = self._wrap(self._erfc, 1)

    def _erfc(self, x):
        import math

        return self._np.vectorize(math.erfc, otypes=[x.dtype])(x)

    def _wrap(self, fn, arity):
        np = self._np

        def call(*args):
            import triton.language as tl
            from triton.runtime.interpreter import TensorHandle

            first = next(a for a in args if isinstance(a, tl.tensor))
            datas = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a, first.handle.data.dtype)
                     for a in args[:arity]]
            with np.errstate(all="ignore"):
                out = fn(*datas)
            if out.dtype == np.bool_:
                out = out.astype(np.int32)
                return tl.tensor(TensorHandle(out, tl.int32), first.type.with_element_ty(tl.int32)
                                 if first.type.is_block() else tl.int32)
            out = out.astype(first.handle.data.dtype)
            return tl.tensor(TensorHandle(out, first.handle.dtype), first.type)

        call.__name__ = getattr(fn, "__name__", "libdevice_fn")
        return call
