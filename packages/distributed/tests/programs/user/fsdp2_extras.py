"""An FSDP2 training loop with what real ones add (torchrun-style, 2 ranks): gradient clipping
over DTensor gradients, accumulation with set_requires_gradient_sync(False), reshard_after_forward
=False, an LR scheduler, eval under no_grad, and the full state dict saved by rank 0."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import FSDPModule, fully_shard


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8)) for _ in range(2))
        self.head = nn.Linear(8, 4)

    def forward(self, tokens):
        h = self.embed(tokens).mean(dim=1)
        for layer in self.layers:
            h = h + layer(h)
        return self.head(h)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Classifier()
    for layer in model.layers:
        fully_shard(layer, reshard_after_forward=False)
    fully_shard(model)
    print(f"[rank {rank}] FSDPModule {isinstance(model, FSDPModule)} {isinstance(model.layers[0], FSDPModule)} "
          f"params {len(list(model.parameters()))} numel {sum(p.numel() for p in model.parameters())}")
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    torch.manual_seed(1 + rank)
    accum = 2
    for step in range(6):
        tokens = torch.randint(0, 20, (4, 5))
        labels = torch.randint(0, 4, (4,))
        last = (step + 1) % accum == 0
        model.set_requires_gradient_sync(last)
        loss = F.cross_entropy(model(tokens), labels) / accum
        loss.backward()
        if last:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            opt.step()
            opt.zero_grad()
            sched.step()
            norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
            print(f"[rank {rank}] step {step} loss {loss.item():.5f} norm {norm.item():.4f} "
                  f"lr {sched.get_last_lr()[0]:.4f}")
        else:
            print(f"[rank {rank}] step {step} loss {loss.item():.5f}")
    model.eval()
    with torch.no_grad():
        torch.manual_seed(99)
        logits = model(torch.randint(0, 20, (3, 5)))
    print(f"[rank {rank}] eval logits {[round(v, 4) for v in logits.reshape(-1).tolist()]}")
    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fsdp2-user-{os.environ['MASTER_PORT']}.pt")
        torch.save(sd, path)
        loaded = torch.load(path, weights_only=True)
        os.remove(path)
        plain = Classifier()
        plain.load_state_dict(loaded)
        plain.eval()
        with torch.no_grad():
            again = plain(torch.manual_seed(99) and torch.randint(0, 20, (3, 5)))
        print(f"[rank {rank}] reloaded plain model agrees {torch.allclose(again, logits, atol=1e-6)} "
              f"keys {list(loaded)[:3]}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
