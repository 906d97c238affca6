"""``torch._jit_internal`` names library code imports: the qualified name TorchScript gives a Python
object, ``_copy_to_script_wrapper`` and the container-annotation checks (pyro, detectron2)."""

from __future__ import annotations

import enum
import re

from ember.jit._state import FunctionModifiers, export, ignore, is_scripting, unused
from ember.jit.annotations import (
    BroadcastingList1,
    BroadcastingList2,
    BroadcastingList3,
    is_dict,
    is_list,
    is_optional,
    is_tuple,
    is_union,
)

__all__ = ["BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "export", "ignore", "is_dict", "is_list",
           "is_optional", "is_scripting", "is_tuple", "is_union", "unused"]

# PyTorch's value of the marker (torch._jit_internal.FunctionModifiers.COPY_TO_SCRIPT_WRAPPER)
_COPY_TO_SCRIPT_WRAPPER = "if this method is not scripted, copy the python method onto the scripted model"


def _qualified_name(obj, mangle_name: bool = True) -> str:
    """TorchScript's name for a class or function: ``__torch__.<module>.<name>`` (``__torch__.<name>``
    for ``__main__``), or the module path unmangled."""
    if hasattr(obj, "_jit_override_qualname"):
        return obj._jit_override_qualname
    from ember.jit import ScriptFunction

    if isinstance(obj, ScriptFunction) and hasattr(obj, "qualified_name"):
        return obj.qualified_name
    if getattr(obj, "__name__", None):
        name = obj.__name__
    elif isinstance(obj, enum.Enum):
        name = obj.name
    else:
        raise RuntimeError("Could not get name of python class object")
    if name == "<lambda>":
        name = "_lambda"  # a valid identifier
    module_name = obj.__module__
    if module_name is None:
        raise RuntimeError(f"Could not get qualified name for class '{name}': __module__ can't be None.")
    if re.match(r"<torch_package_\d+>", module_name):  # torch.package's mangling, normalized
        module_name = module_name.replace("<", "_").replace(">", "_")
    if mangle_name:
        module_name = "__torch__" if module_name == "__main__" else "__torch__." + module_name
    if "." in name:
        raise RuntimeError(f"Could not get qualified name for class '{name}': '{name}' is not a valid identifier")
    return module_name + "." + name


def _copy_to_script_wrapper(fn):
    """Marks ``fn`` to be copied onto the ScriptModule wrapper of its module."""
    fn._torchscript_modifier = _COPY_TO_SCRIPT_WRAPPER  # PyTorch's attribute and value
    fn._ember_jit_modifier = FunctionModifiers.COPY_TO_SCRIPT_WRAPPER  # where ember.jit's decorators put it
    return fn
