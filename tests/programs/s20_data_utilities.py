# torch.utils.data as training scripts use it, beyond the basics: random_split with fractions and a seeded
# Generator, Subset of a Subset, ConcatDataset indexing and cumulative_sizes, ChainDataset, StackDataset,
# WeightedRandomSampler (replacement and not) and SubsetRandomSampler with generators, BatchSampler with
# drop_last, a sampler= / batch_sampler= DataLoader, an IterableDataset sharded with get_worker_info inside
# worker processes with worker_init_fn, a custom collate_fn, default_collate of dicts / namedtuples / numpy
# arrays / strings / nested lists, default_convert, and DataLoader's len for both dataset kinds.
import collections

import numpy as np
import torch
from torch.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)
from torch.utils.data._utils.collate import default_convert
from torch.utils.data.dataloader import default_collate

Point = collections.namedtuple("Point", ["x", "y"])


class Squares(Dataset):
    def __init__(self, n, offset=0):
        self.n, self.offset = n, offset

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        v = i + self.offset
        return {"x": torch.tensor([v, v * v], dtype=torch.float32), "y": v % 3, "name": f"s{v}"}


ds = Squares(20)
g = torch.Generator().manual_seed(42)
train, val, test = random_split(ds, [0.6, 0.25, 0.15], generator=g)
print("split sizes", len(train), len(val), len(test), type(train).__name__, sorted(train.indices + val.indices +
                                                                                    test.indices) == list(range(20)))
a, b = random_split(range(10), [7, 3], generator=torch.Generator().manual_seed(0))
print("split range", len(a), len(b), sorted(list(a) + list(b)))
sub = Subset(Subset(ds, [5, 6, 7, 8, 9]), [4, 0])
print("subset of subset", [sub[i]["name"] for i in range(len(sub))])
cat = ConcatDataset([Squares(3), Squares(4, offset=10), Squares(2, offset=100)])
print("concat", len(cat), cat.cumulative_sizes, cat[3]["name"], cat[-1]["name"], cat[6]["name"])
try:
    cat[9]
except IndexError:  # PyTorch's text is the internal list's "list index out of range"; ember names the index
    print("IndexError")
try:
    cat[-10]
except ValueError as e:
    print("ValueError", e)
tds = TensorDataset(torch.arange(6.0).view(3, 2), torch.tensor([0, 1, 0]))
print("tensor dataset", tds[1], len(tds))
stack = StackDataset(tds, torch.arange(3) * 10)
print("stack tuple", stack[2], len(stack))
stack_d = StackDataset(a=tds, b=torch.arange(3) * 10)
print("stack dict", stack_d[0])


class Stream(IterableDataset):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            lo, hi = self.start, self.end
        else:
            per_worker = int(np.ceil((self.end - self.start) / float(info.num_workers)))
            lo = self.start + info.id * per_worker
            hi = min(lo + per_worker, self.end)
        return iter(range(lo, hi))


chain = ChainDataset([Stream(0, 3), Stream(10, 12)])
print("chain", list(chain))
print("stream main", list(DataLoader(Stream(3, 9), batch_size=4)))
seen = []


def worker_init_fn(worker_id):
    info = get_worker_info()
    ds_ = info.dataset
    overall_start, overall_end = 3, 11
    per_worker = int(np.ceil((overall_end - overall_start) / float(info.num_workers)))
    ds_.start = overall_start + worker_id * per_worker
    ds_.end = min(ds_.start + per_worker, overall_end)


class Plain(IterableDataset):
    def __init__(self):
        self.start, self.end = 0, 0

    def __iter__(self):
        return iter(range(self.start, self.end))


print("stream workers", sorted(torch.cat(list(DataLoader(Stream(3, 11), num_workers=2, batch_size=2))).tolist()))
print("init_fn workers", sorted(x.item() for x in DataLoader(Plain(), num_workers=2, worker_init_fn=worker_init_fn)))
try:
    len(DataLoader(Stream(0, 7), batch_size=3))
except TypeError as e:
    print("TypeError", e)

weights = torch.tensor([0.1, 0.1, 5.0, 0.1, 3.0, 0.0])
wrs = WeightedRandomSampler(weights, num_samples=12, replacement=True, generator=torch.Generator().manual_seed(3))
drawn = list(wrs)
print("weighted", len(drawn), 5 not in drawn, len(wrs), all(isinstance(i, int) for i in drawn))
wrs2 = WeightedRandomSampler([1, 2, 3, 4], num_samples=4, replacement=False,
                             generator=torch.Generator().manual_seed(3))
print("weighted no replacement", sorted(wrs2))
srs = SubsetRandomSampler([2, 4, 6, 8], generator=torch.Generator().manual_seed(5))
print("subset random", sorted(srs), len(srs))
print("batch sampler", list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False)))
print("batch sampler drop", list(BatchSampler(range(10), batch_size=3, drop_last=True)),
      len(BatchSampler(range(10), batch_size=3, drop_last=True)))
rs = RandomSampler(range(5), replacement=True, num_samples=8, generator=torch.Generator().manual_seed(1))
print("random sampler", len(list(rs)), len(rs), all(0 <= i < 5 for i in rs))
loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False))
for batch in loader:
    print("batch", batch["x"].shape, batch["y"].tolist(), batch["name"])
print("len batch_sampler loader", len(loader))
loader = DataLoader(ds, batch_size=4, sampler=SubsetRandomSampler(range(6), generator=torch.Generator().manual_seed(0)),
                    drop_last=True)
print("sampler loader", len(loader), [sorted(b["y"].tolist()) is not None for b in loader])


def collate_pad(batch):
    xs = [torch.arange(n) for n, _ in batch]
    lengths = torch.tensor([len(x) for x in xs])
    padded = torch.nn.utils.rnn.pad_sequence(xs, batch_first=True, padding_value=-1)
    return padded, lengths, torch.tensor([lbl for _, lbl in batch])


pairs = [(3, 0), (1, 1), (4, 0), (2, 1)]
for padded, lengths, labels in DataLoader(pairs, batch_size=2, collate_fn=collate_pad):
    print("custom collate", padded.tolist(), lengths.tolist(), labels.tolist())

print("collate dicts", default_collate([{"a": 1, "b": torch.ones(2)}, {"a": 2, "b": torch.zeros(2)}]))
print("collate namedtuple", default_collate([Point(1, 2.0), Point(3, 4.0)]))
print("collate numpy", default_collate([np.array([1.0, 2.0]), np.array([3.0, 4.0])]))
print("collate numpy scalars", default_collate([np.float64(1.5), np.float64(2.5)]),
      default_collate([np.int32(1), np.int32(2)]))
print("collate strings", default_collate(["a", "b"]), default_collate([b"x", b"y"]))
print("collate nested", default_collate([[1, (2, 3)], [4, (5, 6)]]))
print("collate bools", default_collate([True, False]))
try:
    default_collate([[1, 2], [3]])
except RuntimeError as e:
    print("RuntimeError", e)
try:
    default_collate([object(), object()])
except TypeError as e:
    print("TypeError", str(e)[:60])
print("convert", default_convert(np.array([1, 2])), default_convert({"k": np.zeros(2)}),
      default_convert(Point(np.ones(1), 3)))
print("collate tensors dtypes", default_collate([torch.tensor(1), torch.tensor(2)]).dtype,
      default_collate([1.5, 2]).dtype)
