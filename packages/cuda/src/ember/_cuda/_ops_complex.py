"""Complex tensors through the real CUDA kernels, for the ops whose complex form splits into its parts:

- data movement (flip, index_select, gather, index, index_put_, masked_scatter_, embedding, index_copy_,
  index_fill_, index_add_ with a real alpha): the op on the real parts, then on the imaginary parts (each a
  strided float view of the complex tensor: in place, each writes its half of the pairs), the out-of-place
  result joined by ``complex`` (a real data operand's imaginary part is zero);
- cumsum: linear, so the parts' (..., 2) float view scanned along the same dim;
- var/std (and _mean): PyTorch's complex variance is E|z - mean|^2 = var(real) + var(imag), a real result;
- norm: the norm of ``abs`` (PyTorch's vector norm of complex numbers), a real result;
- logsumexp: shifted by the largest real part, in dispatched ops (the CPU's formula);
- prod: on the host (the CPU's complex product kernel; one copy each way), as there is no complex
  multiplication in the reduction kernels.

``register`` wraps the kernels the op modules registered before it (called from _ops_composite's).
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.creation.factories import scalar_tensor
from ember._src.ops.pointwise.complex import view_as_complex_op, view_as_real_op
from ember._src.tensor import Tensor

_COMPLEX = (dt.complex64, dt.complex128)


def _part(x, which: int):
    """The real (0) or imaginary (1) parts of a complex tensor (a strided float view); a real float
    tensor (a data operand promoted to complex) is its own real part with zero imaginary parts."""
    if isinstance(x, Tensor):
        if x.dtype in _COMPLEX:
            return view_as_real_op(x).select(-1, which)
        if x.dtype.is_floating_point and which:
            return x.new_zeros(x._shape)
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_part(v, which) for v in x)
    return x


def _join(re, im):
    if isinstance(re, Tensor) and re.dtype.is_floating_point:
        return OPS["complex"](re, im)
    if isinstance(re, tuple):
        return tuple(_join(a, b) for a, b in zip(re, im))
    return re  # (indices and the like: the same from both calls)


def _by_parts(kernel, inplace: bool, value_at: int | None = None):
    """``kernel`` run on each part when its first argument is complex. ``value_at``: the index in the
    arguments after the first of a scalar data argument (index_fill_'s value), split into its parts."""

    def run(a, *args, **kwargs):
        if type(a) is not Tensor or a.dtype not in _COMPLEX:
            return kernel(a, *args, **kwargs)
        if "alpha" in kwargs and isinstance(kwargs["alpha"], complex):
            raise NotImplementedError("a complex alpha has no CUDA kernel in ember (the parts would mix)")
        results = []
        for which in (0, 1):
            pa = [_part(x, which) for x in args]
            if value_at is not None and len(args) > value_at and not isinstance(args[value_at], Tensor):
                v = complex(args[value_at])  # a number: a 0-d tensor of its part (the kernel takes a tensor)
                pa[value_at] = scalar_tensor(v.imag if which else v.real, dtype=a.dtype.to_real())
            results.append(kernel(_part(a, which), *pa, **{k: _part(v, which) for k, v in kwargs.items()}))
        if inplace:
            return a  # (each part's call bumped the shared version counter: two bumps for one write)
        return _join(*results)

    return run


def _cumsum(kernel):
    def run(x, dim, dtype=None):
        rd = dtype if dtype is not None else x.dtype
        if rd not in _COMPLEX:
            return kernel(x, dim, dtype)
        src = x if x.dtype is rd else x.to(rd)
        if src.ndim == 0:
            return src.clone()
        # (the scan's result has the scanned dim's layout: the parts made adjacent again for the complex view)
        return view_as_complex_op(kernel(view_as_real_op(src), dim % src.ndim, None).contiguous())

    return run


def _variance(kernel, with_mean: bool):
    def run(x, dim=None, correction=1, keepdim=False):
        if x.dtype not in _COMPLEX:
            return kernel(x, dim, correction, keepdim)
        re = kernel(_part(x, 0), dim, correction, keepdim)
        im = kernel(_part(x, 1), dim, correction, keepdim)
        if with_mean:
            (vr, mr), (vi, mi) = re, im
        else:
            vr, vi = re, im
        return (vr + vi, OPS["complex"](mr, mi)) if with_mean else vr + vi

    return run


def _std(kernel, complex_variance, with_mean: bool):
    """std (and std_mean) of complex: sqrt(var(real) + var(imag)), from ``complex_variance`` (var's or
    var_mean's wrapped kernel)."""

    def run(x, dim=None, correction=1, keepdim=False):
        if x.dtype not in _COMPLEX:
            return kernel(x, dim, correction, keepdim)
        if with_mean:
            var, mean = complex_variance(x, dim, correction, keepdim)
            return var.sqrt(), mean
        return complex_variance(x, dim, correction, keepdim).sqrt()

    return run


def _norm(kernel):
    def run(x, p="fro", dim=None, keepdim=False, dtype=None):
        if x.dtype not in _COMPLEX and (dtype is None or dtype not in _COMPLEX):
            return kernel(x, p, dim, keepdim, dtype)
        return kernel(x.abs(), p, dim, keepdim, None if dtype is None else dtype.to_real())

    return run


def _logsumexp(kernel):
    """log(sum(exp(z))) shifted by the largest real part (0 where it is infinite), as PyTorch's and the
    CPU's complex logsumexp, in dispatched ops."""

    def run(x, dim, keepdim=False):
        if x.dtype not in _COMPLEX:
            return kernel(x, dim, keepdim)
        from ember._src.ops.reduction import composite

        dims, shape, _ = composite._lse_result(x, dim, keepdim)
        dims = list(dims)
        if x.numel() == 0 or not dims:
            return x.exp().sum(dims, keepdim=keepdim).log() if dims else x.exp().log()
        m = _part(x, 0).amax(dims, keepdim=True)
        m = m.where(~m.isinf(), 0.0)
        s = (x - m).exp().sum(dims, keepdim=keepdim)
        return s.log() + m.reshape(s._shape)

    return run


def _prod(kernel, cpu_kernel):
    def run(x, dim=None, keepdim=False, dtype=None):
        if x.dtype not in _COMPLEX and (dtype is None or dtype not in _COMPLEX):
            return kernel(x, dim, keepdim, dtype)
        return cpu_kernel(x.cpu(), dim, keepdim, dtype).to(x._device)

    return run


def register() -> None:
    kernels = {name: OPS[name].kernels["cuda"] for name in (
        "flip", "index_select", "gather", "index", "index_put_", "masked_scatter_", "embedding", "index_copy_",
        "index_fill_", "index_add_", "cumsum", "var", "var_mean", "std", "std_mean", "norm", "prod", "logsumexp")}
    for name in ("flip", "index_select", "gather", "index", "embedding"):
        OPS[name].kernels["cuda"] = _by_parts(kernels[name], False)
    for name in ("index_put_", "masked_scatter_", "index_copy_", "index_add_"):
        OPS[name].kernels["cuda"] = _by_parts(kernels[name], True)
    OPS["index_fill_"].kernels["cuda"] = _by_parts(kernels["index_fill_"], True, value_at=2)
    OPS["cumsum"].kernels["cuda"] = _cumsum(kernels["cumsum"])
    OPS["var"].kernels["cuda"] = _variance(kernels["var"], False)
    OPS["var_mean"].kernels["cuda"] = _variance(kernels["var_mean"], True)
    OPS["std"].kernels["cuda"] = _std(kernels["std"], OPS["var"].kernels["cuda"], False)
    OPS["std_mean"].kernels["cuda"] = _std(kernels["std_mean"], OPS["var_mean"].kernels["cuda"], True)
    OPS["norm"].kernels["cuda"] = _norm(kernels["norm"])
    OPS["prod"].kernels["cuda"] = _prod(kernels["prod"], OPS["prod"].kernels["cpu"])
    OPS["logsumexp"].kernels["cuda"] = _logsumexp(kernels["logsumexp"])
