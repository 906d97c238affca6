"""The scheduler: groups realized buffers into fused kernels, in graph order.

Every computation is a loop over an *iteration space*: a shape and the dims it reduces over
(none for pointwise work). Consecutive computations fuse into one kernel when they share the
space — pointwise chains, and a reduction with the pointwise work that reads its per-row
result (softmax's max, sum and normalization; layer_norm's mean, variance and output) — and
when every value one member reads from another is the one that member wrote for the same
element (or the same row). A reduction result read only inside its kernel never reaches
memory: it stays a scalar per row. Extern calls (ember's own kernels) end the current group.

A *column* reduction (a sum over a kernel's rows that keeps its columns: a bias or layer_norm
weight gradient over the ``(B*T, d)`` gradient a backward kernel produces) joins the kernel
that produces its input when ``column_fusion`` is on (the C++ backend): each thread adds its
rows into partial column sums, combined at the end of the kernel (``_cpp_columns``), instead of a
kernel of its own reading the gradient again. Its space may be a regrouping of the kernel's
(``(B*T, d)`` against ``(B, T, d)``): its index is then written in the kernel's symbols.
"""

from __future__ import annotations

import sympy

from ember._src import dtypes as dt

from ._graph import ExternCall
from ._ir import (
    ComputedBuffer,
    FloorDiv,
    IndexValue,
    Load,
    ModularIndexing,
    ReductionBuffer,
    contiguous_strides,
    linear_coeff,
    loads_of,
    product,
    same_expr,
    unflatten,
    walk,
)

# A column reduction joins a kernel only while its partial sums (one set per thread) stay this
# small (elements): past it, a kernel of its own (blocks of columns walking the rows) costs less.
COLUMN_MAX = 1 << 16


class SchedNode:
    """One realized buffer with its body evaluated at the kernel's index symbols.

    A *row epilogue* is pointwise work over the per-row space of a reduction kernel (the
    reduction's result shape): it runs once per row, after that row's reductions.

    A *column* node is a sum over rows of the kernel it joined (``frame``: that kernel's symbols,
    space and the dims the node reduces there), its body evaluated at ``index``: expressions of
    those symbols.
    """

    def __init__(self, buf, index, epilogue: bool = False, frame=None):
        self.buf = buf
        self.is_reduction = isinstance(buf, ReductionBuffer)
        self.epilogue = epilogue
        self.column = frame is not None
        if frame is not None:
            self.vars, self.space, self.reduced = list(frame[0]), tuple(frame[1]), tuple(frame[2])
            own = list(index)
        else:
            self.space = buf.full_shape if self.is_reduction else buf.shape
            self.reduced = buf.reduced if self.is_reduction else ()
            self.vars = list(index[: len(self.space)])
            own = list(self.vars)
        self.expr = buf.body(own)
        if self.is_reduction:
            self.store_index = buf.index(buf.out_index(own))
        else:
            self.store_index = buf.target.index(own)
        self.target = buf.target.name
        self.loads: list[Load] = loads_of(self.expr)
        # index expressions used as values (an iota): loop collapsing must keep them intact
        self.positions = [e.index for e in walk(self.expr) if isinstance(e, IndexValue)]


