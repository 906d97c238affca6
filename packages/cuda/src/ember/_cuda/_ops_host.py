"""Ops that have no CUDA kernel yet and run on CUDA tensors through their CPU kernel: the tensor
arguments are copied to the host, the CPU kernel runs, the results are copied back to the device
(in-place ops write theirs into ``self``). Correct (the CPU kernel's results and errors), but each
call synchronizes and copies its operands twice, so these are for the ops ordinary GPU programs
call rarely or on small tensors: LAPACK factorizations and solves, ``unique``, ``mode`` and the
rarer special functions; ``linalg_eig`` (eig, eigvals), which PyTorch's CUDA build also computes on the
host (LAPACK's geev: MAGMA's is a host routine too). Random samplers are not among them (they would draw
from the CPU's generator, not the device's).
``packages/cuda/NOTES.md`` lists them; a device kernel replaces an entry here.
"""

from __future__ import annotations

from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

HOST_OPS = (
    # linalg (PyTorch uses cuSOLVER/MAGMA; several of its CUDA paths synchronize too)
    "linalg_cholesky_ex", "linalg_det", "linalg_eigh", "linalg_inv_ex", "linalg_ldl_factor_ex", "linalg_ldl_solve",
    "linalg_lstsq", "linalg_lu_factor_ex", "linalg_qr", "linalg_slogdet", "linalg_solve_ex", "linalg_svd", "geqrf",
    "linalg_eig",
    # data-dependent sizes or rare reductions
    "_unique2", "mode",
    # integer and special functions
    "gcd", "gcd_", "lcm", "lcm_", "frexp.Tensor", "igamma", "igammac", "polygamma", "special_airy_ai",
    "special_i0e", "special_i1e", "special_modified_bessel_k0", "special_modified_bessel_k1",
    "special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k1", "special_spherical_bessel_j0",
    "special_zeta",
)


def _device_of(args, kwargs):
    """The CUDA device of the call; RuntimeError (PyTorch's message) when tensors of another device are
    mixed in (0-dim CPU tensors are allowed, as PyTorch's pointwise ops allow them)."""
    device = None
    for a in _tensors((args, kwargs)):
        if a._device.type == "cuda":
            if device is None:
                device = a._device
            elif a._device != device:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, {device} and {a._device}!")
    for a in _tensors((args, kwargs)):
        if a._device.type != "cuda" and a.ndim:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{device} and {a._device}!")
    return device


def _tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _map(obj, fn):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        return type(obj)(*(_map(o, fn) for o in obj)) if hasattr(obj, "_fields") else tuple(_map(o, fn) for o in obj)
    if isinstance(obj, list):
        return [_map(o, fn) for o in obj]
    if isinstance(obj, dict):
        return {k: _map(v, fn) for k, v in obj.items()}
    return obj


def _through_host(name: str):
    op = OPS[name]
    cpu_kernel = op.kernels["cpu"]
    inplace = "inplace" in op.tags

    def kernel(*args, **kwargs):
        device = _device_of(args, kwargs)

        def to_host(t):
            return t.cpu() if t._device.type == "cuda" else t

        result = cpu_kernel(*_map(args, to_host), **_map(kwargs, to_host))
        if inplace:
            self = args[0]
            self.copy_(result)
            return self
        return _map(result, lambda t: t.to(device))

    return kernel


def register() -> None:
    for name in HOST_OPS:
        if name in OPS and "cpu" in OPS[name].kernels:
            OPS[name].kernels["cuda"] = _through_host(name)
