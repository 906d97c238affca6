"""Settings of ``ember.compile`` (PyTorch's ``torch._dynamo.config`` names where they apply).

Assign to change: ``ember.compiler.config.cache_size_limit = 16``.
"""

import sys

# Graphs one segment position of a compiled function may compile before the function runs
# eagerly from then on (with one warning).
cache_size_limit = 8
recompile_limit = 8  # PyTorch's newer name for the same limit: a value other than 8 wins
# Graphs one compiled function may compile over all its segment positions (Dynamo's limit per code object).
accumulated_cache_size_limit = 256
# dynamic=None: the first call is static; when the same op structure arrives with other sizes,
# compile once with symbolic sizes (PyTorch's automatic dynamic shapes).
automatic_dynamic_shapes = True
# Sizes 0 and 1 are specialized even in symbolic mode (PyTorch's 0/1 specialization).
# specialize_int / specialize_float: int / float arguments of a compiled function are always
# constants of its graph (False: a changed number makes that argument symbolic, as sizes).
specialize_int = False
specialize_float = False
# .item() / ops with data-dependent output shapes (nonzero, x[mask]) are kept "in the graph":
# ember computes them between two graphs, which then is not counted as a graph break.
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
# A compiled function compiling a graph again (new shapes, dtypes, ops ...) raises RecompileError.
error_on_recompile = False
# A backend that fails to compile a graph: False raises BackendCompilerFailed; True logs it and runs the
# function eagerly from then on (Dynamo skips the frame's code).
suppress_errors = False
# Accepted for PyTorch programs that set it.
verbose = False


def patch(arg1=None, arg2=None, **kwargs):
    """These settings for the duration of a ``with`` block or a decorated call
    (``torch._dynamo.config.patch(cache_size_limit=16)``)."""
    from ._config_patch import ConfigPatch, changes_of, missing_setting

    return ConfigPatch(__name__, changes_of(arg1, arg2, **kwargs), missing_setting)


class _Settings(type(sys)):
    """This module's type: assigning a setting it does not have raises AttributeError, as PyTorch's
    ``ConfigModule`` (a misspelt knob would otherwise be set and silently do nothing)."""

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in self.__dict__:
            raise AttributeError(f"ember._dynamo.config.{name} does not exist")
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Settings
