"""``torch._dynamo.backends``: ``common.aot_autograd`` (a backend from forward/backward compilers)
and ``registry`` (register / look up / list backends), over ember.compiler."""

from . import common, registry

__all__ = ["common", "registry"]
