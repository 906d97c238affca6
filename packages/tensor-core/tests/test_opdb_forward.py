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
    return db.ALL_DTYPES if FULL else entry.dtypes


@pytest.mark.parametrize("entry", _ids("forward"))
def test_forward_matches_torch(entry):
    _needs(entry)
    for dtype in _dtypes(entry):
        for sample in entry.samples(dtype):
            db.run_forward(entry, sample, dtype)


@pytest.mark.parametrize("entry", _ids("errors"))
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
