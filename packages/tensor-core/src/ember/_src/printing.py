"""repr/str of tensors in PyTorch's format (summarized with ``...`` past 1000 elements)."""

from __future__ import annotations

import math

from . import dtypes as dt


class PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


OPTIONS = PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    if profile == "default":
        OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems, OPTIONS.linewidth = 4, 1000, 3, 80
    elif profile == "short":
        OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems, OPTIONS.linewidth = 2, 1000, 2, 80
    elif profile == "full":
        OPTIONS.precision, OPTIONS.threshold, OPTIONS.edgeitems, OPTIONS.linewidth = 4, math.inf, 3, 80
    if precision is not None:
        OPTIONS.precision = precision
    if threshold is not None:
        OPTIONS.threshold = threshold
    if edgeitems is not None:
        OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        OPTIONS.linewidth = linewidth
    OPTIONS.sci_mode = sci_mode


class _Formatter:
    """Chooses one number format for all printed elements, as PyTorch does."""

    def __init__(self, values: list, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not floating:
            self.max_width = max((len(str(v)) for v in values), default=1)
            return
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            self.max_width = max((len(self._fmt_special(v)) for v in values), default=1)
            return
        self.int_mode = all(v == math.floor(v) for v in finite)
        nonzero = [abs(v) for v in finite if v != 0]
        if self.int_mode:
            if nonzero and max(nonzero) > 1e8:
                self.sci_mode = True
                self.int_mode = False
        elif nonzero:
            lo, hi = min(nonzero), max(nonzero)
            if hi / lo > 1000.0 or hi > 1e8 or lo < 1e-4:
                self.sci_mode = True
        if OPTIONS.sci_mode is not None:
            self.sci_mode = OPTIONS.sci_mode
        self.max_width = max(len(self.format(v)) for v in values)

    @staticmethod
    def _fmt_special(v):
        if math.isnan(v):
            return "nan"
        return "inf" if v > 0 else "-inf"

    def format(self, v) -> str:
        if not self.floating:
            return str(v)
        if not math.isfinite(v):
            return self._fmt_special(v)
        p = OPTIONS.precision
        if self.sci_mode:
            return f"{v:.{p}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{p}f}"

    def pad(self, v) -> str:
        return self.format(v).rjust(self.max_width)


def _summarize_rows(n, summarize):
    e = OPTIONS.edgeitems
    if summarize and n > 2 * e:
        return list(range(e)), list(range(n - e, n))
    return list(range(n)), []


def _collect(arr, summarize, out):
    if arr.ndim == 0:
        out.append(arr.item())
        return
    head, tail = _summarize_rows(arr.shape[0], summarize)
    for i in head + tail:
        _collect(arr[i], summarize, out)


def _format_nd(arr, fmt, indent, summarize) -> str:
    if arr.ndim == 0:
        return fmt.pad(arr.item())
    head, tail = _summarize_rows(arr.shape[0], summarize)
    if arr.ndim == 1:
        items = [fmt.pad(arr[i].item()) for i in head]
        if tail:
            items.append("...")
            items += [fmt.pad(arr[i].item()) for i in tail]
        # Wrap lines at linewidth like PyTorch.
        per_line = max(1, (OPTIONS.linewidth - indent) // (fmt.max_width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    parts = [_format_nd(arr[i], fmt, indent + 1, summarize) for i in head]
    if tail:
        parts.append("...")
        parts += [_format_nd(arr[i], fmt, indent + 1, summarize) for i in tail]
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def tensor_repr(t) -> str:
    from .ops._common import type_name

    suffixes = []
    if t._device.type != "cpu":
        suffixes.append(f"device='{t._device}'")
    if t._device.type == "meta":
        body = "..."
        suffixes.append(f"size={tuple(t._shape)}")
        if t.dtype is not dt.get_default_dtype():
            suffixes.append(f"dtype={t.dtype}")
        return f"tensor({body}, {', '.join(suffixes)})"
    _ = type_name
    data = t.detach()
    if data.dtype is dt.bfloat16 or data.dtype is dt.float16:
        values_src = data.to(dt.float32)
    else:
        values_src = data
    arr = values_src.numpy()
    n = t.numel()
    summarize = n > OPTIONS.threshold
    floating = t.dtype.is_floating_point
    if t.dtype is dt.bool:
        values = []
        body = _format_bool(arr, summarize)
    else:
        values = []
        _collect(arr, summarize, values)
        fmt = _Formatter([float(v) if floating else int(v) for v in values], floating)
        body = _format_nd(arr, fmt, len("tensor("), summarize) if n else "[]"
    default_int = t.dtype is dt.int64
    default_float = t.dtype is dt.get_default_dtype()
    show_dtype = not (default_int or default_float or t.dtype is dt.bool)
    if n == 0 and t.ndim != 1:
        suffixes.append(f"size={tuple(t._shape)}")
    if show_dtype:
        suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    if suffixes:
        return f"tensor({body}, {', '.join(suffixes)})"
    return f"tensor({body})"


def _format_bool(arr, summarize) -> str:
    class _BoolFmt:
        max_width = 5

        @staticmethod
        def pad(v):
            return str(bool(v)).rjust(5)

    return _format_nd(arr, _BoolFmt, len("tensor("), summarize) if arr.size else "[]"
