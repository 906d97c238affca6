"""vmap of index_add_/index_copy_/index_fill_ (and index_add): the result is the batched self, as torch.func's.

The rule returned the physical tensor it had rebound ``self`` to, which vmap then read as one sample's
value (the result gained a dim: (B, B, ...)); a per-sample fill value failed on a bool passed as a Tensor.
"""

from __future__ import annotations

import pytest
import torch

import ember

CASES = {
    "index_add_ batched self": (lambda m: (lambda s, x: s.index_add_(0, m.tensor([0]), x[:1])),
                                lambda m: (m.zeros(3, 2), m.ones(3, 2))),
    "index_add fresh self": (lambda m: (lambda x: m.zeros(2).index_add(0, m.tensor([0]), x[:1])),
                             lambda m: (m.ones(3, 2),)),
    "index_add_ batched index": (lambda m: (lambda s, i, x: s.index_add_(0, i, x[:1] * 2)),
                                 lambda m: (m.zeros(3, 2), m.tensor([[0], [1], [1]]), m.ones(3, 2))),
    "index_fill_ batched index": (lambda m: (lambda s, i: s.index_fill_(0, i, 5.0)),
                                  lambda m: (m.zeros(3, 2), m.tensor([[0], [1], [1]]))),
    "index_fill_ per-sample value": (lambda m: (lambda s, x: s.index_fill_(0, m.tensor([0]), x)),
                                     lambda m: (m.zeros(3, 2), m.arange(3.0))),
    "index_fill_ both batched": (lambda m: (lambda s, i, x: s.index_fill_(0, i, x)),
                                 lambda m: (m.zeros(3, 2), m.tensor([[0], [1], [1]]), m.arange(3.0))),
    "index_copy_ batched source": (lambda m: (lambda s, x: s.index_copy_(0, m.tensor([1]), x[1:])),
                                   lambda m: (m.zeros(3, 2), m.arange(6.0).view(3, 2))),
    "index_add_ 2d dim 1": (lambda m: (lambda s, x: s.index_add_(1, m.tensor([2, 0]), x)),
                            lambda m: (m.zeros(4, 2, 3), m.arange(16.0).view(4, 2, 2))),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_index_dim_inplace_results_match_torch(name):
    make_fn, make_args = CASES[name]
    theirs = torch.func.vmap(make_fn(torch))(*make_args(torch))
    ours = ember.func.vmap(make_fn(ember))(*make_args(ember))
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()
