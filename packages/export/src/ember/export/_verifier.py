"""What an exported graph may hold (PyTorch's ``torch._export.verifier``): ``ep.verifiers``.

``torch.export.export`` gives a program of the training IR (``dialect == "TRAINING"``,
``TrainingIRVerifier``); ``run_decompositions()`` gives one of the ATen dialect
(``Verifier``). ``check(ep)`` is ``ep.validate()``'s check (``_verify.verify_program``): the
placeholders and outputs are the signature's, and every call is an ember op or an allowed
function.
"""

from __future__ import annotations

from ._verify import SpecViolationError, verify_program


class Verifier:
    dialect = "ATEN"

    def __call__(self, ep) -> None:
        self.check(ep)

    def check(self, ep) -> None:
        verify_program(ep)


class TrainingIRVerifier(Verifier):
    dialect = "TRAINING"


def verifier_of(dialect: str) -> type:
    return TrainingIRVerifier if dialect == "TRAINING" else Verifier


__all__ = ["SpecViolationError", "TrainingIRVerifier", "Verifier"]
