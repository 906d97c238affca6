"""``Optimizer``: the base class every ember optimizer extends, with PyTorch's behaviour.

Parameter groups, per-parameter ``state`` keyed by the tensor, ``state_dict`` in PyTorch's
format (state keyed by integer parameter index, groups holding index lists), step hooks and
``zero_grad``. Subclasses implement ``step`` with the single-tensor update equations of
PyTorch (``foreach=False``), in place, under ``ember.no_grad()``.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from itertools import chain, repeat
from operator import attrgetter, is_
from typing import Any

import ember
from ember import Tensor
from ember._src.ops.optim.fused import _ops_visible
from ember._src.tensor import DTYPE_CHANGES
from ember.autograd.graph import RemovableHandle

__all__ = [
    "Optimizer",
    "required",
    "register_optimizer_step_pre_hook",
    "register_optimizer_step_post_hook",
]


class _RequiredParameter:
    """Marks a default that every parameter group must set itself (e.g. a legacy ``lr``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()

_global_step_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
_global_step_post_hooks: OrderedDict[int, Callable] = OrderedDict()


def register_optimizer_step_pre_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` to run before every optimizer's ``step``."""
    handle = RemovableHandle(_global_step_pre_hooks)
    _global_step_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook: Callable) -> RemovableHandle:
    """Registers ``hook(optimizer, args, kwargs)`` to run after every optimizer's ``step``."""
    handle = RemovableHandle(_global_step_post_hooks)
    _global_step_post_hooks[handle.id] = hook
    return handle


def _typename(obj: Any) -> str:
    # ember.typename, as PyTorch's message uses torch.typename (ember.FloatTensor for a float tensor)
    return ember.typename(obj)


def _with_step_hooks(step: Callable) -> Callable:
    """Wraps a subclass's ``step``: pre hooks (which may rewrite the arguments), step, post hooks."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for pre_hook in chain(_global_step_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        f"{step} must return None or a tuple of (new_args, new_kwargs), but got {result}."
                    )
                args, kwargs = result
        if self._complex_as_real and _has_complex_params(self):
            out = _step_complex_as_real(self, step, args, kwargs)
        else:
            out = step(self, *args, **kwargs)
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_step_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper._hooked = True
    return wrapper


_IS_COMPLEX = attrgetter("is_complex")


def _has_complex_params(self) -> bool:
    """Whether any parameter is complex, rescanned only when the groups' ``params`` lists (which list,
    how long) or some tensor's dtype (``DTYPE_CHANGES``) changed since the last step: the scan costs
    ~0.1 us a parameter, a tenth of a small model's fused step. The cache holds the lists themselves, so
    a list's id is never reused while it is compared."""
    lists = [g["params"] for g in self.param_groups]
    cached = self.__dict__.get("_complex_params_cache")
    if cached is not None and cached[0] == DTYPE_CHANGES[0] and len(cached[1]) == len(lists) and \
            all(a is b and n == len(b) for (a, n), b in zip(cached[1], lists)):
        return cached[2]
    found = any(any(map(_IS_COMPLEX, map(_DTYPE, params))) for params in lists)
    self._complex_params_cache = (DTYPE_CHANGES[0], [(params, len(params)) for params in lists], found)
    return found


def _step_complex_as_real(self, step: Callable, args, kwargs):
    """``step`` with every complex parameter seen as its real view (``view_as_real``: the real and
    imaginary parts as independent entries), its gradient and state tensors too, as PyTorch's
    optimizers do; the state stays complex-typed between steps (as PyTorch's, in its state_dict).
    A closure runs first, on the complex parameters (its zero_grad/backward must reach their grads)."""
    closure = kwargs.pop("closure", args[0] if args else None)
    loss = _run_closure(closure)
    swapped = []
    for group in self.param_groups:
        params = group["params"]
        for i, p in enumerate(params):
            if not p.is_complex():
                continue
            real = ember.view_as_real(p.detach())
            if p.grad is not None:
                real.grad = ember.view_as_real(p.grad)
            if p in self.state:
                self.state[real] = {k: ember.view_as_real(v) if isinstance(v, Tensor) and v.is_complex() else v
                                    for k, v in self.state.pop(p).items()}
            params[i] = real
            swapped.append((params, i, p, real))
    try:
        step(self, None, *args[1:], **kwargs)
        return loss
    finally:
        for params, i, p, real in swapped:
            params[i] = p
            if real in self.state:
                self.state[p] = {k: ember.view_as_complex(v) if isinstance(v, Tensor) and v.shape == real.shape
                                 and v.dtype == real.dtype else v for k, v in self.state.pop(real).items()}


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts defining
            parameter groups (each with a ``"params"`` entry and per-group options).
        defaults: the default value of every optimization option, used by groups that
            don't set it.
    """

    # Whether step() runs complex parameters as their real views (PyTorch's elementwise optimizers do;
    # LBFGS flattens them itself, SparseAdam and Adafactor refuse them).
    _complex_as_real = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_hooked", False):
            cls.step = _with_step_hooks(step)

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_step_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        self._optimizer_load_state_dict_post_hooks: OrderedDict[int, Callable] = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                "but got " + _typename(params)
            )
        if self.defaults.get("differentiable", False):
            raise NotImplementedError("ember optimizers do not support differentiable=True yet")
        self.state: defaultdict[Tensor, Any] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # -- pickling and printing -------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name in (
            "_optimizer_step_pre_hooks",
            "_optimizer_step_post_hooks",
            "_optimizer_state_dict_pre_hooks",
            "_optimizer_state_dict_post_hooks",
            "_optimizer_load_state_dict_pre_hooks",
            "_optimizer_load_state_dict_post_hooks",
        ):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        self.defaults.setdefault("differentiable", False)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    # -- parameter groups ------------------------------------------------------------------

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Adds a group of parameters (with its own options) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        tensors, names = [], []
        for param in params:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are missing"
                )
            param_group["param_names"] = names

        for param in tensors:
            if not isinstance(param, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(param)
                )
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            param_group.setdefault(name, default)

        # Tensors hash by identity, so a set finds repeated parameters.
        if len(tensors) != len(set(tensors)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will "
                "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3,
            )
        seen: set[Tensor] = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {which} to the optimizer"
                )
        if not seen.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # -- gradients and stepping ------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the gradient of every parameter: to ``None`` (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if grad.grad_fn is not None:
                        grad.detach_()
                    else:
                        grad.requires_grad_(False)
                    grad.zero_()

    @_with_step_hooks
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss.

        The step skeleton the group-by-group optimizers share: the closure runs with grad
        enabled, then each parameter group is updated by ``_update_group`` with grad off. An
        optimizer with a different shape of step (LBFGS) overrides ``step`` itself.
        """
        loss = _run_closure(closure)
        with ember.no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _check_fused_flags(self) -> None:
        """PyTorch's checks of ``fused``/``foreach`` at construction (same exception types)."""
        if self.defaults.get("fused"):
            if self.defaults.get("differentiable"):
                raise RuntimeError("`fused` does not support `differentiable`")
            if self.defaults.get("foreach"):
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    # -- hooks -----------------------------------------------------------------------------

    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before ``step``; it may return new ``(args, kwargs)``."""
        return _add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after ``step``."""
        return _add_hook(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` runs before ``state_dict`` builds its result."""
        return _add_hook(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs on the result of ``state_dict``; it may return a new one."""
        return _add_hook(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer, state_dict)`` runs before loading; it may return the dict to load instead."""
        return _add_hook(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(optimizer)`` runs after ``load_state_dict``."""
        return _add_hook(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # -- saving and loading ----------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's format.

        ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``: parameters
        are numbered in the order the groups list them; the state holds the live buffers.
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        index_of: dict[int, int] = {}
        start = 0

        def pack_group(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index_of.setdefault(id(p), i)
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(index_of[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Loads a state produced by ``state_dict`` (this optimizer's parameters, same group sizes)."""
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
            )
        param_of = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        )
        state: defaultdict[Any, Any] = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in param_of:
                param = param_of[key]
                state[param] = _cast_state(param, value)
            else:
                state[key] = value
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
            new_groups.append(saved)
        self.__setstate__({"state": state, "param_groups": new_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)


def _add_hook(hooks: OrderedDict, hook: Callable, prepend: bool = False) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def _cast_state(param: Tensor, value: Any, key: Any = None) -> Any:
    """A loaded state value moved to ``param``'s device (and floating dtype); ``step`` stays as is."""
    if isinstance(value, Tensor):
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


# -- helpers shared by the optimizers ------------------------------------------------------


def _scalar(value: float | Tensor) -> float:
    """A hyperparameter as a Python number (a 0-d or 1-element tensor is read once per step)."""
    return value.item() if isinstance(value, Tensor) else value


def _check_lr(lr: float | Tensor) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_betas(betas: tuple[float, float]) -> None:
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _check_nonnegative(what: str, value: float) -> None:
    if not 0.0 <= value:
        raise ValueError(f"Invalid {what}: {value}")


def _new_step() -> Tensor:
    """The per-parameter step counter PyTorch keeps: a float32 0-d tensor on the CPU."""
    return ember.tensor(0.0, dtype=ember.float32)


def _bump(step_t: Tensor) -> float:
    """Adds one to a step counter in place and returns the new count."""
    step_t.add_(1)
    return step_t.item()


def _steps_as_tensors(state: dict, group: dict[str, Any]) -> None:
    """Old checkpoints stored ``step`` as a number; PyTorch (and ember) keep a float32 tensor."""
    for p in group["params"]:
        p_state = state.get(p, {})
        if len(p_state) != 0 and "step" in p_state and not isinstance(p_state["step"], Tensor):
            p_state["step"] = ember.tensor(float(p_state["step"]), dtype=ember.float32)


# Note [fused updates]: the core's addcmul_/addcdiv_/lerp_ are single native passes that write
# in place without temporaries; the helpers below keep the optimizers' call sites short and
# PyTorch's operand order (self + value * t1 * t2, self + value * t1 / t2, PyTorch's lerp).


def _fusable(params: list, grads: list | None = None) -> bool:
    """Whether a group's update may run as one native pass (ember._fused_adam_ and friends):
    float32/float64 params with dense grads of the same dtype (``grads``: the params' grads, read
    here when not given). The fused ops themselves fall back to per-tensor ops for layouts their
    native pass does not take."""
    if not params:
        return False
    if grads is None:
        grads = list(map(_GRAD, params))
    dtypes = list(map(_DTYPE, params))
    if not set(dtypes).issubset(_FUSED_DTYPES) or list(map(_DTYPE, grads)) != dtypes:
        return False
    # The common case (plain tensors: their class's layout is strided) needs no per-tensor property call.
    if all(map(is_, map(_LAYOUT, grads), repeat(_STRIDED))):
        return True
    return not any(g.is_sparse for g in grads)


def _bump_steps(steps: list) -> None:
    """``s.add_(1)`` for every step counter: in one native call for plain float CPU counters (nothing
    that must see the adds as ops active), else one op each."""
    if _ops_visible() or ember._C._cpu_scalars(steps, True) is None:
        for s in steps:
            s.add_(1)


_GRAD, _DTYPE, _LAYOUT = attrgetter("grad"), attrgetter("dtype"), attrgetter("_layout")
_STRIDED = ember.strided
_FUSED_DTYPES = (ember.float32, ember.float64)


def _effective_grad(p: Tensor, grad: Tensor, maximize: bool, weight_decay: float) -> Tensor:
    """``-grad`` under ``maximize``, plus ``weight_decay * p``: a new tensor unless neither applies."""
    if weight_decay != 0 and grad._layout is not _STRIDED:
        # PyTorch computes grad.add(p, alpha=weight_decay), which its sparse kernels refuse
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if maximize:
        grad = grad.neg()
        if weight_decay != 0:
            grad.add_(p, alpha=weight_decay)
        return grad
    if weight_decay != 0:
        return p.mul(weight_decay).add_(grad)
    return grad


def _addcmul_(out: Tensor, t1: Tensor, t2: Tensor, value: float) -> Tensor:
    """``out += value * t1 * t2`` in place."""
    return out.addcmul_(t1, t2, value=value)


def _lerp_(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """``start += weight * (end - start)`` in place (PyTorch's lerp, exact at both ends)."""
    return start.lerp_(end, weight)


def _add_quotient_(out: Tensor, numerator: Tensor, denominator: Tensor, value: float) -> Tensor:
    """``out += value * numerator / denominator`` in place."""
    return out.addcdiv_(numerator, denominator, value=value)


def _run_closure(closure: Callable[[], Any] | None) -> Any:
    if closure is None:
        return None
    with ember.enable_grad():
        return closure()


def _no_grad_step(step: Callable) -> Callable:
    """Runs an optimizer's ``step`` with grad mode off (updates must not be recorded)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with ember.no_grad():
            return step(self, *args, **kwargs)

    return wrapper


# ---- PyTorch's module-level helpers that third-party optimizers import (timm, lightning) ----------

ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]

_foreach_supported_types = [Tensor, ember.nn.Parameter]


def _get_foreach_kernels_supported_devices() -> list[str]:
    """The device types PyTorch has multi-tensor (foreach) kernels for."""
    return ["cuda", "xpu", "mtia", ember._C._get_privateuse1_backend_name()]


def _get_fused_kernels_supported_devices() -> list[str]:
    """The device types PyTorch has fused optimizer kernels for."""
    return ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", ember._C._get_privateuse1_backend_name()]


def _get_capturable_supported_devices(supports_xla: bool = True) -> list[str]:
    """The device types a ``capturable`` optimizer may run on."""
    devices = ["cuda", "xpu", "hpu", ember._C._get_privateuse1_backend_name()]
    if supports_xla:
        devices.append("xla")
    return devices


def _default_to_fused_or_foreach(params: list, differentiable: bool, use_fused: bool = False) -> tuple[bool, bool]:
    """(fused, foreach): the implementation PyTorch picks by default for ``params``."""
    if differentiable:
        return False, False
    fused_devices = _get_fused_kernels_supported_devices()
    foreach_devices = _get_foreach_kernels_supported_devices()
    fused = use_fused and all(p is None or (type(p) in _foreach_supported_types and p.device.type in fused_devices
                                            and ember.is_floating_point(p)) for p in params)
    foreach = not fused and all(p is None or (type(p) in _foreach_supported_types
                                              and p.device.type in foreach_devices) for p in params)
    return fused, foreach


def _use_grad_for_differentiable(func):
    """Runs an optimizer's ``step`` with grad mode set to its ``defaults["differentiable"]``."""

    def _use_grad(*args, **kwargs):
        self = args[0]
        prev_grad = ember.is_grad_enabled()
        try:
            ember.set_grad_enabled(self.defaults["differentiable"])
            return func(*args, **kwargs)
        finally:
            ember.set_grad_enabled(prev_grad)

    functools.update_wrapper(_use_grad, func)
    return _use_grad
