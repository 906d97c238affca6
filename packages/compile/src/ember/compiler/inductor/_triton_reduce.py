"""Reductions in generated Triton kernels: accumulators, block reductions, NaN-propagating max/min.

A mixin of ``_triton.TritonKernelWriter``. A looped reduction keeps a ``[XBLOCK, RBLOCK]``
accumulator across its ``roffset`` loop and reduces it across the block after the loop; a
persistent one reduces the whole row's block at once. ``max``/``min`` of floats combine with
``tl.maximum(..., propagate_nan=ALL)`` (Triton's ``tl.max`` drops NaN; eager's propagates it),
one instruction where a NaN flag beside the value cost a second reduction; ``any``/``all``
accumulate int32 flags.
"""

from __future__ import annotations

from ember._src import dtypes as dt

from . import _triton_ops as T

_INT_LIMITS = {dt.uint8: (0, 255), dt.int8: (-128, 127), dt.int16: (-32768, 32767),
               dt.int32: (-2 ** 31, 2 ** 31 - 1), dt.int64: (-2 ** 63, 2 ** 63 - 1), dt.bool: (0, 1)}


class Unsupported(Exception):
    """This kernel cannot be written for Triton (the graph then runs eagerly)."""


class ReductionEmitter:
    """Emits the reduction members of a kernel (``self`` is the kernel writer)."""

    def _init_value(self, buf) -> str:
        rt = buf.reduce_type
        if rt == "sum":
            return "0"
        if rt == "prod":
            return "1"
        if rt in ("any",):
            return "0"
        if rt == "all":
            return "1"
        if buf.acc_dtype.is_floating_point:
            return '-float("inf")' if rt == "max" else 'float("inf")'
        lo, hi = _INT_LIMITS[buf.acc_dtype]
        return str(lo if rt == "max" else hi)

    def _acc_init(self, node, i) -> list[str]:
        buf = node.buf
        t = "tl.int32" if buf.reduce_type in ("any", "all") else T.TL_TYPES[buf.acc_dtype]
        return [f"{i}acc_{buf.name} = tl.full([XBLOCK, RBLOCK], {self._init_value(buf)}, {t})"]

    def _acc_finish(self, node, i) -> list[str]:
        buf = node.buf
        body = self.body(i, "xmask")
        name = f"acc_{buf.name}"
        rt = buf.reduce_type
        if rt == "sum":
            row = body.emit(f"tl.sum({name}, 1)[:, None]", buf.acc_dtype)
        elif rt == "prod":
            self.helpers.add("_prod_combine")
            row = body.emit(f"tl.reduce({name}, 1, _prod_combine)[:, None]", buf.acc_dtype)
        elif rt in ("max", "min"):
            row = body.emit(f"{self._extreme(rt, buf, name)}[:, None]", buf.acc_dtype)
        elif rt == "any":
            row = body.emit(f"tl.max({name}, 1)[:, None] != 0", dt.bool)
        else:
            row = body.emit(f"tl.min({name}, 1)[:, None] != 0", dt.bool)
        self._finish_row(node, row, body)
        return body.lines

    def _reduce_block(self, body, rt, buf, v, mask) -> str:
        init = self._init_value(buf)
        if rt == "sum":
            return body.emit(f"tl.sum(tl.where({mask}, {v}, 0), 1)[:, None]", buf.acc_dtype)
        if rt == "prod":
            self.helpers.add("_prod_combine")
            return body.emit(f"tl.reduce(tl.where({mask}, {v}, 1), 1, _prod_combine)[:, None]", buf.acc_dtype)
        if rt in ("max", "min"):
            block = f"tl.where({mask}, {v}, {init})" if mask else v
            return body.emit(f"{self._extreme(rt, buf, block)}[:, None]", buf.acc_dtype)
        if rt == "any":
            return body.emit(f"tl.max(tl.where({mask} & ({v} != 0), 1, 0), 1)[:, None] != 0", dt.bool)
        if rt == "all":
            return body.emit(f"tl.max(tl.where({mask} & ({v} == 0), 1, 0), 1)[:, None] == 0", dt.bool)
        raise Unsupported(f"reduction {rt}")

    def _extreme(self, rt, buf, block: str) -> str:
        """The row max/min of ``block`` (a NaN wins for floats)."""
        if not buf.acc_dtype.is_floating_point:
            return f"tl.{rt}({block}, 1)"
        combine = "_max_nan_combine" if rt == "max" else "_min_nan_combine"
        self.helpers.add(combine)
        return f"tl.reduce({block}, 1, {combine})"

    def _accumulate(self, body, buf, v: str) -> None:
        """One step of a looped reduction: fold the block ``v`` into the accumulator."""
        rt, name, ind = buf.reduce_type, f"acc_{buf.name}", body.indent
        if rt == "sum":
            body.lines.append(f"{ind}{name} = {name} + tl.where(xrmask, {v}, 0)")
        elif rt == "prod":
            body.lines.append(f"{ind}{name} = {name} * tl.where(xrmask, {v}, 1)")
        elif rt in ("max", "min") and buf.acc_dtype.is_floating_point:
            fn = "maximum" if rt == "max" else "minimum"
            body.lines.append(f"{ind}{name} = tl.where(xrmask, tl.{fn}({name}, {v}, "
                              f"propagate_nan=tl.PropagateNan.ALL), {name})")
        elif rt in ("max", "min"):
            op = ">" if rt == "max" else "<"
            body.lines.append(f"{ind}{name} = tl.where(xrmask & ({v} {op} {name}), {v}, {name})")
        elif rt == "any":
            body.lines.append(f"{ind}{name} = tl.where(xrmask & ({v} != 0), 1, {name})")
        elif rt == "all":
            body.lines.append(f"{ind}{name} = tl.where(xrmask & ({v} == 0), 0, {name})")
        else:
            raise Unsupported(f"reduction {rt}")
