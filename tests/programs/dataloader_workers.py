# DataLoader with worker processes: worker_init_fn seeding NumPy from torch.initial_seed(),
# get_worker_info() sharding an IterableDataset, a seeded generator for shuffling, per-worker
# random augmentation through torch.rand (each worker's seed is base_seed + worker_id),
# pin_memory=False, persistent_workers, prefetch_factor, and a collate_fn returning a dict.
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class Noisy(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return {"x": torch.full((2,), float(i)) + torch.rand(2), "np": float(np.random.rand()), "i": i}


def worker_init_fn(worker_id):
    np.random.seed(torch.initial_seed() % 2 ** 32)


class Shards(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(wid, self.n, nw))


def collate(batch):
    return {"x": torch.stack([b["x"] for b in batch]), "np": torch.tensor([b["np"] for b in batch]),
            "i": [b["i"] for b in batch]}


if __name__ == "__main__":
    g = torch.Generator()
    g.manual_seed(5)
    loader = DataLoader(Noisy(), batch_size=3, shuffle=True, num_workers=2, worker_init_fn=worker_init_fn,
                        generator=g, collate_fn=collate, persistent_workers=True, prefetch_factor=2)
    for epoch in range(2):
        for b in loader:
            print(epoch, b["i"], b["x"].numpy().round(5).tolist(), np.round(b["np"].numpy(), 5).tolist())
    print(sorted(int(v) for v in DataLoader(Shards(7), batch_size=None, num_workers=2)))
    print([b.tolist() for b in DataLoader(Shards(5), batch_size=2, num_workers=0)])