class Kernel:
    """A fused group: members in order over one iteration space."""

    def __init__(self, name: str, first: SchedNode, column_fusion: bool = False):
        self.name = name
        self.column_fusion = column_fusion
        self.space = first.space
        self.reduced = first.reduced
        self.nodes = [first]
        self.local: set[str] = set()  # buffers that stay in registers (not stored)

    @property
    def vars(self):
        return self.nodes[0].vars

    def writes(self) -> dict:
        return {n.target: n for n in self.nodes}

    def _row_index(self, space):
        """The index of a per-row space in this kernel's symbols (None if ``space`` is not one)."""
        outer = [d for d in range(len(self.space)) if d not in self.reduced]
        if list(space) == [self.space[d] for d in outer]:
            return [self.vars[d] for d in outer]
        if list(space) == [1 if d in self.reduced else s for d, s in enumerate(self.space)]:
            return [sympy.Integer(0) if d in self.reduced else v for d, v in enumerate(self.vars)]
        return None

    def try_add(self, node: SchedNode) -> bool:
        if any(getattr(n, "target_columns", None) for n in self.nodes):
            return False  # a column sum over the members' buffer closes the kernel
        column = self._as_column(node) if self.column_fusion else None
        if column is not None and self._add_column(column):
            return True
        rider = self._as_target_column(node) if self.column_fusion else None
        if rider is not None:
            self.nodes.append(rider)
            return True
        if column is not None:
            return False
        if node.space != self.space:
            if node.is_reduction or not self.reduced:
                return False
            index = self._row_index(node.space)
            if index is None:
                return False
            node = SchedNode(node.buf, index, epilogue=True)
        elif node.is_reduction and self.reduced and node.reduced != self.reduced:
            return False
        # a transposed copy (a load or store that steps through the row's dim by a stride while
        # another dim is the contiguous one) would walk columns in the loop of a reduction that
        # walks its rows contiguously: it gets a kernel of its own, which the code generator tiles
        if node.is_reduction and not self.reduced:
            var = self.vars[node.reduced[-1]]
            if not _transposed(node, var, self.vars) and any(_transposed(m, var, self.vars) for m in self.nodes):
                return False
        elif self.reduced and not node.epilogue and not node.is_reduction:
            var = self.vars[self.reduced[-1]]
            if _transposed(node, var, self.vars) and \
                    not any(_transposed(m, var, self.vars) for m in self.nodes if m.is_reduction):
                return False
        if not self._reads_ready(node, node.reduced or self.reduced):
            return False
        # a write must not overtake a read of the same buffer elsewhere in the group
        for member in self.nodes:
            for load in member.loads:
                if load.buf == node.target and not same_expr(load.index, node.store_index):
                    return False
        if node.is_reduction and not self.reduced:
            # the pointwise members so far become per-row loops that run before this one
            self.reduced = node.reduced
        self.nodes.append(node)
        return True

    def _reads_ready(self, node: SchedNode, reduced) -> bool:
        """Whether each value ``node`` loads from this kernel's members is complete where it reads it,
        the kernel's loops reducing dims ``reduced``: a pointwise value at the same index, a row's
        result only after that row's loop (not indexed by the reduced dims), never a column sum."""
        inner = {self.vars[d] for d in reduced}
        writes = self.writes()
        for load in node.loads:
            producer = writes.get(load.buf)
            if producer is None:
                continue
            if producer.column:
                return False  # complete only when the kernel ends
            if producer.is_reduction:
                # a per-row result: read for this very row, after its loop ends
                if load.index.free_symbols & inner or not same_expr(load.index, producer.store_index):
                    return False
            elif not same_expr(load.index, producer.store_index):
                return False
        return True

    # -- column reductions ---------------------------------------------------------------------

    def _as_column(self, node: SchedNode):
        """``node`` as a column node of this kernel, or None: a sum whose space is this kernel's
        (or a regrouping of it) reducing some of the kernel's row dims and keeping its columns (the
        dims a row kernel reduces; for a pointwise kernel, trailing dims, which become its rows)."""
        if not node.is_reduction or node.epilogue or node.buf.reduce_type != "sum" or not node.reduced:
            return None
        groups = _regroup(self.space, node.space)
        if groups is None:
            return None
        reduced = tuple(sorted(d for j in node.reduced for d in groups[j]))
        kept = tuple(d for d in range(len(self.space)) if d not in reduced and self.space[d] != 1)
        columns = self.reduced if self.reduced else kept
        if not reduced or not columns or not set(columns) <= set(kept) or set(columns) & set(reduced):
            return None
        if columns != tuple(range(len(self.space) - len(columns), len(self.space))):
            return None  # the columns must be the kernel's trailing (innermost) dims
        size = product([node.space[d] for d in range(len(node.space)) if d not in node.reduced])
        if size.is_Integer and int(size) > COLUMN_MAX:
            return None
        index = [sympy.Add(*[self.vars[d] * product([self.space[e] for e in g if e > d]) for d in g])
                 for g in groups]
        column = SchedNode(node.buf, index, frame=(self.vars, self.space, reduced))
        column.columns = columns
        return column

    def _as_target_column(self, node: SchedNode):
        """``node`` as a column sum over the one buffer this kernel's members all write (a ``cat``
        of pieces along its last dim, tiled because a piece is a transposed copy: the attention's
        q/k/v gradients into the qkv gradient, whose bias gradient ``node`` is), or None.

        The members write disjoint slices of the buffer's columns that together cover them, each
        row of the kernel one row of the buffer, so the column sums are each member's stored value
        added at its column (``target_columns``: the member's column expression, the store index
        with the row symbols 0). float32; the sum reads the buffer's first rows x columns elements
        in order (it sums all its dims but the last). Where the code generator does not tile the
        kernel, the sum walks the stored buffer after the members' loops, in the same kernel."""
        if self.reduced or not node.is_reduction or node.epilogue or node.buf.reduce_type != "sum":
            return None
        members = [m for m in self.nodes if not m.column]
        if len(members) != len(self.nodes) or len(members) < 2:
            return None  # (one member writing the whole buffer: an ordinary column sum's case)
        name = members[0].target
        e = node.expr
        if not isinstance(e, Load) or e.buf != name or node.buf.acc_dtype is not dt.float32 \
                or node.buf.dtype is not dt.float32 or len(node.space) < 2 \
                or node.reduced != tuple(range(len(node.space) - 1)):
            return None
        cols, rows = node.space[-1], product(node.space[:-1])
        if not same_expr(e.index, sum((v * st for v, st in zip(node.vars, contiguous_strides(node.space))),
                                      sympy.Integer(0))):
            return None  # not the rows x columns block from the buffer's start, in order
        if not (cols.is_Integer and self.space[-1].is_Integer) or not same_expr(product(self.space[:-1]), rows):
            return None
        last, leading = self.vars[-1], self.vars[:len(self.space) - 1]
        row_index = sum((v * st for v, st in zip(leading, contiguous_strides(self.space[:-1]))), sympy.Integer(0))
        spans, columns_of = [], {}
        for m in members:
            if m.target != name or m.buf.dtype is not dt.float32 or m.is_reduction or m.epilogue \
                    or any(ld.buf == name for ld in m.loads):
                return None
            col = m.store_index.xreplace({v: 0 for v in leading})
            offset = sympy.expand(col - last)
            if not offset.is_Integer or linear_coeff(m.store_index, last) != 1 or \
                    not same_expr(m.store_index - col, row_index * cols):
                return None
            spans.append((int(offset), int(offset) + int(self.space[-1])))
            columns_of[id(m)] = col
        spans.sort()
        if spans[0][0] != 0 or spans[-1][1] != int(cols) or any(a[1] != b[0] for a, b in zip(spans, spans[1:])):
            return None  # not a cover of the columns, each once
        own = [*unflatten(row_index, node.space[:-1]), last]
        rider = SchedNode(node.buf, own, frame=(self.vars, self.space, tuple(range(len(self.space) - 1))))
        rider.loads, rider.positions = [], []  # it reads the members' values, not the buffer
        rider.columns = (len(self.space) - 1,)
        rider.source = name  # the buffer summed (its stored rows, where the kernel is not tiled)
        rider.sum_rows, rider.sum_cols = rows, cols
        rider.store_index = columns_of[id(members[0])]
        rider.target_columns = columns_of
        return rider

    def _add_column(self, node: SchedNode) -> bool:
        var = self.vars[node.columns[-1]]
        members = self.nodes + [node]
        if any(_transposed(m, var, self.vars) for m in members if not m.epilogue):
            return False  # a row-major walk would read a transposed operand a column at a time
        if not self.reduced and any(_divides(m) for m in members):
            return False  # digit-split pointwise loops (a head merge) stay pointwise kernels
        if not self._reads_ready(node, node.columns):
            return False
        for member in self.nodes:
            for load in member.loads:
                if load.buf == node.target:
                    return False
        if not self.reduced:
            self.reduced = node.columns  # the pointwise members become per-row loops
        self.nodes.append(node)
        return True


