"""``torch.distributed.tensor.parallel.loss``: ``loss_parallel``'s module path."""

from ._loss import loss_parallel  # noqa: F401 - re-exported
