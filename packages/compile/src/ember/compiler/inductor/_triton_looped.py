"""Looped reductions (rows longer than one block) in as few reads of the row as the data allows.

A mixin of ``_triton.TritonKernelWriter``. The members of a looped kernel are grouped into
*passes*: one ``for roffset`` loop each, with one body, so what several members load they load
once. A member joins the current pass unless it reads a row result the pass itself produces
(it then needs the finished row). Two such reads are rewritten so that they need not wait:

- *online softmax*: ``sum(exp(a - max(a)))`` accumulates beside ``max(a)`` in the same loop, each
  lane's sum rescaled by ``exp(old max - new max)`` when its max grows, the lanes merged after
  the loop (softmax, log_softmax and cross-entropy read a row once for both statistics);
- *Welford*: ``sum((a - sum(a) / n) ** 2)`` (variance, layer_norm) accumulates a running mean and
  M2 per lane beside ``sum(a)``, merged with Chan's formula after the loop.

softmax then reads a long row twice (statistics, output) instead of three times, layer_norm and
var twice instead of three times, cross-entropy once instead of three times.
"""

from __future__ import annotations

from . import _triton_ops as T
from ._ir import Call, Const, Load

WELFORD_COMBINE = "_welford_combine"
T.HELPERS.setdefault(WELFORD_COMBINE, '''@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    part = tl.where(n == 0, 0.0, n_b / n)
    return mean_a + delta * part, m2_a + m2_b + delta * delta * n_a * part, n
''')


def _row_load_of(expr, node) -> bool:
    """``expr`` loads ``node``'s per-row result for the current row."""
    return isinstance(expr, Load) and expr.buf == node.buf.name and expr.index == node.store_index


