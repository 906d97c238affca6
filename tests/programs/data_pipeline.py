# torch.utils.data idioms: a map-style Dataset of variable-length sequences with a padding
# collate_fn, WeightedRandomSampler, BatchSampler as batch_sampler, SubsetRandomSampler,
# random_split with a generator, ConcatDataset, an IterableDataset, default_collate of dicts.
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)
from torch.utils.data.dataloader import default_collate


class Sequences(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(3)
        self.items = [torch.randint(1, 9, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g)
                      for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {"tokens": self.items[i], "label": i % 3}


def collate(batch):
    tokens = [b["tokens"] for b in batch]
    lengths = torch.tensor([len(t) for t in tokens])
    padded = pad_sequence(tokens, batch_first=True, padding_value=0)
    return padded, lengths, torch.tensor([b["label"] for b in batch])


torch.manual_seed(0)
ds = Sequences(10)
loader = DataLoader(ds, batch_size=4, shuffle=True, collate_fn=collate)
for padded, lengths, labels in loader:
    packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    print(padded.tolist(), lengths.tolist(), labels.tolist(), packed.batch_sizes.tolist())

weights = torch.tensor([0.1, 0.1, 5.0, 0.1, 1.0, 0.1, 0.1, 0.1, 0.1, 2.0], dtype=torch.double)
sampler = WeightedRandomSampler(weights, num_samples=12, replacement=True)
print("weighted", list(sampler))
print("weighted no replacement", list(WeightedRandomSampler(weights, 5, replacement=False)))
bs = BatchSampler(RandomSampler(range(10)), batch_size=3, drop_last=False)
print("batch sampler", list(bs), len(bs))
print("sequential", list(BatchSampler(SequentialSampler(range(7)), 3, True)))
loader = DataLoader(ds, batch_sampler=BatchSampler(SubsetRandomSampler([0, 2, 4, 6, 8]), 2, False),
                    collate_fn=collate)
print("subset random", [lab.tolist() for _, _, lab in loader])
a, b, c = random_split(range(20), [0.5, 0.3, 0.2], generator=torch.Generator().manual_seed(42))
print("split", list(a), list(b), list(c))
x = torch.arange(12.).view(6, 2)
td = TensorDataset(x, torch.arange(6))
cat = ConcatDataset([td, Subset(td, [5, 4])])
print("concat", len(cat), [tuple(t.tolist() for t in cat[i]) for i in (0, 6, 7)], cat.cumulative_sizes)
print("default_collate", {k: v.tolist() for k, v in default_collate([{"a": 1, "b": 2.5}, {"a": 3, "b": 4.0}]).items()})
print("default_collate tuples", [t.tolist() for t in default_collate([(1, torch.ones(2)), (2, torch.zeros(2))])])


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield torch.full((2,), float(i))


print("iterable", [b.tolist() for b in DataLoader(Stream(5), batch_size=2)])
print("iterable no batch", [b.tolist() for b in DataLoader(Stream(3), batch_size=None)])
g = torch.Generator()
g.manual_seed(11)
print("loader generator", [b.tolist() for b in DataLoader(torch.arange(8), batch_size=3, shuffle=True, generator=g)])
print("drop_last", len(DataLoader(torch.arange(8), batch_size=3, drop_last=True)))
try:
    DataLoader(ds, batch_size=2, batch_sampler=bs)
except ValueError as e:
    print("ValueError", e)
try:
    DataLoader(ds, shuffle=True, sampler=SequentialSampler(ds))
except ValueError as e:
    print("ValueError", e)
