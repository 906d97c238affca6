"""``LazyModuleMixin``: modules whose parameter shapes come from their first input."""

from __future__ import annotations

from ..parameter import is_lazy


class LazyModuleMixin:
    """Materializes ``UninitializedParameter``s on the first call, then becomes ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._lazy_hook = self.register_forward_pre_hook(_infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self) -> bool:
        params = self._parameters.values()
        buffers = self._buffers.values()
        return any(is_lazy(p) for p in list(params) + list(buffers))

    def initialize_parameters(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")


def _infer_parameters(module, args, kwargs):
    module.initialize_parameters(*args, **kwargs)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._lazy_hook.remove()
    del module._lazy_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become
    return None
