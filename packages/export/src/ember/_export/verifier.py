"""``torch._export.verifier``'s names: the classes of ``ExportedProgram.verifiers``."""

from ember.export._verifier import SpecViolationError, TrainingIRVerifier, Verifier

__all__ = ["SpecViolationError", "TrainingIRVerifier", "Verifier"]
