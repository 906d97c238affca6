"""DTensor placements and redistribution on a 1-D mesh (2 ranks) or a (2, 2) mesh (4 ranks)."""

from prelude import LIB, dist, init, torch, write

if LIB == "torch":
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
else:
    from ember.distributed.device_mesh import DeviceMesh, init_device_mesh
    from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

rank, world = init()
mesh = init_device_mesh("cpu", (world,) if world == 2 else (2, 2))
R = {}
full = torch.arange(35.0).reshape(7, 5)  # uneven over 2 ranks along both dims
cases = [[Shard(0)], [Shard(1)], [Replicate()]] if mesh.ndim == 1 else [
    [Shard(0), Shard(1)], [Shard(0), Shard(0)], [Replicate(), Shard(1)], [Shard(1), Replicate()],
    [Replicate(), Shard(0)]]  # <-> [Shard(0), Shard(0)]: a nested shard under a changing outer one
for i, placements in enumerate(cases):
    d = distribute_tensor(full, mesh, placements)
    R[f"local/{i}"] = d.to_local()
    R[f"shape/{i}"] = list(d.shape)
    R[f"full/{i}"] = d.full_tensor()
    for j, other in enumerate(cases):
        R[f"redistribute/{i}->{j}"] = d.redistribute(mesh, other).to_local()
partial = [Partial()] * mesh.ndim
p = DTensor.from_local(torch.ones(3, 2) * (rank + 1), mesh, partial)
R["partial/full"] = p.full_tensor()
R["partial/shard"] = p.redistribute(mesh, [Shard(0)] * mesh.ndim).to_local()
# partial reductions other than a sum: reduced by their op, and before any operator runs
for op in ("avg", "max", "min", "product"):
    terms = (torch.arange(6.0).reshape(3, 2) - 2) * (rank + 1)
    q = DTensor.from_local(terms, mesh, [Partial(op)] * mesh.ndim)
    R[f"partial_{op}/repr"] = [repr(q.placements[0]), str(q.placements[0]), q.placements[0] == Partial(op),
                               q.placements[0] == Partial()]
    R[f"partial_{op}/full"] = q.full_tensor()
    R[f"partial_{op}/shard"] = q.redistribute(mesh, [Shard(0)] * mesh.ndim).to_local()
    R[f"partial_{op}/plus_one"] = (q + 1).full_tensor()
    R[f"partial_{op}/sum"] = q.sum().full_tensor()
try:
    distribute_tensor(full, mesh, [Replicate()] * mesh.ndim).redistribute(mesh, partial)
    R["to_partial"] = "none"
except RuntimeError:
    R["to_partial"] = "RuntimeError"
# factories: the local piece of each rank, made there
if LIB == "torch":
    import torch.distributed.tensor as dtensor_module
else:
    import ember.distributed.tensor as dtensor_module
for name, make in (("ones", lambda pl: dtensor_module.ones(5, 3, device_mesh=mesh, placements=pl)),
                   ("zeros_list", lambda pl: dtensor_module.zeros([5, 3], device_mesh=mesh, placements=pl,
                                                                  requires_grad=True)),
                   ("full", lambda pl: dtensor_module.full((5, 3), 2.5, device_mesh=mesh, placements=pl,
                                                           dtype=torch.float64))):
    for i, placements in enumerate(cases):
        made = make(placements)
        R[f"factory/{name}/{i}"] = [made.to_local(), list(made.shape), [str(q) for q in made.placements],
                                    made.requires_grad]
try:
    dtensor_module.ones(4)
    R["factory/no_mesh"] = "none"
except RuntimeError as err:
    R["factory/no_mesh"] = str(err)
local = torch.full((2 + rank % 2, 3), float(rank))
R["from_local_shape"] = list(DTensor.from_local(local, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1)).shape)
R["reprs"] = [repr(Shard(0)), repr(Replicate()), Shard(1) == Shard(1), Shard(0) == Shard(1)]
named = init_device_mesh("cpu", (1, world), mesh_dim_names=("a", "b"))
R["mesh_reprs"] = [repr(mesh), str(named), repr(named["b"]), repr(named["a"])]
if mesh.ndim == 2:  # the mesh itself, checked in the same run (one PyTorch launch for both)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    R["mesh"] = {
        "shape": list(mesh.shape), "ndim": mesh.ndim, "size": mesh.size(), "size_tp": mesh.size(1),
        "coordinate": mesh.get_coordinate(), "local_dp": mesh.get_local_rank("dp"),
        "local_tp": mesh.get_local_rank("tp"), "dp_ranks": dist.get_process_group_ranks(mesh.get_group("dp")),
        "tp_ranks": dist.get_process_group_ranks(mesh.get_group(1)), "names": list(mesh.mesh_dim_names),
    }
    for name in ("dp", "tp"):
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=mesh.get_group(name))
        R["mesh"][f"sum_{name}"] = t.tolist()
    sub = mesh["tp"]
    # src_data_rank is a rank of each mesh dimension's group (ranks 2 and 3 of the sub-mesh take
    # their data from its group rank 0, global rank 2), not a global rank
    R["mesh"]["src_sub"] = distribute_tensor(torch.full((3,), float(rank)), sub, [Replicate()]).to_local()
    R["mesh"]["src_1"] = distribute_tensor(torch.full((2,), float(rank)), mesh, [Replicate(), Shard(0)],
                                           src_data_rank=1).to_local()
    R["mesh"]["sub_tp"] = [sub.mesh.tolist(), sub.ndim, dist.get_process_group_ranks(sub.get_group()),
                           sub.get_local_rank()]
    R["mesh"]["both"] = mesh["dp", "tp"].mesh.tolist()
    # flattened dims (HSDP/TorchTitan's mesh["dp_replicate", "dp_shard"]._flatten("dp")) and meshes
    # on existing groups
    flat = mesh["dp", "tp"]._flatten()
    R["mesh"]["flatten"] = [flat.mesh.tolist(), list(flat.mesh_dim_names),
                            dist.get_process_group_ranks(mesh["dp_tp"].get_group())]
    mesh3 = init_device_mesh("cpu", (2, 1, 2), mesh_dim_names=("a", "b", "c"))
    R["mesh"]["flatten_ac"] = [mesh3["a", "c"]._flatten().mesh.tolist(),
                               dist.get_process_group_ranks(mesh3["a_c"].get_group()), mesh3["a_c"].get_local_rank()]
    R["mesh"]["flatten_bc"] = dist.get_process_group_ranks(mesh3["b", "c"]._flatten("bc").get_group())
    R["mesh"]["from_group"] = DeviceMesh.from_group(mesh.get_group("tp"), "cpu").mesh.tolist()
    try:
        mesh["tp", "dp"]
        R["mesh"]["swapped"] = "none"
    except KeyError:
        R["mesh"]["swapped"] = "KeyError"
    try:
        mesh.get_group()
        R["mesh"]["no_dim_error"] = "none"
    except RuntimeError:
        R["mesh"]["no_dim_error"] = "RuntimeError"
write(rank, R)
dist.destroy_process_group()
