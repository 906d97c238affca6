"""repr/str of tensors in PyTorch's exact format.

One number format is chosen for all printed elements (``_Formatter``): integer-valued
floats print as ``1.``, scientific notation is used when the non-zero finite magnitudes
span more than 1000x, exceed 1e8 or go below 1e-4, and every element is right-aligned
to the widest. Past ``threshold`` elements only ``edgeitems`` rows/columns at each end are
shown. Rows wrap at ``linewidth``; suffixes (device, size, dtype, grad) follow on the last
line while they fit.
"""

from __future__ import annotations

import math

from . import dtypes
from .dispatch import sync_pending


class PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


OPTIONS = PrintOptions()

_PROFILES = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """As ``torch.set_printoptions``: a profile first, then the explicit options; sci_mode is always set."""
    if profile in _PROFILES:  # PyTorch ignores unknown profiles
        OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems, OPTIONS.linewidth = _PROFILES[profile]
    if precision is not None:
        OPTIONS.precision = precision
    if threshold is not None:
        OPTIONS.threshold = threshold
    if edgeitems is not None:
        OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        OPTIONS.linewidth = linewidth
    OPTIONS.sci_mode = sci_mode


class _Ellipsis:
    """Marks the summarized middle of a dimension in the nested value lists."""


_SKIP = _Ellipsis()


class _Formatter:
    """Chooses one format for every printed value, exactly as PyTorch's ``_Formatter``."""

    def __init__(self, values: list, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = OPTIONS.precision
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        # Only non-zero finite values decide the format (zeros, nan and inf fit any).
        finite = [v for v in values if math.isfinite(v) and v != 0]
        if not finite:
            return
        magnitudes = [abs(v) for v in finite]
        lo, hi = min(magnitudes), max(magnitudes)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if OPTIONS.sci_mode is None:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        else:
            self.sci_mode = bool(OPTIONS.sci_mode)
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{p}e}") for v in finite)
        elif self.int_mode:
            self.max_width = max(len(f"{v:.0f}") + 1 for v in finite)  # + the trailing "."
        else:
            self.max_width = max(len(f"{v:.{p}f}") for v in finite)

    def format(self, v) -> str:
        p = OPTIONS.precision
        if not self.floating:
            text = f"{v}"
        elif self.sci_mode:
            text = f"{v:{self.max_width}.{p}e}"
        elif self.int_mode:
            text = f"{v:.0f}"
            if math.isfinite(v):
                text += "."
        else:
            text = f"{v:.{p}f}"
        return " " * (self.max_width - len(text)) + text


def _nested(t, summarize: bool):
    """The printed values of ``t`` as nested lists, with ``_SKIP`` where rows are summarized away."""
    if t.ndim == 0:
        return t.tolist()
    n, e = t._shape[0], OPTIONS.edgeitems
    if summarize and n > 2 * e:
        if t.ndim == 1:
            return t.narrow(0, 0, e).tolist() + [_SKIP] + t.narrow(0, n - e, e).tolist()
        rows = list(range(e)) + [None] + list(range(n - e, n))
        return [_SKIP if i is None else _nested(t.select(0, i), summarize) for i in rows]
    if not summarize or t.ndim == 1:
        return t.tolist()
    return [_nested(t.select(0, i), summarize) for i in range(n)]


def _flat_values(node, out: list) -> list:
    if isinstance(node, list):
        for item in node:
            _flat_values(item, out)
    elif node is not _SKIP:
        out.append(node)
    return out


class _ComplexFormatter:
    """PyTorch's complex format: real and imaginary parts each get their own _Formatter."""

    def __init__(self, values: list):
        self.real = _Formatter([v.real for v in values], True)
        self.imag = _Formatter([v.imag for v in values], True)
        self.max_width = self.real.max_width + self.imag.max_width + 1  # + the "j"

    def format(self, v) -> str:
        real = self.real.format(v.real)
        imag = (self.imag.format(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector_str(values: list, indent: int, fmt: _Formatter) -> str:
    per_line = max(1, math.floor((OPTIONS.linewidth - indent) / (fmt.max_width + 2)))
    if values == [_SKIP]:
        data = ["..."]  # edgeitems == 0
    else:
        data = [" ..." if v is _SKIP else fmt.format(v) for v in values]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(node, ndim: int, indent: int, fmt: _Formatter) -> str:
    if ndim == 0:
        return fmt.format(node)
    if ndim == 1:
        return _vector_str(node, indent, fmt)
    parts = ["..." if row is _SKIP else _tensor_str(row, ndim - 1, indent + 1, fmt) for row in node]
    return "[" + ("," + "\n" * (ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _body(t, indent: int) -> str:
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > OPTIONS.threshold
    if t.dtype is dtypes.float16 or t.dtype is dtypes.bfloat16:
        t = t.to(dtypes.float32)
    node = _nested(t, summarize)
    if t.dtype.is_complex:
        return _tensor_str(node, t.ndim, indent, _ComplexFormatter(_flat_values(node, [])))
    fmt = _Formatter(_flat_values(node, []), t.dtype.is_floating_point)
    return _tensor_str(node, t.ndim, indent, fmt)


def _add_suffixes(text: str, suffixes: list, indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t) -> str:
    from .tensor import Tensor

    sync_pending(t, "printing a tensor")
    if t._layout.dispatch_key is not None:
        from .sparse._methods import sparse_repr

        return sparse_repr(t)
    plain = type(t) is Tensor or type(t).__name__ == "Parameter"
    prefix = "tensor(" if plain else f"{type(t).__name__}("
    indent = len(prefix)
    data = t.detach()
    if t._device.type not in ("cpu", "meta"):
        data = data.to("cpu")  # a plugin device's values are formatted from a host copy
    suffixes = []
    if t._device.type != "cpu":
        suffixes.append(f"device='{t._device}'")
    default_dtype = dtypes.get_default_dtype()
    default_complex = default_dtype.to_complex()
    if t._device.type == "meta":
        suffixes.append(f"size={tuple(t._shape)}")
        if t.dtype is not default_dtype:
            suffixes.append(f"dtype={t.dtype}")
        body = "..."
    elif t.numel() == 0:
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t._shape)}")
        if t.dtype is not default_dtype:
            suffixes.append(f"dtype={t.dtype}")
        body = "[]"
    else:
        if not OPTIONS.edgeitems:
            suffixes.append(f"size={tuple(t._shape)}")
        if t.dtype not in (default_dtype, default_complex, dtypes.int64, dtypes.bool):
            suffixes.append(f"dtype={t.dtype}")
        body = _body(data, indent)
    try:
        fn = t.grad_fn
    except RuntimeError:  # a view made without recording whose base was written since: PyTorch's mark
        suffixes.append("grad_fn=<Invalid>")
    else:
        if fn is not None:
            suffixes.append(f"grad_fn=<{type(fn).__name__}>")
        elif t.requires_grad:
            suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
