"""Pass infrastructure (PyTorch's ``torch.fx.passes.infra``): ``PassBase``, ``PassResult``, ``PassManager``."""

from . import pass_base, pass_manager

__all__ = ["pass_base", "pass_manager"]
