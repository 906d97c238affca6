"""FSDP1's wrapper API (``FullyShardedDataParallel``) as a thin layer over ``fully_shard``.

``FSDP(module, auto_wrap_policy=...)`` wraps the submodules the policy picks (bottom-up, as
PyTorch's recursive wrap: each becomes a ``FullyShardedDataParallel`` holding the original module
as ``_fsdp_wrapped_module``), then the root. Every wrapper is a ``fully_shard`` unit, so forward,
backward, the gradient reduce-scatter (mean over the ranks) and prefetching are FSDP2's. The
parameters an optimizer sees are FSDP2's sharded DTensors (per parameter, dim 0) rather than
PyTorch's flat parameters: every element-wise optimizer computes the same values.

Full state dicts (the default ``StateDictType``) gather each parameter in its own dtype and name
it without the ``_fsdp_wrapped_module.`` parts; loading one copies each rank's piece into its
shards. ``summon_full_params``, ``clip_grad_norm_`` (norm over all ranks' shards), ``no_sync``
(FSDP2's gradient sync off) and the sharding strategies (``FULL_SHARD``/``HYBRID_SHARD`` reshard
after forward, ``SHARD_GRAD_OP``/``_HYBRID_SHARD_ZERO2`` keep the gathered parameters until backward,
``NO_SHARD`` shards too: the same values as PyTorch's all-reduce) are built on it.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict, namedtuple
from dataclasses import dataclass
from enum import Enum, auto

import ember
from ember import nn

from .. import _collectives as C
from .._backend import ReduceOp
from ..tensor._dtensor import DTensor, _default_mesh
from ..tensor._layout import redistribute_local
from ..tensor._placements import Replicate
from ._fully_shard import FSDPModule, fully_shard
from ._policy import MixedPrecisionPolicy
from ._unshard import gather_full

_PREFIX = "_fsdp_wrapped_module."


class ShardingStrategy(Enum):
    FULL_SHARD = auto()
    SHARD_GRAD_OP = auto()
    NO_SHARD = auto()
    HYBRID_SHARD = auto()
    _HYBRID_SHARD_ZERO2 = auto()


class BackwardPrefetch(Enum):
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class StateDictType(Enum):
    FULL_STATE_DICT = auto()
    LOCAL_STATE_DICT = auto()
    SHARDED_STATE_DICT = auto()


@dataclass
class CPUOffload:
    """Parameters offloaded to the CPU: with ember's MPI engine they always are."""

    offload_params: bool = False


@dataclass
class MixedPrecision:
    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: tuple = (nn.modules.batchnorm._BatchNorm,)


@dataclass
class StateDictConfig:
    offload_to_cpu: bool = False


@dataclass
class FullStateDictConfig(StateDictConfig):
    rank0_only: bool = False


@dataclass
class LocalStateDictConfig(StateDictConfig):
    pass


@dataclass
class ShardedStateDictConfig(StateDictConfig):
    _use_dtensor: bool = False


@dataclass
class OptimStateDictConfig:
    offload_to_cpu: bool = True


@dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    rank0_only: bool = False


@dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    _use_dtensor: bool = False


StateDictSettings = namedtuple("StateDictSettings", ["state_dict_type", "state_dict_config", "optim_state_dict_config"])

_SUMMONED = [0]  # summon_full_params contexts open
_IN_STATE_DICT = [False]  # a root's state_dict/load_state_dict is running (inner wrappers pass through)


def _clean(key: str) -> str:
    return key.replace(_PREFIX, "")


def _unsupported(what: str):
    raise NotImplementedError(f"FullyShardedDataParallel: {what} is not supported by ember's FSDP1 layer "
                              "(it would change results); use ember.distributed.fsdp.fully_shard")


