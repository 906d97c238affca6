"""The text of a graph break, as PyTorch 2.13 words it (``explain(...).break_reasons[i].reason``
and the message of ``Unsupported`` under ``fullgraph=True``), keyed by the capture's own reason.

A reason without an entry here is shown as the capture words it.
"""

from __future__ import annotations

DATA_DEPENDENT_BRANCH = "Data-dependent branching"
DYNAMIC_SHAPE_OPERATOR = "Dynamic shape operator: "  # + the op's name (nonzero, index, unique ...)
DISABLED_CALL = "Skip calling `torch.compiler.disable()`d function"  # + PyTorch's explanation of that call

# capture reason -> (PyTorch's break reason in explain(), PyTorch's fullgraph=True error text)
_TEXTS = {
    "Tensor.item()": (
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.\n"
        "  Hint: Set `torch._dynamo.config.capture_scalar_outputs = True` or `export "
        "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the captured graph.",
        None,
    ),
    DATA_DEPENDENT_BRANCH: (
        "generic_jump TensorVariable()",
        "Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`). Dynamo does not "
        "support tracing dynamic control flow.\n"
        "  Hint: This graph break is fundamental - it is unlikely that Dynamo will ever be able to trace "
        "through your code. Consider finding a workaround.\n"
        "  Hint: Use `torch.cond` to express dynamic control flow.",
    ),
    "printing a tensor": (
        "Failed to trace builtin operator\n"
        "  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types "
        "['Tensor'] (has_kwargs False)\n"
        "  Hint: Avoid calling builtin `print` with argument types ['Tensor']. Consider using an equivalent "
        "alternative function/method to `print`.",
        None,
    ),
    "print": (
        "Failed to trace builtin operator\n"
        "  Explanation: Dynamo does not know how to trace builtin operator `print`\n"
        "  Hint: Avoid calling builtin `print`. Consider using an equivalent alternative function/method to "
        "`print`.",
        None,
    ),
    "torch._dynamo.graph_break()": (
        "Call to `torch._dynamo.graph_break()`\n"
        "  Explanation: User-inserted graph break. Message: None\n"
        "  Hint: Remove the `torch._dynamo.graph_break()` call.",
        None,
    ),
}


def _dynamic_shape_text(op: str) -> str:
    if op == "index":
        op = "nonzero"  # x[mask] (PyTorch indexes with the mask's nonzero())
    return ("Dynamic shape operator\n"
            f"  Explanation: Operator `aten.{op}.default`'s output shape depends on input Tensor data.\n"
            "  Hint: Enable tracing of dynamic shape operators with "
            "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`")


def explain_text(reason: str) -> str:
    """The break reason ``explain()`` reports."""
    if reason.startswith(DYNAMIC_SHAPE_OPERATOR):
        return _dynamic_shape_text(reason[len(DYNAMIC_SHAPE_OPERATOR):])
    entry = _TEXTS.get(reason)
    return entry[0] if entry is not None else reason


def fullgraph_text(reason: str) -> str:
    """The message of the ``Unsupported`` a ``fullgraph=True`` compile raises for the break."""
    if reason.startswith(DYNAMIC_SHAPE_OPERATOR):
        return _dynamic_shape_text(reason[len(DYNAMIC_SHAPE_OPERATOR):])
    if reason.startswith(DISABLED_CALL):
        return reason
    entry = _TEXTS.get(reason)
    if entry is None:
        return f"graph break in a fullgraph=True compile: {reason}"
    return entry[1] or entry[0]
