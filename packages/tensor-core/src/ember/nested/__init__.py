"""``ember.nested``: a list of tensors of one rank and dtype whose sizes may differ (PyTorch's
strided nested tensor), with what programs use of it: building one, ``unbind``, indexing,
``to_padded_tensor``. A ``NestedTensor`` is its own class, not an ``ember.Tensor``: ops other than
these are not provided (docs/deviations.md)."""

from __future__ import annotations

from ember._src import dtypes
from ember._src.device import device as _device
from ember._src.layouts import strided
from ember._src.tensor import Tensor

__all__ = ["NestedTensor", "as_nested_tensor", "nested_tensor", "to_padded_tensor"]


class NestedTensor:
    """Tensors of one rank, dtype and device, of sizes that may differ (``is_nested``)."""

    is_nested = True
    layout = strided

    def __init__(self, tensors: list):
        self._tensors = tensors

    @property
    def dtype(self):
        return self._tensors[0].dtype if self._tensors else dtypes.get_default_dtype()

    @property
    def device(self):
        return self._tensors[0].device if self._tensors else _device("cpu")

    @property
    def requires_grad(self) -> bool:
        return any(t.requires_grad for t in self._tensors)

    def dim(self) -> int:
        return (self._tensors[0].dim() if self._tensors else 0) + 1

    ndim = property(dim)

    def size(self, dim: int | None = None):
        if dim is None:
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. Please file an issue.")
        n = self.dim()
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        dim %= n
        if dim == 0:
            return len(self._tensors)
        sizes = {t.shape[dim - 1] for t in self._tensors}
        if len(sizes) != 1:
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return sizes.pop()

    def numel(self) -> int:
        return sum(t.numel() for t in self._tensors)

    def unbind(self, dim: int = 0) -> tuple:
        if dim != 0:
            raise RuntimeError("unbind(): only supported for NestedTensor on dim=0")
        return tuple(self._tensors)

    def __getitem__(self, index):
        if isinstance(index, bool) or not isinstance(index, int):
            raise NotImplementedError("NestedTensor indexing takes an int (the index of a component)")
        return self._tensors[index]

    def __iter__(self):
        return iter(self._tensors)

    def to_padded_tensor(self, padding: float, output_size=None) -> Tensor:
        return to_padded_tensor(self, padding, output_size)

    def __repr__(self) -> str:
        body = ",\n".join("  " + repr(t).replace("\n", "\n  ") for t in self._tensors)
        return f"nested_tensor([\n{body}\n])"


def _components(tensor_list, dtype, device, what: str) -> list:
    from ember._src.ops.creation.factories import tensor as make

    if isinstance(tensor_list, Tensor) or not isinstance(tensor_list, (list, tuple)):
        raise TypeError(f"{what}(): expected a list of tensors, got {type(tensor_list).__name__}")
    out = [t if isinstance(t, Tensor) else make(t, dtype=dtype) for t in tensor_list]
    for i, t in enumerate(out[1:], 1):
        if t.dim() != out[0].dim():
            raise RuntimeError(
                f"All Tensors given to nested_tensor must have the same dimension. Found dimension {t.dim()} for "
                f"Tensor at index {i} and dimension {out[0].dim()} for Tensor at index 0.")
    if dtype is None and out:
        dtype = out[0].dtype
    return [t.to(device=device if device is not None else t.device, dtype=dtype) for t in out]


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A nested tensor holding copies of the tensors (detached: a leaf), as ``torch.nested.nested_tensor``."""
    parts = [t.detach().clone() for t in _components(tensor_list, dtype, device, "nested_tensor")]
    if requires_grad:
        for t in parts:
            t.requires_grad_(True)
    return NestedTensor(parts)


def as_nested_tensor(ts, dtype=None, device=None, layout=None) -> NestedTensor:
    """A nested tensor of the tensors, keeping their autograd history (copies, as PyTorch's)."""
    if isinstance(ts, NestedTensor):
        return ts
    return NestedTensor([t.clone() for t in _components(ts, dtype, device, "as_nested_tensor")])


def to_padded_tensor(input: NestedTensor, padding: float, output_size=None) -> Tensor:
    """The components stacked into one tensor, each padded with ``padding`` to the largest size (or
    ``output_size``) in every dimension."""
    from ember._src.ops.creation.factories import full
    from ember._src.ops.nn.resample import pad
    from ember._src.ops.shape.joining import stack

    parts = input._tensors
    if not parts:
        return full(tuple(output_size or (0,)), padding, dtype=input.dtype)
    rank = parts[0].dim()
    target = [max(t.shape[d] for t in parts) for d in range(rank)]
    if output_size is not None:
        output_size = tuple(output_size)
        if len(output_size) != rank + 1 or output_size[0] != len(parts) or any(
                o < t for o, t in zip(output_size[1:], target)):
            raise RuntimeError("to_padded_tensor: output_size must be (components, sizes at least the largest)")
        target = list(output_size[1:])
    padded = []
    for t in parts:
        widths = []
        for d in reversed(range(rank)):
            widths += [0, target[d] - t.shape[d]]
        padded.append(pad(t, widths, value=padding) if any(widths) else t)
    return stack(padded)
