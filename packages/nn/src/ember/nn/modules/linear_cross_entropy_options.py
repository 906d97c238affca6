"""``LinearCrossEntropyOptions``: how ``F.linear_cross_entropy`` chunks the batch so that the whole
``(num_batches, num_classes)`` logits tensor never exists at once (PyTorch 2.13's fields, defaults,
validation and resolution rules)."""

from __future__ import annotations

import dataclasses

import ember

__all__ = ["LinearCrossEntropyOptions"]

_POLICIES = ("auto", "accurate", "balanced", "compact")
# The "auto" picks per (device type, input dtype); others fall back to ("compact", "aspect_ratio:2").
_AUTO = {("cuda", "bfloat16"): ("compact", "aspect_ratio:2"), ("cuda", "float16"): ("compact", "aspect_ratio:2"),
         ("cpu", "bfloat16"): ("accurate", "aspect_ratio"), ("cpu", "float16"): ("accurate", "aspect_ratio")}
_AUTO_FALLBACK = ("compact", "aspect_ratio:2")


def _aspect_ratio_factor(method: str) -> int | None:
    name, sep, factor = method.partition(":")
    factor = factor if sep else "1"
    return int(factor) if name == "aspect_ratio" and factor.isdigit() and int(factor) > 0 else None


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """Chunking of ``linear_cross_entropy``'s batch: ``batch_chunk_size`` rows per chunk, or a size
    from ``chunking_method`` (``"aspect_ratio[:N]"``: a chunk's logits about the size of the input,
    divided by N; ``"auto"``: per device and dtype); ``acc_dtype`` is the dtype the logits and the
    loss are computed in (``None``: float32 for half-precision input under ``acc_policy="auto"``).
    ``allow_retain_graph`` is accepted for PyTorch's signature: ember's chunked backward always
    allows a second backward with ``retain_graph=True`` (docs/deviations.md)."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: ember.dtype | None = None

    def __post_init__(self):
        if self.acc_policy not in _POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method not in (None, "auto") and _aspect_ratio_factor(self.chunking_method) is None:
            raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        size = self.batch_chunk_size
        if not (size is None or (isinstance(size, int) and not isinstance(size, bool) and size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {size!r}")
        allowed = (ember.float16, ember.bfloat16, ember.float32, ember.float64)
        if self.acc_dtype is not None and self.acc_dtype not in allowed:
            raise ValueError(f"acc_dtype must be one of {{None, torch.float16, torch.bfloat16, torch.float32, "
                             f"torch.float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             "automatically.")

    def _adjust(self, num_batches: int, in_features: int, num_classes: int, dtype, device=None):
        """These options with every "auto"/None resolved for one call (PyTorch's rules)."""
        policy, method = self.acc_policy, self.chunking_method
        if method == "auto" and self.batch_chunk_size is not None:
            method = None  # an explicit size wins over the automatic method
        if "auto" in (policy, method):
            key = (device.type, str(dtype).split(".")[-1]) if device is not None else None
            auto_policy, auto_method = _AUTO.get(key, _AUTO_FALLBACK)
            policy = auto_policy if policy == "auto" else policy
            method = auto_method if method == "auto" else method
        size = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size, num_batches)
        if method is not None:
            per_chunk = -(-num_batches // -(-num_classes // max(in_features, 1)))  # ceil(N / ceil(C / F))
            size = min((1 << (per_chunk - 1).bit_length()) // _aspect_ratio_factor(method), num_batches)
            if self.batch_chunk_size is not None and self.batch_chunk_size != size:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method ('{method}') "
                                 f"give different chunk sizes ({self.batch_chunk_size} vs {size}); pass only one.")
        acc = self.acc_dtype
        if acc is None:
            half = dtype in (ember.float16, ember.bfloat16)
            acc = ember.float32 if self.acc_policy == "auto" and half and device is not None \
                and device.type == "cpu" else dtype
        return dataclasses.replace(self, acc_policy=policy, chunking_method=method,
                                   batch_chunk_size=max(1, size), acc_dtype=acc)
