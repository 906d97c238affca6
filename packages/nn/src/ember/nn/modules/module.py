"""``nn.Module``: the base class of every layer and model.

Registration happens in ``__setattr__``: a ``Parameter`` goes to ``_parameters``, a
``Module`` to ``_modules``, a tensor assigned to a registered buffer name to ``_buffers``.
Traversal order, state-dict keys, hook semantics and error messages follow PyTorch's.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator
from typing import Any

import ember
from ember import Tensor
from ember import typename as _typename
from ember.utils.hooks import RemovableHandle

from ..parameter import Buffer, Parameter, is_lazy
from . import _global_hooks as _globals
from ._backward_hooks import BackwardHook
from ._global_hooks import (  # noqa: F401 - PyTorch's names in torch.nn.modules.module
    register_module_backward_hook,
    register_module_buffer_registration_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
    register_module_module_registration_hook,
    register_module_parameter_registration_hook,
)

__all__ = ["Module"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class _WithModule:
    """Calls ``hook(module, *args)`` holding the module weakly: the hook is stored in the module
    itself, so a strong reference would make every module with such a hook a reference cycle."""

    __slots__ = ("hook", "module_ref")

    def __init__(self, hook, module) -> None:
        self.hook = hook
        self.module_ref = weakref.ref(module)

    def __call__(self, *args, **kwargs):
        module = self.module_ref()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args, **kwargs)

    # deepcopy/pickle see the module itself, so a copied module's hook is bound to the copy.
    def __getstate__(self):
        return self.hook, self.module_ref()

    def __setstate__(self, state) -> None:
        self.hook = state[0]
        self.module_ref = weakref.ref(state[1])


def _add_hook(hooks: OrderedDict, hook, prepend: bool, extra=None) -> RemovableHandle:
    handle = RemovableHandle(hooks, extra_dict=extra)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class Module:
    """Base class for all neural network modules."""

    training: bool
    _version: int = 1
    call_super_init: bool = False
    dump_patches: bool = False

    def __init__(self, *args, **kwargs) -> None:
        if self.call_super_init is False and (args or kwargs):
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'"
                if kwargs else f"{type(self).__name__}.__init__() takes 1 positional argument but "
                f"{len(args) + 1} were given"
            )
        setattr_ = super().__setattr__
        setattr_("training", True)
        setattr_("_parameters", {})
        setattr_("_buffers", {})
        setattr_("_non_persistent_buffers_set", set())
        setattr_("_modules", {})
        setattr_("_forward_pre_hooks", OrderedDict())
        setattr_("_forward_pre_hooks_with_kwargs", OrderedDict())
        setattr_("_forward_hooks", OrderedDict())
        setattr_("_forward_hooks_with_kwargs", OrderedDict())
        setattr_("_forward_hooks_always_called", OrderedDict())
        setattr_("_backward_pre_hooks", OrderedDict())
        setattr_("_backward_hooks", OrderedDict())
        setattr_("_is_full_backward_hook", None)
        setattr_("_state_dict_hooks", OrderedDict())
        setattr_("_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_pre_hooks", OrderedDict())
        setattr_("_load_state_dict_post_hooks", OrderedDict())
        if self.call_super_init:
            super().__init__(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # -- registration -------------------------------------------------------------------
    def _check_new_name(self, kind: str, name, registry: dict) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            # PyTorch names the offending module name (not a buffer's or a parameter's)
            raise KeyError(f'{kind} name can\'t contain "."' + (f", got: {name}" if kind == "module" else ""))
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = tensor.data
        if _globals.buffer_registration_hooks:
            tensor = _globals.run_registration_hooks(_globals.buffer_registration_hooks, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_new_name("parameter", name, self._parameters)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             f"created explicitly. To express '{name}' as a function of another Tensor, "
                             "compute the value in the forward() method.")
        if _globals.parameter_registration_hooks:
            param = _globals.run_registration_hooks(_globals.parameter_registration_hooks, self, name, param)
        self._parameters[name] = param

    def add_module(self, name: str, module: Module | None) -> None:
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_new_name("module", name, self._modules)
        if _globals.module_registration_hooks:
            module = _globals.run_registration_hooks(_globals.module_registration_hooks, self, name, module)
        self._modules[name] = module

    register_module = add_module

    def _get_by_path(self, target: str, kind: str):
        if target == "":
            return self
        mod = self
        atoms = target.split(".")
        for item in atoms[:-1] if kind != "module" else atoms:
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod, atoms[-1]

    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        return self._get_by_path(target, "module")[0]

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Puts ``module`` at the dotted path ``target`` (its parent must exist); ``strict``: only
        replacing a submodule that is there already."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        atoms = target.split(".")
        parent = self.get_submodule(".".join(atoms[:-1]))
        name = atoms[-1]
        if hasattr(parent, name):
            if not isinstance(getattr(parent, name), Module):
                raise AttributeError(f"`{name}` is not an nn.Module")
        elif strict:
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        mod, name = self._get_by_path(target, "parameter")
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        mod, name = self._get_by_path(target, "buffer")
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(mod, name)

    # -- attribute protocol -------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            values = d.get(registry)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*dicts):
            for registry in dicts:
                if name in registry:
                    if isinstance(registry, dict):
                        del registry[name]
                    else:
                        registry.discard(name)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            if _globals.module_registration_hooks:
                value = _globals.run_registration_hooks(_globals.module_registration_hooks, self, name, value)
            modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer) or (d.get("_buffers") is not None and name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(torch.nn.Buffer, torch.Tensor or None expected)")
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            remove_from(d, self._parameters, self._modules)
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = itertools.chain(dir(type(self)), self.__dict__, self._parameters, self._modules, self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)

    # -- traversal ----------------------------------------------------------------------
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for key, value in get_members(module):
                if value is None or id(value) in memo:
                    continue
                if remove_duplicate:
                    memo.add(id(value))
                yield (module_prefix + ("." if module_prefix else "") + key), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_children(self) -> Iterator[tuple[str, Module]]:
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self, remove_duplicate: bool = True) -> Iterator[Module]:
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    # -- state dict ---------------------------------------------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        extra_state = getattr(type(self), "get_extra_state", None)
        if extra_state is not None and extra_state is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if args:  # the deprecated positional form (destination, prefix, keep_vars)
            names = ("destination", "prefix", "keep_vars")
            values = dict(zip(names, args))
            destination = values.get("destination", destination)
            prefix = values.get("prefix", prefix)
            keep_vars = values.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = {"version": self._version}
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            result = hook(self, destination, prefix, {"version": self._version})
            if result is not None:
                destination = result
        return destination

    def get_extra_state(self) -> Any:
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(input_param)}")
                continue
            if not is_lazy(param) and input_param.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                                  f"from checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                with ember.no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            new = input_param if isinstance(input_param, Parameter) \
                                else Parameter(input_param, requires_grad=param.requires_grad)
                            setattr(self, name, new)
                        else:
                            setattr(self, name, input_param)
                    elif is_lazy(param):
                        param.materialize(input_param.shape)
                        param.copy_(input_param)
                    else:
                        param.copy_(input_param)
            except Exception as exc:  # noqa: BLE001 - reported like PyTorch, with the key
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.shape} and whose dimensions in the checkpoint are "
                                  f"{input_param.shape}, an exception occurred : {exc.args}.")
        extra_key = prefix + "_extra_state"
        if getattr(type(self), "set_extra_state", Module.set_extra_state) is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if input_name[0] not in self._modules and input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list[str] = []
        unexpected_keys: list[str] = []
        error_msgs: list[str] = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise RuntimeError("Hooks registered with ``register_load_state_dict_post_hook`` are not"
                                       "expected to return new values, if incompatible_keys need to be modified,"
                                       "it should be done inplace.")

        try:
            load(self, state_dict)
        finally:
            load = None  # the recursive closure refers to itself: a cycle holding the state dict
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # -- state-dict hooks ---------------------------------------------------------------
    def register_state_dict_pre_hook(self, hook) -> RemovableHandle:
        return _add_hook(self._state_dict_pre_hooks, hook, False)

    def register_state_dict_post_hook(self, hook) -> RemovableHandle:
        return _add_hook(self._state_dict_hooks, hook, False)

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook) -> RemovableHandle:
        # The public form passes the module first, as PyTorch's does.
        return _add_hook(self._load_state_dict_pre_hooks, _WithModule(hook, self), False)

    def _register_load_state_dict_pre_hook(self, hook, with_module: bool = False) -> RemovableHandle:
        return _add_hook(self._load_state_dict_pre_hooks, _WithModule(hook, self) if with_module else hook, False)

    def register_load_state_dict_post_hook(self, hook) -> RemovableHandle:
        return _add_hook(self._load_state_dict_post_hooks, hook, False)

    # -- conversion ---------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            with ember.no_grad():
                new_data = fn(param)
            if new_data is param or (new_data._storage is param._storage and new_data.dtype == param.dtype
                                     and new_data.shape == param.shape):
                new_param = param
            else:
                param.data = new_data
                new_param = param
            if param.grad is not None:
                with ember.no_grad():
                    grad = fn(param.grad)
                new_param.grad = grad.requires_grad_(param.grad.requires_grad)
            self._parameters[key] = new_param
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> Module:
        memory_format = kwargs.pop("memory_format", None)
        device, dtype, non_blocking = _parse_to(*args, **kwargs)
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            # A memory format applies to the 4-d and 5-d tensors (conv weights), as in PyTorch.
            fmt = {"memory_format": memory_format} if memory_format is not None and t.dim() in (4, 5) else {}
            if t.is_floating_point() or t.is_complex():
                return t.to(device=device, dtype=dtype, non_blocking=non_blocking, **fmt)
            return t.to(device=device, non_blocking=non_blocking, **fmt)

        return self._apply(convert)

    def cpu(self) -> Module:
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def xpu(self, device=None) -> Module:
        """Moves parameters and buffers to an Intel GPU (none in ember: a module holding tensors
        raises PyTorch's CPU-build AssertionError)."""
        return self._apply(lambda t: t.xpu(device))

    def mtia(self, device=None) -> Module:
        return self._apply(lambda t: t.mtia(device))

    def ipu(self, device=None) -> Module:
        return self._apply(lambda t: t.ipu(device))

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.type(dst_type))

    def _cast_floating(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:
        return self._cast_floating(ember.float32)

    def double(self) -> Module:
        return self._cast_floating(ember.float64)

    def half(self) -> Module:
        return self._cast_floating(ember.float16)

    def bfloat16(self) -> Module:
        return self._cast_floating(ember.bfloat16)

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        return self._apply(lambda t: ember.empty_like(t, device=device), recurse=recurse)

    def share_memory(self) -> Module:
        """Moves every parameter and buffer into shared memory (``Tensor.share_memory_``)."""
        return self._apply(lambda t: t.share_memory_())

    # -- modes and gradients ------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    # -- forward and hooks --------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        handle = _add_hook(self._forward_pre_hooks, hook, prepend, self._forward_pre_hooks_with_kwargs)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        handle = _add_hook(self._forward_hooks, hook, prepend,
                           [self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def _set_backward_hook_kind(self, full: bool) -> None:
        if self._is_full_backward_hook is not None and self._is_full_backward_hook != full and self._backward_hooks:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = full

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        self._set_backward_hook_kind(True)
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_backward_hook(self, hook) -> RemovableHandle:
        # PyTorch's legacy non-full hook reports the last op's gradients; ember gives the full
        # module gradients (docs/deviations.md).
        self._set_backward_hook_kind(False)
        return _add_hook(self._backward_hooks, hook, False)

    _compiled_call_impl = None  # set by compile()

    def _call_impl(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self._backward_pre_hooks or _globals.forward_pre_hooks or _globals.forward_hooks
                or _globals.backward_hooks or _globals.backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    __call__ = _call_impl

    def _uncompiled_call_impl(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self._backward_pre_hooks or _globals.forward_pre_hooks or _globals.forward_hooks
                or _globals.backward_hooks or _globals.backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def compile(self, *args, **kwargs) -> None:
        """Compiles this module's calls in place with ``ember.compile(*args, **kwargs)`` (PyTorch's
        ``Module.compile``): parameters and state_dict keys stay as they are."""
        import ember

        self._compiled_call_impl = ember.compile(self._uncompiled_call_impl, *args, **kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        # The global hooks (register_module_*, _global_hooks.py) run before the module's own.
        for hook in list(_globals.forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hook = None
        if self._backward_hooks or self._backward_pre_hooks or _globals.backward_hooks or _globals.backward_pre_hooks:
            backward_hook = BackwardHook(self, [*_globals.backward_hooks.values(), *self._backward_hooks.values()],
                                         [*_globals.backward_pre_hooks.values(), *self._backward_pre_hooks.values()])
            args = backward_hook.setup_input_hook(args)
        forward_hooks = self._forward_hooks
        with_kwargs, always_called = self._forward_hooks_with_kwargs, self._forward_hooks_always_called
        if _globals.forward_hooks:
            forward_hooks = {**_globals.forward_hooks, **forward_hooks}
            with_kwargs = {**_globals.forward_hooks_with_kwargs, **with_kwargs}
            always_called = {**_globals.forward_hooks_always_called, **always_called}
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(forward_hooks.items()):
                called.add(hook_id)
                if hook_id in with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
        except Exception:
            for hook_id, hook in list(forward_hooks.items()):
                if hook_id in always_called and hook_id not in called:
                    try:
                        if hook_id in with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:  # noqa: BLE001,S110 - the forward error is the one to report
                        pass
            raise
        if backward_hook is not None:
            result = backward_hook.setup_output_hook(result)
        return result

    # -- printing -----------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _parse_to(*args, **kwargs):
    """(device, dtype, non_blocking) from ``Module.to``'s overloads."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() received an invalid combination of arguments: {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, ember.dtype):
            dtype = arg
        elif isinstance(arg, bool):
            non_blocking = arg
        elif isinstance(arg, (str, ember.device, int)):
            device = ember.device(arg)
        else:
            raise TypeError(f"to() received an invalid combination of arguments - got ({type(arg).__name__})")
    if device is not None:
        device = ember.device(device)
    return device, dtype, non_blocking
