"""Memory layouts (``ember.strided``, ``ember.sparse_coo``, ...): PyTorch's ``torch.layout`` values.

A layout is a dispatch key (see ``dispatch.py``, "Layouts"): a tensor whose layout is not
``strided`` reaches the op's per-layout kernel instead of the device kernel.
"""

from __future__ import annotations


class layout:  # noqa: N801  (PyTorch's name: ``torch.layout``)
    """One memory layout; compared by identity, as PyTorch's."""

    __slots__ = ("name", "dispatch_key", "backend")

    def __init__(self, name: str, dispatch_key: str | None, backend: str):
        self.name = name
        self.dispatch_key = dispatch_key  # key of the op's per-layout kernel; None for strided
        self.backend = backend  # PyTorch's backend name, used in "Could not run ..." errors

    def __repr__(self) -> str:
        return "torch." + self.name

    def __reduce__(self):
        return (_layout_by_name, (self.name,))


strided = layout("strided", None, "CPU")
sparse_coo = layout("sparse_coo", "sparse_cpu", "SparseCPU")
sparse_csr = layout("sparse_csr", "sparse_csr_cpu", "SparseCsrCPU")
sparse_csc = layout("sparse_csc", "sparse_csr_cpu", "SparseCsrCPU")
sparse_bsr = layout("sparse_bsr", "sparse_csr_cpu", "SparseCsrCPU")
sparse_bsc = layout("sparse_bsc", "sparse_csr_cpu", "SparseCsrCPU")
_mkldnn = layout("_mkldnn", None, "MkldnnCPU")
jagged = layout("jagged", None, "CPU")

LAYOUTS = {t.name: t for t in (strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc, _mkldnn,
                                jagged)}
COMPRESSED = (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc)


def _layout_by_name(name: str) -> layout:
    return LAYOUTS[name]
