"""Distribution tests expect argument validation on by default, as in a fresh process. A first
``compile(fn)`` anywhere in the same pytest process switches it off (PyTorch's behaviour, which
ember copies, and torch's own compile does it to the oracle), so each test starts with both on."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _distribution_validation_on():
    import ember

    saved = ember.distributions.Distribution._validate_args
    ember.distributions.Distribution.set_default_validate_args(True)
    try:
        import torch
    except ImportError:
        torch = None
    torch_saved = torch.distributions.Distribution._validate_args if torch is not None else None
    if torch is not None:
        torch.distributions.Distribution.set_default_validate_args(True)
    yield
    ember.distributions.Distribution.set_default_validate_args(saved)
    if torch is not None:
        torch.distributions.Distribution.set_default_validate_args(torch_saved)
