"""An OpInfo-like database of ember ops checked against PyTorch (one module per op family).

Each entry (``core.OpInfo``) names the op, how to call it on ember and on torch, the dtypes
it is checked on, a sample-input generator, tolerances and error inputs. The tests in
``test_pointwise.py`` iterate over ``ALL_OPS``.
"""

from .binary import BINARY_OPS
from .core import OpInfo, Sample
from .unary import ACTIVATION_OPS, UNARY_OPS

ALL_OPS = UNARY_OPS + BINARY_OPS + ACTIVATION_OPS

__all__ = ["ACTIVATION_OPS", "ALL_OPS", "BINARY_OPS", "UNARY_OPS", "OpInfo", "Sample"]
