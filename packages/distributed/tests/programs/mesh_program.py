"""A (2, 2) DeviceMesh named ("dp", "tp") at 4 ranks: groups, coordinates, sub-meshes."""

from prelude import LIB, dist, init, torch, write

if LIB == "torch":
    from torch.distributed.device_mesh import init_device_mesh
else:
    from ember.distributed.device_mesh import init_device_mesh

rank, world = init()
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
R = {
    "shape": list(mesh.shape), "ndim": mesh.ndim, "size": mesh.size(), "size_tp": mesh.size(1),
    "coordinate": mesh.get_coordinate(), "local_dp": mesh.get_local_rank("dp"), "local_tp": mesh.get_local_rank("tp"),
    "dp_ranks": dist.get_process_group_ranks(mesh.get_group("dp")),
    "tp_ranks": dist.get_process_group_ranks(mesh.get_group(1)),
    "mesh": mesh.mesh.tolist(), "names": list(mesh.mesh_dim_names),
}
for name in ("dp", "tp"):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mesh.get_group(name))
    R[f"sum_{name}"] = t.tolist()
sub = mesh["tp"]
R["sub_tp"] = [sub.mesh.tolist(), sub.ndim, dist.get_process_group_ranks(sub.get_group()), sub.get_local_rank()]
R["both"] = mesh["dp", "tp"].mesh.tolist()
try:
    mesh["tp", "dp"]
    R["swapped"] = "none"
except KeyError:
    R["swapped"] = "KeyError"
try:
    mesh.get_group()
    R["no_dim_error"] = "none"
except RuntimeError:
    R["no_dim_error"] = "RuntimeError"
write(rank, R)
dist.destroy_process_group()