def _regroup(space, other):
    """For each dim of ``other`` the dims of ``space`` it merges (consecutive; none for a dim of
    size 1), when ``other`` is ``space`` with runs of adjacent dims merged; else None."""
    groups, d = [], 0
    for size in other:
        if size == 1:
            groups.append([])
            continue
        run, n = [], sympy.Integer(1)
        while d < len(space) and not same_expr(n, size):
            run.append(d)
            n = n * space[d]
            d += 1
        if not same_expr(n, size):
            return None
        groups.append(run)
    if any(space[e] != 1 for e in range(d, len(space))):
        return None
    return groups


def _divides(node: SchedNode) -> bool:
    indices = [ld.index for ld in node.loads] + [node.store_index]
    return any(i.has(FloorDiv) or i.has(ModularIndexing) for i in indices)


def _transposed(node: SchedNode, var, vars_) -> bool:
    """Whether one of ``node``'s accesses steps through ``var`` by a stride other than 0 or 1
    while it walks another of ``vars_`` contiguously (a transpose)."""
    for index in [ld.index for ld in node.loads] + [node.store_index]:
        c = linear_coeff(index, var)
        if c is None or c == 0 or c == 1:
            continue
        if any(v != var and linear_coeff(index, v) == 1 for v in vars_):
            return True
    return False


