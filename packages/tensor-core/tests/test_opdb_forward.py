"""Generic tests over the op database (ember.testing._opdb): every entry against PyTorch.

forward    each sample in each dtype of the entry: values, dtypes, shapes, or the same exception type
meta       the same calls on the meta device: shapes and dtypes as on the CPU
inplace    the in-place method on a copy of the first input equals the out-of-place result
out        ``out=`` writes the result (resizing an empty out) as PyTorch does
method     the Tensor method equals the function
errors     each error input raises PyTorch's exception type on both libraries
The exhaustive form (every dtype) runs in `nox -s opdb` (EMBER_OPDB_FULL=1).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os

import pytest
import torch

import ember
from ember.testing import _opdb as db

FULL = os.environ.get("EMBER_OPDB_FULL") == "1"


def _ids(test):
    return [pytest.param(e, id=e.name) for e in db.entries(test=test)]


def _needs(entry):
    for mod in entry.requires:
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{entry.name} needs {mod}")


def _dtypes(entry):
    if FULL:
        return db.ALL_DTYPES if entry.kind == "op" else ("float32", "float64")
    return entry.dtypes


@pytest.mark.parametrize("entry", _ids("forward"))
def test_forward_matches_torch(entry):
    _needs(entry)
    for dtype in _dtypes(entry):
        for sample in entry.samples(dtype):
            db.run_forward(entry, sample, dtype)


@pytest.mark.parametrize("entry", [p for p in _ids("errors") if p.values[0].errors is not None])
def test_error_inputs_raise_torch_type(entry):
    _needs(entry)
    if entry.errors is None:
        pytest.skip("no error inputs")
    for err in entry.errors():
        dtype = "float32"
        with pytest.raises(err.exc):
            db.call_sample(entry, err.sample, dtype, torch)
        with pytest.raises(err.exc, match=err.match):
            db.call_sample(entry, err.sample, dtype, ember)


def _variant(entry, call):
    return dataclasses.replace(entry, call=call)


@pytest.mark.parametrize("entry", [p for p in _ids("method") if p.values[0].method])
def test_method_matches_torch(entry):
    _needs(entry)
    name = entry.method
    variant = _variant(entry, lambda L: lambda self, *a, **k: getattr(self, name)(*a, **k))
    for sample in entry.samples("float32"):
        if sample.args and isinstance(sample.args[0], db.T):
            db.run_forward(variant, sample, "float32")


@pytest.mark.parametrize("entry", [p for p in _ids("inplace") if p.values[0].inplace])
def test_inplace_matches_torch(entry):
    """The in-place method on both libraries: the returned self, or the same exception type."""
    _needs(entry)
    name = entry.inplace
    variant = _variant(entry, lambda L: lambda self, *a, **k: getattr(self.clone(), name)(*a, **k))
    for dtype in ("int64", "float32"):
        for sample in entry.samples(dtype):
            if sample.inplace and sample.args and isinstance(sample.args[0], db.T):
                db.run_forward(variant, sample, dtype)


# Full reductions take out= in PyTorch only when dim is passed (even as None); the schema-derived
# samples call them without dim, where ember accepts out= too (docs/deviations.md).
NO_OUT_WITHOUT_DIM = {"sum", "prod", "nansum", "mean", "nanmean"}


@pytest.mark.parametrize("entry", [p for p in _ids("out") if p.values[0].out])
def test_out_matches_torch(entry):
    """``out=`` given an empty tensor of the result's dtype: resized and filled as PyTorch does."""
    _needs(entry)
    for sample in entry.samples("float32"):
        try:
            expected, *_ = db.call_sample(entry, sample, "float32", torch)
        except Exception:  # noqa: BLE001 - a sample torch refuses is the forward test's concern
            continue
        if not isinstance(expected, torch.Tensor) or entry.name in NO_OUT_WITHOUT_DIM:
            continue
        dtype = str(expected.dtype).split(".")[-1]

        def call(L, dtype=dtype):
            fn = entry.call(L)
            return lambda *a, **k: fn(*a, **k, out=L.empty(0, dtype=getattr(L, dtype)))

        db.run_forward(_variant(entry, call), sample, "float32")


# Ops whose result shape depends on the values: no meta kernel, in ember as in PyTorch.
DATA_DEPENDENT = {"nonzero", "_unique2", "bincount", "index_put_", "masked_scatter_", "histc", "index",
                  "multinomial", "poisson", "binomial", "randperm", "linalg_lstsq", "mode", "searchsorted",
                  "allclose", "argwhere", "equal", "from_dlpack", "is_nonzero", "masked_select", "unique",
                  "unique_consecutive", "histogram", "histogramdd"}
# ember composites that read values on the way (LAPACK through NumPy, Python loops): no meta path yet
# (docs/deviations.md lists them).
META_GAPS = {"block_diag", "isin", "istft", "linalg.lu", "linalg.lu_factor", "linalg.lu_solve", "linalg.matrix_exp",
             "lu_solve", "lu_unpack", "matrix_exp", "nanquantile", "vander", "where"}


def _meta_runs(entry) -> bool:
    # The orthogonal polynomials run their recurrence to the largest degree in n: a value.
    if "polynomial" in entry.name:
        return False
    return entry.name not in DATA_DEPENDENT | META_GAPS or (entry.name == "where" and entry.kind == "op")


@pytest.mark.parametrize("entry", [p for p in _ids("meta") if _meta_runs(p.values[0])])
def test_meta_matches_cpu(entry):
    """On the meta device: the shapes and dtypes of PyTorch's CPU results (no values)."""
    _needs(entry)
    for sample in entry.samples("float32"):
        try:
            expected, *_ = db.call_sample(entry, sample, "float32", torch)
        except Exception:  # noqa: BLE001 - error inputs are the forward test's concern
            continue
        got, *_ = db.call_sample(entry, sample, "float32", ember, device="meta")
        db.assert_match(got, expected, desc=f"{entry.name} meta {sample.desc}", values=False)
