"""Legacy hook-based ``spectral_norm`` (``<name>_orig`` parameter, ``<name>_u``/``<name>_v``
buffers), superseded in PyTorch by ``ember.nn.utils.parametrizations.spectral_norm``."""

from __future__ import annotations

import ember
from ember import Tensor

from ..functional import normalize
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


class SpectralNorm:
    """The forward pre-hook setting ``module.<name>`` to ``<name>_orig / sigma``."""

    _version = 1  # version 1: <name>_v is a buffer (version None checkpoints lack it)

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        weight_mat = weight
        if self.dim != 0:
            weight_mat = weight_mat.permute(self.dim, *[d for d in range(weight_mat.ndim) if d != self.dim])
        return weight_mat.reshape(weight_mat.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    # In place: the buffers carry the estimate to the next forward.
                    v.copy_(normalize(ember.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(normalize(ember.mv(weight_mat, v), dim=0, eps=self.eps))
                # Clones, so that backward does not see the next in-place update.
                u = u.clone()
                v = v.clone()
        sigma = ember.dot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat: Tensor, u: Tensor, target_sigma: Tensor) -> Tensor:
        # v such that u = normalize(W v) and u^T W v = sigma (old checkpoints did not store v).
        wt = weight_mat.t()
        v = ember.linalg.pinv(wt.mm(weight_mat)).mm(wt).mm(u.unsqueeze(1)).squeeze(1)
        return v.mul_(target_sigma / ember.dot(u, ember.mv(weight_mat, v)))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with ember.no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # A plain attribute until the first forward computes it (kept out of the state dict).
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Converts checkpoints without ``<name>_v`` (version None) to the current layout."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        weight_key = prefix + fn.name
        if version is None and all(weight_key + s in state_dict for s in ("_orig", "_u", "_v")) \
                and weight_key not in state_dict:
            return  # saved without metadata but already in the current layout
        missing = [weight_key + s for s in ("_orig", "", "_u") if weight_key + s not in state_dict]
        if missing:
            if strict:
                missing_keys.extend(missing)
            return
        with ember.no_grad():
            weight_orig = state_dict[weight_key + "_orig"]
            weight = state_dict.pop(weight_key)
            sigma = (weight_orig / weight).mean()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, state_dict[weight_key + "_u"], sigma)


class SpectralNormStateDictHook:
    """Records the layout version under ``metadata['spectral_norm']``."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module, state_dict, prefix, local_metadata) -> None:
        metadata = getattr(state_dict, "_metadata", None)
        if metadata is not None:
            local_metadata = metadata.setdefault(prefix[:-1], {})
        entry = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in entry:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        entry[key] = self.fn._version


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divides ``module.<name>`` by its spectral norm (power iteration) before every forward."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Removes the spectral-norm hooks, leaving ``module.<name>`` a parameter with its current value."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for hooks, kind in ((module._state_dict_hooks, SpectralNormStateDictHook),
                        (module._load_state_dict_pre_hooks, SpectralNormLoadStateDictPreHook)):
        for key, hook in hooks.items():
            if isinstance(hook, kind) and hook.fn.name == name:
                del hooks[key]
                break
    return module