def _recursive_wrap(module, policy, ignored, make, only_children=False):
    """PyTorch's recursive auto-wrap: children first, then the module if the policy still wants
    it for the parameters its children did not take. Returns (module or wrapper, numel wrapped)."""
    if module in ignored:
        return module, 0
    numel = sum(p.numel() for p in module.parameters() if not isinstance(p, DTensor) and id(p) not in ignored)
    if not policy(module=module, recurse=True, nonwrapped_numel=numel):
        return module, 0
    wrapped = 0
    for name, child in list(module.named_children()):
        if child in ignored:
            continue
        new, n = _recursive_wrap(child, policy, ignored, make)
        if new is not child:
            setattr(module, name, new)
        wrapped += n
    if not only_children and policy(module=module, recurse=False, nonwrapped_numel=numel - wrapped):
        return make(module), numel
    return module, wrapped


class FullyShardedDataParallel(FSDPModule, nn.Module):
    """``FSDP(module, ...)``: see the module docstring. Arguments that would change results and
    that ember does not implement raise ``NotImplementedError``."""

    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None, auto_wrap_policy=None,
                 backward_prefetch=BackwardPrefetch.BACKWARD_PRE, mixed_precision=None, ignored_modules=None,
                 param_init_fn=None, device_id=None, sync_module_states=False, forward_prefetch=False,
                 limit_all_gathers=True, use_orig_params=False, ignored_states=None, device_mesh=None,
                 _is_root=True):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"FullyShardedDataParallel expects an nn.Module, got {type(module).__name__}")
        strategy = sharding_strategy if sharding_strategy is not None else ShardingStrategy.FULL_SHARD
        if not isinstance(strategy, ShardingStrategy):
            raise TypeError(f"sharding_strategy must be a ShardingStrategy, got {strategy!r}")
        if cpu_offload is not None and not isinstance(cpu_offload, CPUOffload):
            raise TypeError(f"cpu_offload must be a CPUOffload, got {type(cpu_offload).__name__}")
        if param_init_fn is not None:
            _unsupported("param_init_fn")
        if process_group is not None and process_group is not _world_group():
            _unsupported("a process_group other than the default group (pass device_mesh)")
        mp = mixed_precision
        if mp is not None:
            if not isinstance(mp, MixedPrecision):
                raise TypeError(f"mixed_precision must be a MixedPrecision, got {type(mp).__name__}")
            if mp.keep_low_precision_grads:
                _unsupported("MixedPrecision(keep_low_precision_grads=True)")
            if mp.buffer_dtype is not None and any(b.is_floating_point() and b.dtype != mp.buffer_dtype
                                                   for b in module.buffers()):
                _unsupported("MixedPrecision(buffer_dtype=...) on a module with floating-point buffers")
            classes = tuple(mp._module_classes_to_ignore)
            if mp.param_dtype is not None and classes and any(isinstance(m, classes) for m in module.modules()):
                _unsupported("MixedPrecision with modules of _module_classes_to_ignore")
        if device_id is not None:
            device = ember.device(device_id) if not isinstance(device_id, int) else ember.device("cuda", device_id)
            if device.type != "cpu":
                module = module.to(device)
        mesh = device_mesh if device_mesh is not None else _default_mesh()
        ignored_list = list(ignored_modules or ())
        ignored_params = []
        for item in ignored_states or ():
            if isinstance(item, nn.Module):
                ignored_list.append(item)
            else:
                ignored_params.append(item)
        for m in ignored_list:
            ignored_params.extend(m.parameters())
        ignored = set(ignored_list) | {id(p) for p in ignored_params}
        if _is_root and sync_module_states:
            _broadcast_states(module, mesh)
        kwargs = dict(sharding_strategy=strategy, cpu_offload=cpu_offload, backward_prefetch=backward_prefetch,
                      mixed_precision=mp, forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
                      use_orig_params=use_orig_params, device_mesh=mesh, ignored_modules=ignored_list,
                      ignored_states=ignored_params, _is_root=False)
        if auto_wrap_policy is not None and _is_root:
            if not callable(auto_wrap_policy):
                raise TypeError(f"auto_wrap_policy must be callable, got {type(auto_wrap_policy).__name__}")
            # id(parameter) -> (the parameter, kept so that its id is not reused; ids of the modules holding it)
            owners: dict = {}
            for m in module.modules():
                for p in m._parameters.values():
                    if p is not None:
                        owners.setdefault(id(p), (p, set()))[1].add(id(m))

            def make(m):
                inside = {id(x) for x in m.modules()}
                for p in m.parameters():
                    if id(p) in owners and not owners[id(p)][1] <= inside:
                        _unsupported("a parameter shared between modules that auto_wrap_policy puts in different "
                                     "FSDP units (wrap the modules sharing it together)")
                return FullyShardedDataParallel(m, **kwargs)

            _recursive_wrap(module, auto_wrap_policy, ignored, make, only_children=True)
        self._fsdp_wrapped_module = module
        self._fsdp1_strategy = strategy
        self._fsdp1_is_root = _is_root
        self._fsdp1_mixed_precision = mp
        self._fsdp1_use_orig_params = use_orig_params
        self._fsdp1_sd = (StateDictType.FULL_STATE_DICT, FullStateDictConfig(), FullOptimStateDictConfig())
        policy = MixedPrecisionPolicy()
        if mp is not None and mp.param_dtype is not None:
            cast = mp.cast_root_forward_inputs if _is_root else mp.cast_forward_inputs
            policy = MixedPrecisionPolicy(param_dtype=mp.param_dtype, reduce_dtype=mp.reduce_dtype,
                                          cast_forward_inputs=cast)
        elif mp is not None and mp.reduce_dtype is not None:
            policy = MixedPrecisionPolicy(reduce_dtype=mp.reduce_dtype)
        reshard = strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD)
        fully_shard(self, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy,
                    ignored_params=[p for p in self.parameters() if id(p) in ignored] + ignored_params)

    # -- the module -------------------------------------------------------------------------
    def _get_name(self) -> str:
        return "FullyShardedDataParallel"

    @property
    def module(self):
        return self._fsdp_wrapped_module

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_fsdp_wrapped_module":
                raise
            return getattr(self._fsdp_wrapped_module, name)

    def __getitem__(self, key):
        return self._fsdp_wrapped_module.__getitem__(key)

    # FSDPModule.forward gathers the parameters around this
    def _fsdp_orig_forward(self, *args, **kwargs):
        if _SUMMONED[0]:
            raise RuntimeError("FullyShardedDataParallel: forward inside summon_full_params is not supported")
        return self._fsdp_wrapped_module(*args, **kwargs)

    def check_is_root(self) -> bool:
        return self._fsdp1_is_root

    @property
    def sharding_strategy(self):
        return self._fsdp1_strategy

    @staticmethod
    def fsdp_modules(module, root_only: bool = False) -> list:
        mods = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        return [m for m in mods if m._fsdp1_is_root] if root_only else mods

    def named_parameters(self, *args, **kwargs):
        for name, p in super().named_parameters(*args, **kwargs):
            yield (_clean(name) if _SUMMONED[0] else name), p

    def named_buffers(self, *args, **kwargs):
        for name, b in super().named_buffers(*args, **kwargs):
            yield (_clean(name) if _SUMMONED[0] else name), b

    # -- gradients ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Backward accumulates whole gradients locally; the first backward after it reduces the sum."""
        mods = [m for m in self.modules() if isinstance(m, FSDPModule)]
        for m in mods:
            m._fsdp_state.requires_gradient_sync = False
        try:
            yield
        finally:
            for m in mods:
                m._fsdp_state.requires_gradient_sync = True

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Scales the gradients so that their norm over all ranks is at most ``max_norm``;
        returns that norm (before scaling)."""
        norm_type = float(norm_type)
        sharded, local = [], []
        for p in self.parameters():
            if p.grad is None:
                continue
            (sharded if isinstance(p.grad, DTensor) else local).append(p.grad)
        grads = [g._local for g in sharded] + local
        if not grads:
            return ember.tensor(0.0)
        dtype = grads[0].dtype
        for g in grads[1:]:
            dtype = ember.promote_types(dtype, g.dtype)
        group = self._fsdp_state.mesh.get_group(0) if self._fsdp_state.mesh.ndim == 1 else None

        def norms(ts):
            if not ts:
                return ember.tensor(0.0, dtype=ember.float32)
            vals = ember.stack([ember.linalg.vector_norm(t.detach(), norm_type, dtype=ember.float32) for t in ts])
            return vals.max() if norm_type == float("inf") else vals.pow(norm_type).sum()

        part = norms([g._local for g in sharded])
        if norm_type == float("inf"):
            C.all_reduce(part, op=ReduceOp.MAX, group=group)
            total = ember.maximum(part, norms(local))
        else:
            C.all_reduce(part, op=ReduceOp.SUM, group=group)
            total = (part + norms(local)).pow(1.0 / norm_type)
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        with ember.no_grad():
            for g in grads:
                g.mul_(coef.to(g.dtype))
        return total.to(dtype)

    def register_comm_hook(self, state, hook):
        _unsupported("register_comm_hook")

    # -- whole parameters --------------------------------------------------------------------
    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse: bool = True, writeback: bool = True, rank0_only: bool = False,
                           offload_to_cpu: bool = False, with_grads: bool = False):
        """The whole parameters (in their own dtype) in place of the shards inside the context;
        with ``writeback`` changes made to them go back to this rank's shards on exit."""
        if with_grads:
            _unsupported("summon_full_params(with_grads=True)")
        if rank0_only and writeback:
            raise ValueError("writeback=True and rank0_only=True is not supported, as model parameter shapes"
                             " will be different across ranks, and writing to them can lead to"
                             " inconsistencies across ranks when the context is exited.")
        units = [m for m in (module.modules() if recurse else [module]) if isinstance(m, FSDPModule)]
        placed = []  # (owner, name, sharded, whole)
        try:
            for unit in units:
                state = unit._fsdp_state
                state.adopt_replaced()
                for owner, name in state.params:
                    sharded = owner._fsdp_sharded[name]
                    whole = nn.Parameter(gather_full(sharded, None).detach().clone(),
                                         requires_grad=sharded.requires_grad)
                    owner._parameters[name] = whole
                    placed.append((owner, name, sharded, whole))
            _SUMMONED[0] += 1
            try:
                yield
            finally:
                _SUMMONED[0] -= 1
        finally:
            for owner, name, sharded, whole in placed:
                if writeback:
                    mesh = sharded.device_mesh
                    piece = redistribute_local(whole.detach(), whole.shape, mesh, [Replicate()] * mesh.ndim,
                                               sharded.placements)
                    with ember.no_grad():
                        sharded._local.copy_(piece)
                owner._parameters[name] = sharded

    # -- state dicts -------------------------------------------------------------------------
    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        if not isinstance(state_dict_type, StateDictType):
            raise TypeError(f"state_dict_type must be a StateDictType, got {state_dict_type!r}")
        if state_dict_type is StateDictType.LOCAL_STATE_DICT:
            _unsupported(f"{state_dict_type}")
        default = (FullStateDictConfig if state_dict_type is StateDictType.FULL_STATE_DICT
                   else ShardedStateDictConfig)
        config = state_dict_config if state_dict_config is not None else default()
        optim_default = (FullOptimStateDictConfig if state_dict_type is StateDictType.FULL_STATE_DICT
                         else ShardedOptimStateDictConfig)
        optim = optim_state_dict_config if optim_state_dict_config is not None else optim_default()
        mods = FullyShardedDataParallel.fsdp_modules(module)
        previous = StateDictSettings(*mods[0]._fsdp1_sd) if mods else None
        for m in mods:
            m._fsdp1_sd = (state_dict_type, config, optim)
        return previous

    @staticmethod
    def get_state_dict_type(module):
        mods = FullyShardedDataParallel.fsdp_modules(module)
        if not mods:
            raise ValueError("No FSDP modules found in the given module")
        return StateDictSettings(*mods[0]._fsdp1_sd)

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        mods = FullyShardedDataParallel.fsdp_modules(module)
        saved = [m._fsdp1_sd for m in mods]
        FullyShardedDataParallel.set_state_dict_type(module, state_dict_type, state_dict_config,
                                                     optim_state_dict_config)
        try:
            yield
        finally:
            for m, s in zip(mods, saved):
                m._fsdp1_sd = s

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        if _IN_STATE_DICT[0]:
            return super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        kind, config, _ = self._fsdp1_sd
        if kind is StateDictType.SHARDED_STATE_DICT:
            return self._sharded_state_dict(destination, prefix)
        _IN_STATE_DICT[0] = True
        try:
            with FullyShardedDataParallel.summon_full_params(self, writeback=False):
                raw = super().state_dict(*args, prefix=prefix, keep_vars=keep_vars)
        finally:
            _IN_STATE_DICT[0] = False
        out = destination if destination is not None else OrderedDict()
        # PyTorch's NO_SHARD (nothing to gather) returns the whole state on every rank even with rank0_only
        if (getattr(config, "rank0_only", False) and self._fsdp1_strategy is not ShardingStrategy.NO_SHARD
                and _mesh_rank(self) != 0):
            return out
        for key, value in raw.items():
            out[_clean(key)] = value.detach().clone()
        meta = getattr(raw, "_metadata", None)
        if meta is not None and destination is None:
            out._metadata = OrderedDict((_clean(k), v) for k, v in meta.items())
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        if _IN_STATE_DICT[0]:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        if assign:
            _unsupported("load_state_dict(assign=True)")
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        if self._fsdp1_sd[0] is StateDictType.SHARDED_STATE_DICT:
            return self._load_sharded(state_dict, strict)
        _IN_STATE_DICT[0] = True
        try:
            raw_keys = list(super().state_dict(keep_vars=True).keys())
            by_clean = {_clean(k): k for k in raw_keys}
            remapped = OrderedDict((by_clean.get(k, k), v) for k, v in state_dict.items())
            with FullyShardedDataParallel.summon_full_params(self, writeback=True):
                result = super().load_state_dict(remapped, strict=strict)
        finally:
            _IN_STATE_DICT[0] = False
        return type(result)([_clean(k) for k in result.missing_keys], [_clean(k) for k in result.unexpected_keys])

    def _raw_state(self, prefix: str = ""):
        _IN_STATE_DICT[0] = True
        try:
            return super().state_dict(prefix=prefix, keep_vars=True)
        finally:
            _IN_STATE_DICT[0] = False

    def _sharded_state_dict(self, destination, prefix):
        """SHARDED_STATE_DICT: the parameters as this rank's DTensor shards (what the distributed
        checkpoint saves and loads), buffers as they are, under the unwrapped names."""
        out = destination if destination is not None else OrderedDict()
        for key, value in self._raw_state(prefix).items():
            out[_clean(key)] = value.detach() if isinstance(value, DTensor) else value.detach().clone()
        return out

    def _load_sharded(self, state_dict, strict):
        """Each DTensor's local piece (or this rank's piece of a whole tensor) into the shards."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        targets = OrderedDict((_clean(k), v) for k, v in self._raw_state().items())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
        if strict and missing:
            errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                              f"checkpoint, the shape in current model is {tuple(target.shape)}.")
                continue
            with ember.no_grad():
                if isinstance(target, DTensor):
                    mesh = target.device_mesh
                    if isinstance(value, DTensor):
                        value = value.redistribute(mesh, target.placements)
                        piece = value._local
                    else:
                        piece = redistribute_local(value.detach(), value.shape, mesh, [Replicate()] * mesh.ndim,
                                                   target.placements)
                    target._local.copy_(piece)
                else:
                    target.copy_(value.full_tensor() if isinstance(value, DTensor) else value)
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        from ember.nn.modules.module import _IncompatibleKeys

        return _IncompatibleKeys(missing, unexpected)

    # -- optimizer state dicts ----------------------------------------------------------------
    # The optimizer's parameters are the wrappers' sharded DTensors (one per original parameter),
    # so its state is already per parameter: these only rename it by FQN and gather or lay out
    # the tensors as the state dict type asks (PyTorch un/flattens its flat parameters here).
    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None):
        """``optim``'s state keyed by parameter names: whole tensors under FULL_STATE_DICT (``{}``
        on ranks other than 0 with ``FullOptimStateDictConfig(rank0_only=True)``), this rank's
        DTensor shards under SHARDED_STATE_DICT."""
        from ..checkpoint.state_dict import _fqn

        sd_type, _, optim_config = FullyShardedDataParallel.get_state_dict_type(model)
        if sd_type is StateDictType.LOCAL_STATE_DICT:
            _unsupported("optim_state_dict under LOCAL_STATE_DICT")
        full = sd_type is StateDictType.FULL_STATE_DICT
        rank0_only = getattr(optim_config, "rank0_only", False)
        if not full and rank0_only:
            raise AssertionError(f"Expected optim_input to be None and rank0_only to be False, got "
                                 f"optim_input=None, rank0_only={rank0_only}")
        if optim_state_dict is None:
            optim_state_dict = optim.state_dict()
        params = [p for g in optim.param_groups for p in g["params"]]
        names = {id(p): _fqn(model, n) for n, p in model.named_parameters()}
        key_names = [names.get(id(p)) for p in params]
        state = {}
        for key, value in optim_state_dict["state"].items():  # every rank gathers: collectives
            name = key_names[key] if isinstance(key, int) and key < len(key_names) else key
            state[name] = {k: _state_value(v, full) for k, v in value.items()}
        if full and rank0_only and _mesh_rank(model) != 0:
            return {}
        out = {"state": state}
        if "param_groups" in optim_state_dict:
            out["param_groups"] = [{**{k: v for k, v in g.items() if k != "params"},
                                    "params": [key_names[i] if isinstance(i, int) else i for i in g["params"]]}
                                   for g in optim_state_dict["param_groups"]]
        return out

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False, load_directly=False,
                                 group=None):
        """A state dict keyed by parameter names (``optim_state_dict``'s, possibly through a
        checkpoint) as ``optim.load_state_dict`` takes it: integer keys, each tensor laid out as
        its sharded parameter. With ``rank0_only`` only rank 0's copy is read (broadcast)."""
        from ..checkpoint.state_dict import _fqn, _like_param

        sd_type, _, optim_config = FullyShardedDataParallel.get_state_dict_type(model)
        if sd_type is StateDictType.LOCAL_STATE_DICT:
            _unsupported("optim_state_dict_to_load under LOCAL_STATE_DICT")
        if sd_type is StateDictType.FULL_STATE_DICT and getattr(optim_config, "rank0_only", False):
            from .._object_collectives import broadcast_object_list

            box = [optim_state_dict if _mesh_rank(model) == 0 else None]
            broadcast_object_list(box, src=0)
            optim_state_dict = box[0]
        by_name = {_fqn(model, n): p for n, p in model.named_parameters()}
        index = {}
        groups = []
        for saved in optim_state_dict["param_groups"]:
            entry = {k: v for k, v in saved.items() if k != "params"}
            entry["params"] = []
            for name in saved["params"]:
                if name not in by_name:
                    raise RuntimeError(f"optim_state_dict_to_load: the model has no parameter '{name}'")
                index.setdefault(name, len(index))
                entry["params"].append(index[name])
            groups.append(entry)
        state = {index[name]: {k: _like_param(v, by_name[name]) for k, v in value.items()}
                 for name, value in optim_state_dict["state"].items() if name in index}
        result = {"state": state, "param_groups": groups}
        if load_directly:
            optim.load_state_dict(result)
        return result

    @staticmethod
    def full_optim_state_dict(*args, **kwargs):
        _unsupported("full_optim_state_dict")


def _state_value(value, full: bool):
    """One optimizer-state value as ``optim_state_dict`` gives it: a copy (a loaded copy must not
    share ``step`` with the optimizer it came from, whose step increments it in place), whole
    under FULL_STATE_DICT."""
    if isinstance(value, DTensor):
        return value.full_tensor() if full else value.detach().clone()
    return value.detach().clone() if isinstance(value, ember.Tensor) else value


def _world_group():
    from .._groups import GroupMember

    return GroupMember.WORLD


def _mesh_rank(module) -> int:
    from .. import get_rank

    return get_rank()


def _broadcast_states(module, mesh) -> None:
    """``sync_module_states``: rank 0's parameters and buffers on every rank."""
    src = mesh.mesh.flatten()[0].item() if hasattr(mesh, "mesh") else 0
    with ember.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if isinstance(t, DTensor):
                continue
            C.broadcast(t.detach(), src=src)
