"""``ember.utils.flop_counter``: ``FlopCounterMode`` counts the FLOPs of the matrix products and
convolutions run inside it, forward and backward, per module (PyTorch's
``torch.utils.flop_counter``).

A dispatch mode sees every op; an op with a formula in ``flop_registry`` adds its count to
"Global" and to each module being run. Modules are tracked with global forward hooks; in the
backward a module is current from when its outputs' gradients are ready until its inputs' are
(multi-grad hooks), as PyTorch's ModuleTracker does. Formulas take shapes (``register_flop_formula``
wraps them; ``get_raw=True`` gets the op's own arguments).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable
from math import prod

import ember
from ember._src.dispatch import DispatchMode, Op
from ember._src.tensor import Tensor

from . import _pytree

__all__ = ["FlopCounterMode", "register_flop_formula"]

aten = ember.ops.aten
flop_registry: dict = {}


def _packet(op):
    """The ``aten.<name>`` packet that stands for ``op``: a packet, an overload (``aten.mm.default``),
    a dispatcher op, or a name."""
    if isinstance(op, Op):
        name = op.name
    else:
        name = str(op)
        if name.startswith("aten."):
            name = name.split(".")[1]
    return getattr(aten, name)


def get_shape(i):
    return tuple(i.shape) if isinstance(i, Tensor) else i


def shape_wrapper(f: Callable) -> Callable:
    """``f`` called with each tensor argument replaced by its shape (``out_shape`` for the result)."""

    def nf(*args, out_val=None, **kwargs):
        args, kwargs, out_shape = _pytree.tree_map(get_shape, (args, kwargs, out_val))
        return f(*args, out_shape=out_shape, **kwargs)

    nf.__name__ = getattr(f, "__name__", "formula")
    return nf


def register_flop_formula(targets, get_raw: bool = False):
    """Decorator: ``formula`` counts the FLOPs of the op(s) ``targets``."""

    def register(formula):
        wrapped = formula if get_raw else shape_wrapper(formula)
        for target in targets if isinstance(targets, (list, tuple)) else [targets]:
            flop_registry[_packet(target)] = wrapped
        return formula

    return register


@register_flop_formula(aten.mm)
def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    m, k = a_shape
    k2, n = b_shape
    return m * n * 2 * k


@register_flop_formula(aten.addmm)
def addmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    return mm_flop(a_shape, b_shape)


@register_flop_formula(aten.bmm)
def bmm_flop(a_shape, b_shape, out_shape=None, **kwargs) -> int:
    b, m, k = a_shape
    b2, k2, n = b_shape
    return b * m * n * 2 * k


@register_flop_formula(aten.baddbmm)
def baddbmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    return bmm_flop(a_shape, b_shape)


def conv_flop_count(x_shape, w_shape, out_shape, transposed: bool = False) -> int:
    """2 * (positions the kernel visits) * (kernel size) * batch * c_out * c_in."""
    batch_size = x_shape[0]
    conv_shape = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *filter_size = w_shape
    return prod(conv_shape) * prod(filter_size) * batch_size * c_out * c_in * 2


@register_flop_formula(aten.convolution)
def conv_flop(x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed, *args, out_shape=None,
              **kwargs) -> int:
    return conv_flop_count(x_shape, w_shape, out_shape, transposed=transposed)


def _t(shape):
    return [shape[1], shape[0]] + list(shape[2:])


@register_flop_formula(aten.convolution_backward)
def conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                       _output_padding, _groups, output_mask, out_shape) -> int:
    count = 0
    if output_mask[0] and out_shape[0] is not None:
        count += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1] and out_shape[1] is not None:
        if transposed:
            count += conv_flop_count(_t(grad_out_shape), _t(x_shape), _t(out_shape[1]), transposed=False)
        else:
            count += conv_flop_count(_t(x_shape), _t(grad_out_shape), _t(out_shape[1]), transposed=False)
    return count


def sdpa_flop_count(query_shape, key_shape, value_shape) -> int:
    b, h, s_q, d_q = query_shape
    s_k, d_v = key_shape[-2], value_shape[-1]
    return bmm_flop((b * h, s_q, d_q), (b * h, d_q, s_k)) + bmm_flop((b * h, s_q, s_k), (b * h, s_k, d_v))


@register_flop_formula(aten.scaled_dot_product_attention, get_raw=True)
def sdpa_flop(query, key, value, *args, out_val=None, **kwargs) -> int:
    # PyTorch counts its CUDA attention kernels; on the CPU its kernel has no formula, so it counts
    # nothing there (None: no entry), and neither does ember.
    if query.device.type == "cpu" or query.ndim != 4:
        return None
    return sdpa_flop_count(tuple(query.shape), tuple(key.shape), tuple(value.shape))


# -- number formatting (the table) ------------------------------------------------------------------

suffixes = ["", "K", "M", "B", "T"]


def get_suffix_str(number) -> str:
    index = max(0, min(len(suffixes) - 1, (len(str(number)) - 2) // 3))
    return suffixes[index]


def convert_num_with_suffix(number, suffix: str) -> str:
    index = suffixes.index(suffix)
    return f"{number / 1000 ** index:.3f}" + suffixes[index]


def convert_to_percent_str(num, denom) -> str:
    if denom == 0:
        return "0%"
    return f"{num / denom:.2%}"


# -- module tracking ------------------------------------------------------------------------------------


class ModuleTracker:
    """Which modules are running: ``parents`` holds "Global" and the names of the modules whose
    forward (or backward) is under way. A module first seen on its own is named by its class;
    its children by ``<parent name>.<attribute>``."""

    def __init__(self) -> None:
        self.parents = {"Global"}
        self._in_backward: dict = {}  # name -> the backward task that added it
        self._known: dict = {}
        self._seen: set = set()
        self._handles: list = []

    def _name(self, mod) -> str:
        key = id(mod)
        if key not in self._known:
            self._known[key] = (mod, type(mod).__name__)
        name = self._known[key][1]
        if key not in self._seen:
            for child_name, child in mod.named_children():
                self._known[id(child)] = (child, f"{name}.{child_name}")
                self._name(child)
            self._seen.add(key)
        return name

    def _grad_tensors(self, value) -> list:
        return [t for t in _pytree.tree_leaves(value) if isinstance(t, Tensor) and t.requires_grad]

    def current(self) -> set:
        """``parents``, less the modules a backward added that has finished since (PyTorch resets
        them when its engine finishes the backward)."""
        if self._in_backward:
            from ember.autograd import _engine

            for name, task in list(self._in_backward.items()):
                if not any(t is task for t in _engine._TASKS):
                    del self._in_backward[name]
                    self.parents.discard(name)
        return self.parents

    def _enter_backward(self, name: str) -> None:
        from ember.autograd import _engine

        self.parents.add(name)
        if _engine._TASKS:
            self._in_backward[name] = _engine._TASKS[-1]

    def _pre_forward(self, mod, args):
        self.current()
        name = self._name(mod)
        self.parents.add(name)
        tensors = self._grad_tensors(args)
        if tensors and ember.is_grad_enabled():
            ember.autograd.graph.register_multi_grad_hook(tensors, lambda grads, n=name: self.parents.discard(n))

    def _post_forward(self, mod, args, output):
        name = self._name(mod)
        self.parents.discard(name)
        tensors = self._grad_tensors(output)
        if tensors and ember.is_grad_enabled():
            ember.autograd.graph.register_multi_grad_hook(tensors, lambda grads, n=name: self._enter_backward(n))

    def __enter__(self):
        from ember.nn.modules import module as _module

        self._handles = [_module.register_module_forward_pre_hook(self._pre_forward),
                         _module.register_module_forward_hook(self._post_forward)]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return False


class _FlopCounterDispatch(DispatchMode):
    wants_types = False

    def __init__(self, counter: FlopCounterMode):
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.counter._count_flops(_packet(func), out, args, kwargs)
        return out


class FlopCounterMode:
    """Counts the FLOPs of the ops run inside ``with FlopCounterMode() as counter:``.

    ``counter.get_total_flops()`` is the total, ``get_flop_counts()`` the counts per module name
    ("Global" for all) and op, ``get_table(depth)`` a table of them, printed on exit when
    ``display`` is true.

    Example:
        >>> import ember
        >>> from ember.utils.flop_counter import FlopCounterMode
        >>> with FlopCounterMode(display=False) as counter:
        ...     _ = ember.ones(4, 3) @ ember.ones(3, 5)
        >>> counter.get_total_flops()
        120
    """

    def __init__(self, mods=None, depth: int = 2, display: bool = True, custom_mapping: dict | None = None):
        self.flop_counts: dict[str, dict] = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        self.mode = None
        if custom_mapping is None:
            custom_mapping = {}
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it", stacklevel=2)
        self.flop_registry = {**flop_registry,
                              **{_packet(k): v if getattr(v, "_get_raw", False) else shape_wrapper(v)
                                 for k, v in custom_mapping.items()}}
        self.mod_tracker = ModuleTracker()

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict[str, dict]:
        """``{module name: {op: FLOPs}}``, "Global" holding every op's total."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None) -> str:
        if depth is None:
            depth = self.depth
        if depth is None:
            depth = 999999
        global_flops = self.get_total_flops()
        global_suffix = get_suffix_str(global_flops)
        subsumed = False

        def rows_of(mod_name: str, indent: int) -> list:
            nonlocal subsumed
            total = sum(self.flop_counts[mod_name].values())
            subsumed |= total >= global_flops
            pad = " " * indent
            rows = [[pad + mod_name, convert_num_with_suffix(total, global_suffix),
                     convert_to_percent_str(total, global_flops)]]
            for op, count in self.flop_counts[mod_name].items():
                rows.append([pad + " - " + str(op), convert_num_with_suffix(count, global_suffix),
                             convert_to_percent_str(count, global_flops)])
            return rows

        values: list = []
        for mod in sorted(self.flop_counts.keys()):
            if mod == "Global":
                continue
            mod_depth = mod.count(".") + 1
            if mod_depth > depth:
                continue
            values.extend(rows_of(mod, mod_depth - 1))
        # "Global" is shown only when some FLOPs are outside every module shown.
        if "Global" in self.flop_counts and not subsumed:
            for row in values:
                row[0] = " " + row[0]
            values = rows_of("Global", 0) + values
        if not values:
            values = [["Global", "0", "0%"]]
        return _table(["Module", "FLOP", "% Total"], values)

    def __enter__(self):
        self.flop_counts.clear()
        self.mod_tracker.__enter__()
        self.mode = _FlopCounterDispatch(self)
        self.mode.__enter__()
        return self

    def __exit__(self, *args):
        if self.mode is None:
            raise AssertionError("Internal error: FlopCounter.__exit__ called but mode is None")
        self.mode.__exit__(*args)
        self.mode = None
        self.mod_tracker.__exit__()
        if self.display:
            print(self.get_table(self.depth))
        return False

    def _count_flops(self, func_packet, out, args, kwargs):
        formula = self.flop_registry.get(func_packet)
        if formula is not None:
            count = formula(*args, **kwargs, out_val=out)
            if count is None:
                return out
            for parent in set(self.mod_tracker.current()):
                self.flop_counts[parent][func_packet] += count
        return out


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned, the header
    underlined with dashes (tabulate's "simple" layout, without needing tabulate)."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])
