"""PyTorch's module path of draft_export's report types (``torch.export._draft_export``)."""

from ._draft import DraftExportReport, FailureReport, FailureType, draft_export

__all__ = ["DraftExportReport", "FailureReport", "FailureType", "draft_export"]
