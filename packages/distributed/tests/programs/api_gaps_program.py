"""Small API pieces PyTorch programs use, reported the same way on ember and on PyTorch (gloo):
``register_ddp_comm_hook`` by ``DDPCommHookType``, ``Work.result()`` before completion,
``split_group`` on CPU groups, and ``with mesh:`` making a DeviceMesh current."""

import time

from prelude import LIB, dist, error_of, init, torch, write

if LIB == "torch":
    from torch.distributed.algorithms.ddp_comm_hooks import DDPCommHookType, register_ddp_comm_hook
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.distributed.device_mesh import _mesh_resources, init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor import ones as dt_ones
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    from ember.distributed.algorithms.ddp_comm_hooks import DDPCommHookType, register_ddp_comm_hook
    from ember.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from ember.distributed.device_mesh import _mesh_resources, init_device_mesh
    from ember.distributed.tensor import Shard, distribute_tensor
    from ember.distributed.tensor import ones as dt_ones
    from ember.nn.parallel import DistributedDataParallel as DDP

nn = torch.nn
rank, world = init()
R = {}

torch.manual_seed(7)
X = torch.randn(8, 4)
Y = torch.randn(8, 2)
per = 8 // world


def trained(hook_type):
    torch.manual_seed(3)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))
    if hook_type is not None:
        register_ddp_comm_hook(hook_type, model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(model(X[rank * per:(rank + 1) * per]), Y[rank * per:(rank + 1) * per]).backward()
        opt.step()
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


R["hook/none"] = trained(None)
for name in ("ALLREDUCE", "FP16_COMPRESS", "NOOP", "POWER_SGD", "POWER_SGD_RANK2"):
    R[f"hook/{name}"] = trained(DDPCommHookType[name])


def trained_powersgd(steps=6, start=2, **kwargs):
    torch.manual_seed(5)
    model = DDP(nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 12), nn.Tanh(), nn.Linear(12, 2)))
    state = powersgd.PowerSGDState(None, start_powerSGD_iter=start, **kwargs)
    model.register_comm_hook(state, powersgd.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(11)
    xs, ys = torch.randn(8, 6), torch.randn(8, 2)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(xs[rank * per:(rank + 1) * per]), ys[rank * per:(rank + 1) * per]).backward()
        opt.step()
    return [p.detach().reshape(-1).tolist() for p in model.parameters()], [state.iter, *state.compression_stats()]


R["hook/powersgd_rank1"], R["powersgd/stats1"] = trained_powersgd()
R["hook/powersgd_rank2_cold"], R["powersgd/stats2"] = trained_powersgd(
    matrix_approximation_rank=2, warm_start=False, use_error_feedback=False, random_seed=3)
R["hook/powersgd_rank3"], R["powersgd/stats3"] = trained_powersgd(matrix_approximation_rank=3)
R["hook/powersgd_not_started"], _ = trained_powersgd(start=100)
R["powersgd/bad_start"] = error_of(lambda: powersgd.PowerSGDState(None, start_powerSGD_iter=1))
R["hook/members"] = [m.name for m in DDPCommHookType]
twice = DDP(nn.Linear(2, 2))
register_ddp_comm_hook(DDPCommHookType.ALLREDUCE, twice)
R["hook/twice"] = error_of(lambda: register_ddp_comm_hook(DDPCommHookType.FP16_COMPRESS, twice))

# Work.result(): rank 1 joins late, so rank 0's all_reduce cannot have completed yet
t = torch.ones(3) * (rank + 1)
if rank == 1:
    time.sleep(1.0)
work = dist.all_reduce(t, async_op=True)
R["result/early"] = error_of(work.result) if rank == 0 else "skipped"
work.wait()
R["result/after_wait"] = [x.tolist() for x in work.result()]

R["split/empty"] = error_of(lambda: dist.split_group(split_ranks=[]))
R["split/cpu"] = error_of(lambda: dist.split_group(split_ranks=[[0], [1]]))

mesh = init_device_mesh("cpu", (world,))
R["mesh/none_active"] = error_of(_mesh_resources.get_current_mesh)
with mesh as entered:
    R["mesh/enter_returns_self"] = entered is mesh
    R["mesh/current"] = _mesh_resources.get_current_mesh() is mesh
    R["mesh/ones"] = dt_ones(4, 2, placements=[Shard(0)]).to_local().shape[0]
    R["mesh/distribute"] = distribute_tensor(torch.arange(6.0), placements=[Shard(0)]).to_local().tolist()
    inner = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    with inner:
        R["mesh/nested"] = _mesh_resources.get_current_mesh() is inner
    R["mesh/after_nested"] = _mesh_resources.get_current_mesh() is mesh
R["mesh/after_exit"] = error_of(_mesh_resources.get_current_mesh)

write(rank, R)
dist.destroy_process_group()
