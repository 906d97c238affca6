"""The module paths PyTorch programs import distributed names from (``torch.distributed.fsdp.api``,
``torch.distributed._tensor``, ``torch.distributed.distributed_c10d``, ...): each exists in ember, under
``import ember as torch`` too, and holds the same objects as ember's public modules, for every name
PyTorch's module of that path has."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PATHS = {  # PyTorch's module path: names checked (all present in PyTorch 2.13 there)
    "distributed.distributed_c10d": ["all_reduce", "GroupMember", "ReduceOp", "ProcessGroup", "new_group",
                                     "_get_default_group", "_rank_not_in_group"],
    "distributed.fsdp.fully_sharded_data_parallel": ["FullyShardedDataParallel", "FullStateDictConfig",
                                                     "StateDictType", "ShardingStrategy", "MixedPrecision"],
    "distributed.fsdp.api": ["ShardingStrategy", "StateDictType", "BackwardPrefetch", "CPUOffload",
                             "ShardedStateDictConfig", "ShardedOptimStateDictConfig", "FullOptimStateDictConfig"],
    "distributed.tensor.parallel.style": ["ColwiseParallel", "RowwiseParallel", "SequenceParallel",
                                          "PrepareModuleInput", "PrepareModuleOutput", "ParallelStyle"],
    "distributed.tensor.parallel.loss": ["loss_parallel"],
    "distributed._tensor": ["DTensor", "Shard", "Replicate", "distribute_tensor", "DeviceMesh", "init_device_mesh"],
    "distributed._composable.fsdp": ["fully_shard", "MixedPrecisionPolicy", "FSDPModule", "CPUOffloadPolicy"],
    "distributed.checkpoint.state_dict_saver": ["save", "async_save"],
    "distributed.checkpoint.state_dict_loader": ["load"],
    "distributed.checkpoint.default_planner": ["DefaultSavePlanner", "DefaultLoadPlanner"],
    "distributed.constants": ["default_pg_timeout"],
}
# where ember's public object of each name lives (the oracle for "the same object")
HOME = {"_get_default_group": None, "_rank_not_in_group": None, "loss_parallel": "distributed.tensor.parallel",
        "save": "distributed.checkpoint", "async_save": "distributed.checkpoint", "load": "distributed.checkpoint",
        "DefaultSavePlanner": "distributed.checkpoint", "DefaultLoadPlanner": "distributed.checkpoint"}


def _home(path: str, name: str):
    if name in HOME:
        return HOME[name]
    for candidate in ("distributed", "distributed.fsdp", "distributed.tensor", "distributed.tensor.parallel"):
        if hasattr(importlib.import_module(f"ember.{candidate}"), name):
            return candidate
    raise AssertionError(f"{name} is in no public ember.distributed module")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_pytorch_module_path_holds_embers_objects(path):
    torch_module = pytest.importorskip(f"torch.{path}")
    ours = importlib.import_module(f"ember.{path}")
    for name in PATHS[path]:
        assert hasattr(torch_module, name), f"torch.{path} has no {name}: the test's list is wrong"
        assert hasattr(ours, name), f"ember.{path} has no {name}"
        home = _home(path, name)
        if home is not None:
            assert getattr(ours, name) is getattr(importlib.import_module(f"ember.{home}"), name), (path, name)


_ALIASED = """
import sys
import ember
sys.modules["torch"] = ember
from torch.distributed._tensor import DTensor
from torch.distributed.distributed_c10d import _get_default_group
from torch.distributed.fsdp.api import ShardingStrategy
assert DTensor is ember.distributed.tensor.DTensor and ShardingStrategy is ember.distributed.fsdp.ShardingStrategy
try:
    _get_default_group()
except ValueError as err:
    print(err)
"""


def test_paths_import_under_the_torch_alias():
    # a process of its own: the alias must not leave ember modules under torch's names in this one
    done = subprocess.run([sys.executable, "-c", _ALIASED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("Default process group has not been initialized"), done.stdout
