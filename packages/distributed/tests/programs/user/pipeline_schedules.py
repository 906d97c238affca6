"""Pipeline parallelism as the pipelining tutorial writes it (torchrun-style, 2 ranks): the model
cut by hand into one stage per rank (PipelineStage), trained with ScheduleGPipe and then
Schedule1F1B over 4 microbatches with a loss function."""

import copy
import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleDict({str(i): nn.Linear(6, 6) for i in range(4)})
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        for layer in self.layers.values():
            x = torch.tanh(layer(x)) if layer is not None else x
        return self.out(x) if self.out is not None else x


def cut(model, stage_index):
    """Keep this stage's half: layers 0-1 on stage 0, layers 2-3 and the head on stage 1."""
    part = copy.deepcopy(model)
    for i in range(4):
        if (i < 2) != (stage_index == 0):
            part.layers[str(i)] = None
    if stage_index == 0:
        part.out = None
    return part


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    whole = Model()
    torch.manual_seed(1)
    x = torch.randn(8, 6)
    target = torch.randn(8, 2)
    loss_fn = nn.MSELoss()

    for name, schedule_cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        part = cut(whole, rank)
        stage = PipelineStage(part, rank, world, torch.device("cpu"))
        schedule = schedule_cls(stage, n_microbatches=4, loss_fn=loss_fn)
        opt = torch.optim.SGD(part.parameters(), lr=0.1)
        for step in range(2):
            opt.zero_grad()
            if rank == 0:
                schedule.step(x)
                print(f"[rank {rank}] {name} step {step} sent")
            else:
                losses = []
                out = schedule.step(target=target, losses=losses)
                print(f"[rank {rank}] {name} step {step} out {tuple(out.shape)} losses "
                      f"{[round(v.item(), 5) for v in losses]}")
            opt.step()
        named = sorted(part.named_parameters())
        print(f"[rank {rank}] {name} params {[n for n, _ in named][:2]} "
              f"sums {[round(p.sum().item(), 4) for _, p in named]}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
