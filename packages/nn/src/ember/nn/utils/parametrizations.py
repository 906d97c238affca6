"""``ember.nn.utils.parametrizations``: orthogonal, weight and spectral normalization expressed
with ``parametrize.register_parametrization`` (state-dict keys
``parametrizations.<name>.original0/original1`` and ``parametrizations.<name>.original``)."""

from __future__ import annotations

import ember
from ember import Tensor

from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from . import parametrize
from ._weight_norm_math import norm_except_dim
from ._weight_norm_math import weight_norm as _weight_norm_fn

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]

_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H (``linalg.householder_product``).

    A loop over the k reflectors, each applied with whole-matrix ops (differentiable as is).
    """
    n, k = a.shape[-2], a.shape[-1]
    eye = ember.eye(n, dtype=a.dtype, device=a.device)
    below = a.tril(-1)
    q = eye[:, :k].expand(*a.shape[:-2], n, k)
    for i in reversed(range(k)):
        v = (below[..., :, i] + eye[:, i]).unsqueeze(-1)
        q = q - tau[..., i, None, None] * (v @ (v.mH @ q))
    return q


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eye = ember.eye(k, dtype=q.dtype, device=q.device)
    eps = 10.0 * n * ember.finfo(q.dtype).eps
    return ember.allclose(q.mH @ q, eye, atol=eps)


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of a = QR (a tall) with diag(R) real and non-negative."""
    q, r = ember.linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            # The orthogonal point the map is centred at (set by right_inverse).
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                x = ember.cat([x, x.new_zeros(n, n - k).expand(*x.shape[:-2], -1, -1)], dim=-1)
            a = x - x.mH  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                q = ember.linalg.matrix_exp(a)
            else:
                eye = ember.eye(n, dtype=a.dtype, device=a.device)
                q = ember.linalg.solve(ember.add(eye, a, alpha=-0.5), ember.add(eye, a, alpha=0.5))
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = _householder_product(a, tau)
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            q = self.base @ q
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q: Tensor) -> Tensor:
        with ember.no_grad():
            return self._right_inverse(q)

    def _right_inverse(self, q: Tensor) -> Tensor:
        if q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {q.shape}.")
        q_init = q
        n, k = q.shape[-2], q.shape[-1]
        if n < k:
            q = q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                          "parametrizations when use_trivialization=False.")
            # PyTorch stores geqrf's reflectors here; ember has no geqrf kernel.
            raise RuntimeError("orthogonal(orthogonal_map='householder', use_trivialization=False) is not "
                               "supported by ember (it needs torch.geqrf)")
        if n == k:
            q = _make_orthogonal(q) if not _is_orthogonal(q) else q.clone()
        else:
            extra = ember.randn(*(q.shape[:-2] + (n, n - k)), dtype=q.dtype, device=q.device)
            q = _make_orthogonal(ember.cat([q, extra], dim=-1))
        self.base = q
        neg_id = ember.zeros_like(q_init)
        neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrains ``module.<name>`` to orthogonal (unitary) matrices."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm_fn(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrizes ``module.<name>`` as ``g * v / ||v||`` (``original0`` = g, ``original1`` = v)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs) -> None:
        # Checkpoints of the legacy hook-based weight_norm store <name>_g / <name>_v.
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            # Start from a good estimate of the singular vectors.
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # Updates the buffers in place, without recording gradients.
        with ember.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(ember.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(ember.mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = ember.vdot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value  # any tensor works as the original: spectral_norm only rescales it


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Reparametrizes ``module.<name>`` divided by its spectral norm (power iteration, buffers ``_u``/``_v``)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
