"""The pytorch/examples-style GCN and GAT (examples/sparse_graph_training.py) train to the same
losses with ember as with torch, from the same initial weights on the same graph (issue 19)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

import ember

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sparse_graph_training.py"


@pytest.fixture(scope="module")
def example():
    if not EXAMPLE.exists():
        pytest.skip("examples/ is not part of this install (run from the repository)")
    spec = importlib.util.spec_from_file_location("sparse_graph_training", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("which", ["gcn", "gat"])
def test_losses_match_torch(example, which):
    ours = example.run(ember, which, epochs=8, nodes=100, edges=400)
    theirs = example.run(torch, which, epochs=8, nodes=100, edges=400)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
    assert ours[-1] < ours[0]  # it learns
