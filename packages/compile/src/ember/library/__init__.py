"""ember.library: custom ops (PyTorch's ``torch.library``).

High level: ``@custom_op("ns::name", mutates_args=...)`` with ``register_fake``,
``register_autograd``, ``register_kernel``, ``register_vmap``; low level: ``Library(ns, kind)``
with ``define``/``impl``, and the module functions ``define``/``impl``; ``opcheck`` tests a
custom op's registrations; ``infer_schema`` shows the schema read from type hints.

A custom op is an ordinary ember op ``ember.ops.<ns>.<name>`` (``_registry``): it runs eagerly
and under autograd, records as one node under ``ember.compile``, ``make_fx`` and
``ember.export``, and a saved program names it (loading needs the op defined again first).
"""

from ._custom_op import (
    CustomOpDef,
    custom_op,
    get_kernel,
    impl_abstract,
    register_autograd,
    register_fake,
    register_kernel,
    register_meta,
    register_vmap,
)
from ._library import Library, define, impl
from ._opcheck import OpCheckError, opcheck
from ._schema import infer_schema

__all__ = [
    "CustomOpDef", "Library", "OpCheckError", "custom_op", "define", "get_kernel", "impl", "impl_abstract",
    "infer_schema", "opcheck",
    "register_autograd", "register_fake", "register_kernel", "register_meta", "register_vmap",
]