class LoopedEmitter:
    """Emits the members of a looped reduction kernel as passes (``self`` is the kernel writer)."""

    def _looped_passes(self, inner) -> list[str]:
        nodes = self.k.nodes
        self._online = self._find_online(nodes)  # id(sum node) -> its max node
        welford = self._find_welford(nodes)  # id(first sum node) -> the M2 sum node
        moved = {id(m2) for m2 in welford.values()}
        lines: list[str] = []
        current: list = []
        rows: set[str] = set()
        for node in nodes:
            if id(node) in moved:
                continue  # accumulated in its sum's pass
            if node.epilogue:
                lines += self._pass(current, inner, welford)
                current, rows = [], set()
                body = self.body("    ", "xmask")
                self._member(node, body, None)
                lines += body.lines
                continue
            reads = {ld.buf for ld in node.loads} & rows
            partner = self._online.get(id(node))
            if partner is not None and partner in current:
                reads.discard(partner.buf.name)
            if reads:
                lines += self._pass(current, inner, welford)
                current, rows = [], set()
            current.append(node)
            if node.is_reduction:
                rows.add(node.buf.name)
                m2 = welford.get(id(node))
                if m2 is not None:
                    rows.add(m2.buf.name)
        lines += self._pass(current, inner, welford)
        return lines

    # -- the patterns --------------------------------------------------------------------------

    def _find_online(self, nodes) -> dict:
        out = {}
        maxima = [n for n in nodes if n.is_reduction and n.buf.reduce_type == "max"
                  and n.buf.acc_dtype.is_floating_point]
        for node in nodes:
            e = node.expr
            if not (node.is_reduction and node.buf.reduce_type == "sum" and isinstance(e, Call) and e.op == "exp"):
                continue
            inner = e.args[0]
            if not (isinstance(inner, Call) and inner.op == "sub" and e.dtype is node.buf.acc_dtype):
                continue
            for m in maxima:
                if _row_load_of(inner.args[1], m) and inner.args[0] == m.expr and m.buf.acc_dtype is e.dtype:
                    out[id(node)] = m
        return out

    def _find_welford(self, nodes) -> dict:
        """{id(sum(a)): sum((a - mean) ** 2)} where ``mean`` is ``sum(a) / rnumel`` (inlined or an
        epilogue's row value)."""
        out = {}
        sums = {n.buf.name: n for n in nodes if n.is_reduction and n.buf.reduce_type == "sum"
                and n.buf.acc_dtype.is_floating_point}
        epilogues = {n.buf.name: n for n in nodes if n.epilogue}
        for node in nodes:
            e = node.expr
            if node.buf.name not in sums or not (isinstance(e, Call) and e.op == "mul" and e.args[0] == e.args[1]):
                continue
            d = e.args[0]
            if not (isinstance(d, Call) and d.op == "sub"):
                continue
            m = d.args[1]  # the mean: inlined, or an epilogue's row value
            if isinstance(m, Load):
                mean = epilogues.get(m.buf)
                if mean is None or not _row_load_of(m, mean):
                    continue
                m = mean.expr
            if not (isinstance(m, Call) and m.op == "div" and isinstance(m.args[0], Load)
                    and isinstance(m.args[1], Const)):
                continue
            first = sums.get(m.args[0].buf)
            if first is None or not _row_load_of(m.args[0], first) or first.expr != d.args[0]:
                continue
            if self._rnumel.free_symbols or float(m.args[1].value) != float(self._rnumel) \
                    or nodes.index(first) > nodes.index(node):
                continue
            if e.dtype is not node.buf.acc_dtype:
                continue
            out[id(first)] = node
        return out

    # -- one pass ------------------------------------------------------------------------------

    def _pass(self, members, inner, welford) -> list[str]:
        if not members:
            return []
        i, j = "    ", "        "
        lines = []
        for node in members:
            if node.is_reduction:
                lines += self._acc_init(node, i)
                m2 = welford.get(id(node))
                if m2 is not None:
                    t = T.TL_TYPES[m2.buf.acc_dtype]
                    lines += [f"{i}{w}_{m2.buf.name} = tl.zeros([XBLOCK, RBLOCK], {t})" for w in ("wmean", "wm2", "wn")]
        lines.append(f"{i}for roffset in tl.range(0, rnumel, RBLOCK):")
        lines += [f"{j}rindex = roffset + rbase", f"{j}rmask = rindex < rnumel", f"{j}xrmask = xmask & rmask"]
        lines += self._decompose(inner, "rindex", j)
        body = self.body(j, "xrmask")
        for node in members:
            body.lines.append(f"{j}# {node.buf.name}: {', '.join(node.buf.origins)}")
            if id(node) in self._online and self._online[id(node)] in members:
                self._online_step(node, self._online[id(node)], body)
                continue
            if node.is_reduction and any(id(node) == id(s) for s in self._online.values()):
                body.lines.append(f"{j}prev_{node.buf.name} = acc_{node.buf.name}")
            self._member(node, body, i, comment=False)
            m2 = welford.get(id(node))
            if m2 is not None:
                self._welford_step(m2, body.value(node.expr), body)
        lines += body.lines
        for node in members:
            if not node.is_reduction:
                continue
            if id(node) in self._online and self._online[id(node)] in members:
                lines += self._online_finish(node, self._online[id(node)], i)
            else:
                lines += self._acc_finish(node, i)
            m2 = welford.get(id(node))
            if m2 is not None:
                lines += self._welford_finish(m2, i)
        return lines

    def _online_step(self, node, top, body) -> None:
        """``acc += exp(a - max)`` against the lane's running max (already updated this step)."""
        a = body.value(top.expr)
        s, m, ind = f"acc_{node.buf.name}", f"acc_{top.buf.name}", body.indent
        safe = body.emit(f"tl.where({m} == -float(\"inf\"), 0.0, {m})", node.buf.acc_dtype)
        scale = body.emit(f"tl.exp(prev_{top.buf.name} - {safe})", node.buf.acc_dtype)
        term = body.emit(f"tl.exp({a} - {safe})", node.buf.acc_dtype)
        body.lines.append(f"{ind}{s} = tl.where(xrmask, {s} * {scale} + {term}, {s})")

    def _online_finish(self, node, top, i) -> list[str]:
        """The lanes' sums brought to the row's max (its row value is finished by now); a row
        of -inf sums to NaN as ``exp(-inf - -inf)`` makes the two-pass sum."""
        body = self.body(i, "xmask")
        row_max = self.row_values[top.buf.name]
        safe = body.emit(f"tl.where({row_max} == -float(\"inf\"), 0.0, {row_max})", node.buf.acc_dtype)
        total = body.emit(f"tl.sum(acc_{node.buf.name} * tl.exp(acc_{top.buf.name} - {safe}), 1)[:, None]",
                          node.buf.acc_dtype)
        row = body.emit(f"tl.where({row_max} == -float(\"inf\"), float(\"nan\"), {total})", node.buf.acc_dtype)
        self._finish_row(node, row, body)
        return body.lines

    def _welford_step(self, m2, a: str, body) -> None:
        name, ind = m2.buf.name, body.indent
        n = f"wn_{name}"
        body.lines += [f"{ind}{n}_next = tl.where(xrmask, {n} + 1.0, {n})",
                       f"{ind}delta_{name} = tl.where(xrmask, {a} - wmean_{name}, 0.0)",
                       f"{ind}wmean_{name} = wmean_{name} + tl.where(xrmask, delta_{name} / {n}_next, 0.0)",
                       f"{ind}wm2_{name} = wm2_{name} + tl.where(xrmask, delta_{name} * ({a} - wmean_{name}), 0.0)",
                       f"{ind}{n} = {n}_next"]

    def _welford_finish(self, m2, i) -> list[str]:
        body = self.body(i, "xmask")
        self.helpers.add(WELFORD_COMBINE)
        name = m2.buf.name
        body.lines.append(f"{i}_, wm2_row_{name}, _ = tl.reduce((wmean_{name}, wm2_{name}, wn_{name}), 1, "
                          f"{WELFORD_COMBINE})")
        row = body.emit(f"wm2_row_{name}[:, None]", m2.buf.acc_dtype)
        self._finish_row(m2, row, body)
        return body.lines


__all__ = ["LoopedEmitter"]
