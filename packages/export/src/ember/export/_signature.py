"""The graph signature of an exported program: what each placeholder and output *is*.

The exported graph takes every parameter, buffer and lifted constant as an input
(placeholder) before the user's inputs, and returns the new values of mutated buffers and
inputs before the user's outputs. The signature records, in graph order, which is which
and which module attribute (``target``) each stands for, as ``torch.export``'s does.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class InputKind(enum.Enum):
    USER_INPUT = enum.auto()
    PARAMETER = enum.auto()
    BUFFER = enum.auto()
    CONSTANT_TENSOR = enum.auto()
    CUSTOM_OBJ = enum.auto()
    TOKEN = enum.auto()


class OutputKind(enum.Enum):
    USER_OUTPUT = enum.auto()
    LOSS_OUTPUT = enum.auto()
    BUFFER_MUTATION = enum.auto()
    GRADIENT_TO_PARAMETER = enum.auto()
    GRADIENT_TO_USER_INPUT = enum.auto()
    USER_INPUT_MUTATION = enum.auto()
    TOKEN = enum.auto()
    PARAMETER_MUTATION = enum.auto()


@dataclasses.dataclass
class TensorArgument:
    name: str


@dataclasses.dataclass
class SymIntArgument:
    name: str


@dataclasses.dataclass
class ConstantArgument:
    name: str
    value: Any


ArgumentSpec = TensorArgument | SymIntArgument | ConstantArgument


@dataclasses.dataclass
class InputSpec:
    kind: InputKind
    arg: ArgumentSpec
    target: str | None
    persistent: bool | None = None

    def __post_init__(self):
        if self.kind is InputKind.BUFFER and self.persistent is None:
            raise ValueError("InputSpec of a buffer needs persistent=True or False")

    def __str__(self) -> str:
        text = f"{self.arg.name}: {self.kind.name}"
        if self.target is not None:
            text += f" target={self.target!r}"
        if self.persistent is not None:
            text += f" persistent={self.persistent}"
        return text


@dataclasses.dataclass
class OutputSpec:
    kind: OutputKind
    arg: ArgumentSpec
    target: str | None

    def __str__(self) -> str:
        text = f"{self.arg.name}: {self.kind.name}"
        return text + (f" target={self.target!r}" if self.target is not None else "")


@dataclasses.dataclass
class ExportGraphSignature:
    """Input and output specs in graph order, with PyTorch's derived views of them."""

    input_specs: list[InputSpec]
    output_specs: list[OutputSpec]

    def _inputs(self, kind: InputKind) -> list[InputSpec]:
        return [s for s in self.input_specs if s.kind is kind]

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(s.target for s in self._inputs(InputKind.PARAMETER))

    @property
    def buffers(self) -> tuple[str, ...]:
        return tuple(s.target for s in self._inputs(InputKind.BUFFER))

    @property
    def non_persistent_buffers(self) -> tuple[str, ...]:
        return tuple(s.target for s in self._inputs(InputKind.BUFFER) if not s.persistent)

    @property
    def lifted_tensor_constants(self) -> tuple[str, ...]:
        return tuple(s.target for s in self._inputs(InputKind.CONSTANT_TENSOR))

    @property
    def user_inputs(self) -> tuple:
        out = []
        for s in self._inputs(InputKind.USER_INPUT):
            out.append(s.arg.value if isinstance(s.arg, ConstantArgument) else s.arg.name)
        return tuple(out)

    @property
    def user_outputs(self) -> tuple:
        out = []
        for s in self.output_specs:
            if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT):
                out.append(s.arg.value if isinstance(s.arg, ConstantArgument) else s.arg.name)
        return tuple(out)

    @property
    def inputs_to_parameters(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.PARAMETER)}

    @property
    def inputs_to_buffers(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.BUFFER)}

    @property
    def inputs_to_lifted_tensor_constants(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self._inputs(InputKind.CONSTANT_TENSOR)}

    @property
    def buffers_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind is OutputKind.BUFFER_MUTATION}

    @property
    def parameters_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind is OutputKind.PARAMETER_MUTATION}

    @property
    def user_inputs_to_mutate(self) -> dict[str, str]:
        return {s.arg.name: s.target for s in self.output_specs if s.kind is OutputKind.USER_INPUT_MUTATION}

    def __str__(self) -> str:
        # PyTorch's layout: a leading newline (``Graph signature: `` ends its line).
        inputs = "\n".join(str(s) for s in self.input_specs)
        outputs = "\n".join(str(s) for s in self.output_specs)
        return f"\n# inputs\n{inputs}\n\n# outputs\n{outputs}\n"