def schedule(items, output_names: set, index_vars, column_fusion: bool = False) -> list:
    """Kernels and extern calls in run order; marks the buffers each kernel keeps local.
    ``column_fusion``: column sums join the kernel producing their input (the C++ backend)."""
    plan: list = []
    count = 0
    for item in items:
        if isinstance(item, ExternCall):
            plan.append(item)
            continue
        node = SchedNode(item, index_vars)
        if not _place(plan, node):
            plan.append(Kernel(f"kernel{count}", node, column_fusion))
            count += 1
    _mark_local(plan, output_names)
    return plan


def _place(plan, node) -> bool:
    """Fuses ``node`` into a kernel it may join: one that nothing ``node`` needs comes after.

    Kernels that produce what ``node`` reads come first (their results may then stay in
    registers), then the latest.
    """
    reads = {ld.buf for ld in node.loads}
    window = []
    for entry in reversed(plan):
        if isinstance(entry, Kernel):
            written = {n.target for n in entry.nodes}
            touched = written | {ld.buf for n in entry.nodes for ld in n.loads}
            window.append((bool(written & reads), entry))
        else:
            written = set(_extern_outputs(entry)) | (set(_extern_buffers(entry)) if entry.mutates else set())
            touched = written | set(_extern_buffers(entry))
        if written & reads or node.target in touched:
            break  # node must run after this entry
    for producer_first in (True, False):
        for is_producer, kernel in window:
            if is_producer == producer_first and kernel.try_add(node):
                return True
    return False


def _extern_outputs(call) -> list:
    outs = call.outputs if isinstance(call.outputs, tuple) else (call.outputs,)
    return [b.name for b in outs if hasattr(b, "name")]


def _mark_local(plan, output_names):
    """A buffer read only in its own kernel as a row scalar (or the same element) is not stored."""
    readers: dict[str, list] = {}
    for entry in plan:
        if isinstance(entry, ExternCall):
            for b in _extern_buffers(entry):
                readers.setdefault(b, []).append(None)
            continue
        for node in entry.nodes:
            for load in node.loads:
                readers.setdefault(load.buf, []).append(entry)
    for entry in plan:
        if isinstance(entry, ExternCall):
            continue
        for node in entry.nodes:
            buf = node.buf
            if buf.target is not buf or buf.name in output_names:
                continue
            users = readers.get(buf.name, [])
            if not all(u is entry for u in users):
                continue
            if node.column:
                continue  # its partial sums are combined into the buffer when the kernel ends
            if node.is_reduction or node.epilogue or not entry.reduced:
                entry.local.add(buf.name)


def _extern_buffers(call) -> list:
    from ._ir import Buffer

    names = []

    def visit(obj):
        if isinstance(obj, Buffer):
            names.append(obj.name)
        elif hasattr(obj, "buffer") and isinstance(obj.buffer, Buffer):
            names.append(obj.buffer.name)
        elif isinstance(obj, (list, tuple)):
            for o in obj:
                visit(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o)

    visit(call.args)
    visit(call.kwargs)
    return names


def make_index_vars(n: int) -> list:
    return [sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(n)]


__all__ = ["ComputedBuffer", "Kernel", "SchedNode", "make_index_vars", "schedule"]
