"""Column sums inside a row kernel (the C++ backend's half of the scheduler's column fusion).

A column node sums the kernel's rows and keeps its columns (a bias gradient over the gradient the
kernel writes, a layer_norm weight gradient over the values its backward reads). Rows are what
the kernel's threads share out, so each thread adds its rows into partial sums of its own, one
slot of a ``threads x columns`` array, in the loop that walks the row (the row is in L1 there);
when the rows are done the slots are added in thread order (a fixed order: the same threads give
the same result) and stored. The gradient is read from memory once, by the kernel that writes
it, instead of once more by a column-sum kernel of its own.

The generated code (a bias gradient fused into GELU's backward)::

    const int64_t cols_buf116 = k0;
    const int col_threads = omp_get_max_threads();
    float* part_buf116 = (float*)calloc((size_t)col_threads * cols_buf116, sizeof(float));
    #pragma omp parallel for if(k1 >= 32768)
    for (int64_t x1 = 0; x1 < k2; ++x1) {
        float* __restrict__ col_buf116 = part_buf116 + (int64_t)omp_get_thread_num() * cols_buf116;
        ... the row's loops; the one computing the gradient also does col_buf116[x2] += tmp12;
    }
    for (int64_t i_buf116 = 0; i_buf116 < cols_buf116; ++i_buf116) { ... sum of the slots ... }
    free(part_buf116);
"""

from __future__ import annotations

from . import _cpp_ops as C
from ._ir import product


def column_nodes(kernel) -> list:
    return [n for n in kernel.nodes if getattr(n, "column", False)]


def before(w, nodes, indent) -> list[str]:
    """The partial-sum arrays, allocated (zeroed) before the row loop's threads start."""
    lines = [f"{indent}const int col_threads = omp_get_max_threads();"]
    for n in nodes:
        name = n.buf.name
        t = C.C_TYPES[n.buf.acc_dtype]
        lines.append(f"{indent}const int64_t cols_{name} = {w.itext(product(n.buf.shape))};")
        lines.append(f"{indent}{t}* part_{name} = ({t}*)calloc((size_t)col_threads * cols_{name}, sizeof({t}));")
    return lines


def row_start(nodes, indent) -> list[str]:
    """Each row's pointers to its thread's partial sums (inside the row loop's threads)."""
    lines = []
    for n in nodes:
        name = n.buf.name
        t = C.C_TYPES[n.buf.acc_dtype]
        lines.append(f"{indent}{t}* __restrict__ col_{name} = part_{name} + "
                     f"(int64_t)omp_get_thread_num() * cols_{name};")
    return lines


def accumulate(w, node, value: str, body) -> None:
    """``value`` (this element's term) added to its column's partial sum."""
    idx = w.itext(node.store_index.xreplace(w.subs))
    body.lines.append(f"{body.indent}col_{node.buf.name}[{idx}] += {value};")


def after(nodes, indent) -> list[str]:
    """The slots added in thread order into each column sum's buffer, and the arrays freed."""
    lines = []
    for n in nodes:
        name = n.buf.name
        t = C.C_TYPES[n.buf.acc_dtype]
        i = f"i_{name}"
        lines += [f"{indent}for (int64_t {i} = 0; {i} < cols_{name}; ++{i}) {{",
                  f"{indent}    {t} sum_{name} = part_{name}[{i}];",
                  f"{indent}    for (int t = 1; t < col_threads; ++t)",
                  f"{indent}        sum_{name} += part_{name}[t * cols_{name} + {i}];",
                  f"{indent}    {n.target}[{i}] = {C.store_value(f'sum_{name}', n.buf.dtype)};",
                  f"{indent}}}",
                  f"{indent}free(part_{name});"]
    return lines
