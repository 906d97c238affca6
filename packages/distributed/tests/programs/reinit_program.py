"""Three rounds of init / collectives / destroy in the same processes on the same port."""

from prelude import dist, init, torch, write

sums = []
for round_ in range(3):
    rank, world = init()
    x = torch.ones(2) * (round_ + 1)
    dist.all_reduce(x)
    sums.append(x.tolist())
    dist.destroy_process_group()
write(rank, {"sums": sums})
