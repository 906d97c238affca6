"""Helpers for writing passes (PyTorch's ``torch.fx.passes.utils``)."""
