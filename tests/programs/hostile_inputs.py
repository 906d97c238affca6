# Hostile inputs as programs meet them: wrong dtypes/shapes/devices, NaN/inf, empty and zero-size
# tensors, huge sizes, negative strides from NumPy, non-contiguous views, out-of-range indices,
# integer overflow, and bad pickles for torch.load(weights_only=True). Each case prints its result
# or the exception's type and message; ember must raise what torch raises and compute what it computes.
import io
import pickle
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("ignore")


def case(name, fn):
    try:
        out = fn()
        if isinstance(out, torch.Tensor):
            out = (tuple(out.shape), str(out.dtype), out.tolist() if out.numel() <= 12 else "...")
        print(name, "->", out)
    except Exception as e:  # noqa: BLE001
        print(name, "!!", type(e).__name__, "|", str(e).split("\n")[0][:160])


x = torch.arange(6.0).view(2, 3)
lin = nn.Linear(3, 2)
# wrong dtypes
case("linear int input", lambda: lin(torch.ones(2, 3, dtype=torch.long)))
case("linear double input", lambda: lin(torch.ones(2, 3, dtype=torch.double)))
case("cross_entropy float target", lambda: F.cross_entropy(torch.randn(2, 3), torch.tensor([0.0, 1.0])))
case("cross_entropy int32 target", lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1], dtype=torch.int32)))
case("nll_loss target out of range", lambda: F.nll_loss(torch.zeros(2, 3), torch.tensor([0, 3])))
case("embedding float index", lambda: nn.Embedding(4, 2)(torch.tensor([1.0])))
case("embedding index out of range", lambda: nn.Embedding(4, 2)(torch.tensor([4])))
case("matmul int float", lambda: torch.ones(2, 2, dtype=torch.int64) @ torch.ones(2, 2))
case("add_ int into float ok", lambda: torch.zeros(2).add_(torch.tensor([1, 2])))
case("add_ float into int", lambda: torch.zeros(2, dtype=torch.long).add_(torch.tensor([1.5, 2.0])))
case("mean of int", lambda: torch.tensor([1, 2]).mean())
case("bool sub", lambda: torch.tensor([True]) - torch.tensor([False]))
case("conv2d double weight", lambda: F.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2, dtype=torch.double)))
# wrong shapes
case("linear wrong features", lambda: lin(torch.ones(2, 4)))
case("conv2d 3d input ok", lambda: nn.Conv2d(1, 1, 2)(torch.ones(1, 3, 3)).shape)
case("conv2d 2d input", lambda: nn.Conv2d(1, 1, 2)(torch.ones(3, 3)))
case("conv2d wrong channels", lambda: nn.Conv2d(2, 1, 2)(torch.ones(1, 3, 4, 4)))
case("conv kernel larger than input", lambda: nn.Conv2d(1, 1, 5)(torch.ones(1, 1, 3, 3)))
case("maxpool output empty", lambda: F.max_pool2d(torch.ones(1, 1, 1, 1), 2))
case("batchnorm one value", lambda: nn.BatchNorm1d(3)(torch.ones(1, 3)))
case("view incompatible", lambda: x.t().view(6))
case("reshape bad", lambda: x.reshape(4, 2))
case("cat mismatched", lambda: torch.cat([torch.ones(2, 3), torch.ones(3, 2)]))
case("stack mismatched", lambda: torch.stack([torch.ones(2), torch.ones(3)]))
case("broadcast fail", lambda: torch.ones(2, 3) + torch.ones(4))
case("mse size mismatch warns", lambda: F.mse_loss(torch.ones(3, 1), torch.ones(3)))
case("lstm wrong input size", lambda: nn.LSTM(3, 4)(torch.ones(5, 2, 2)))
case("lstm wrong hidden", lambda: nn.LSTM(3, 4)(torch.ones(5, 2, 3), (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4))))
q5 = torch.ones(3, 1, 5)
case("mha wrong embed", lambda: nn.MultiheadAttention(4, 2)(q5, q5, q5))
case("embed dim not divisible", lambda: nn.MultiheadAttention(5, 2))
# devices
case("to bad device", lambda: x.to("tpu"))
case("device bad string", lambda: torch.device("cuda:x"))
case("meta item", lambda: torch.empty(2, device="meta").sum().item())
case("meta plus cpu", lambda: torch.ones(2, device="meta") + torch.ones(2))
# NaN / inf
nan = float("nan")
case("max with nan", lambda: torch.tensor([1.0, nan, 3.0]).max())
case("argmax with nan", lambda: torch.tensor([1.0, nan, 3.0]).argmax())
case("sort with nan", lambda: torch.tensor([3.0, nan, 1.0, -float("inf")]).sort())
case("clamp nan", lambda: torch.tensor([nan, 5.0]).clamp(0, 1))
case("softmax inf", lambda: torch.tensor([float("inf"), 1.0]).softmax(0))
case("log_softmax all -inf", lambda: torch.full((3,), -float("inf")).log_softmax(0))
case("nan_to_num", lambda: torch.tensor([nan, float("inf"), -float("inf")]).nan_to_num())
case("cross_entropy nan logits", lambda: F.cross_entropy(torch.tensor([[nan, 1.0]]), torch.tensor([1])))
case("topk nan", lambda: torch.tensor([1.0, nan, 2.0]).topk(2))
case("unique nan", lambda: torch.tensor([nan, 1.0, nan]).unique())
case("isclose nan", lambda: torch.isclose(torch.tensor([nan]), torch.tensor([nan]), equal_nan=True))
case("int div by zero", lambda: torch.tensor([1]) // torch.tensor([0]))
case("int remainder zero", lambda: torch.tensor([5]) % torch.tensor([0]))
case("float div zero", lambda: torch.tensor([1.0, -1.0, 0.0]) / 0)
case("randint low>=high", lambda: torch.randint(5, 5, (2,)))
case("normal negative std", lambda: torch.normal(torch.zeros(2), -torch.ones(2)))
case("bernoulli p>1", lambda: torch.bernoulli(torch.tensor([1.5])))
case("uniform_ from>to", lambda: torch.empty(2).uniform_(1, 0))
# empty / zero-size
e = torch.empty(0, 3)
case("sum empty", lambda: e.sum(0))
case("max empty", lambda: e.max())
case("max empty dim1", lambda: e.max(1))
case("max empty dim0", lambda: e.max(0))
case("mean empty", lambda: e.mean())
case("prod empty", lambda: torch.empty(0).prod())
case("argmax empty", lambda: torch.empty(0).argmax())
case("linear empty batch", lambda: lin(torch.empty(0, 3)))
case("cross_entropy empty mean", lambda: F.cross_entropy(torch.empty(0, 3), torch.empty(0, dtype=torch.long)))
case("cat with empty 1d", lambda: torch.cat([torch.ones(2, 3), torch.empty(0)]))
case("std one element", lambda: torch.tensor([1.0]).std())
case("median empty", lambda: torch.empty(0).median())
case("quantile empty", lambda: torch.quantile(torch.empty(0), 0.5))
case("quantile q out of range", lambda: torch.quantile(torch.ones(3), 1.5))
case("zero batch conv", lambda: nn.Conv2d(1, 2, 3)(torch.empty(0, 1, 5, 5)))
case("zero-size view", lambda: torch.empty(2, 0, 3).view(-1, 3))
case("view -1 on zero", lambda: torch.empty(0, 3).view(-1))
case("view -1 ambiguous zero", lambda: torch.empty(0, 3).view(0, -1))
case("multinomial zero probs", lambda: torch.multinomial(torch.zeros(3), 1))
case("dataloader empty dataset", lambda: list(torch.utils.data.DataLoader(torch.empty(0, 2), batch_size=2)))
# huge dims and overflow
case("empty huge", lambda: torch.empty(2 ** 62, 4))
case("ones negative", lambda: torch.ones(3, -1))
case("arange overflow length", lambda: torch.arange(0, 2 ** 63 - 1, 0.5))
case("view overflow", lambda: x.view(2 ** 62, 2 ** 62))
case("expand huge then view", lambda: torch.ones(1).expand(2 ** 40).shape)
case("int64 overflow add", lambda: torch.tensor([2 ** 63 - 1]) + 1)
case("tensor from too big int", lambda: torch.tensor([2 ** 64]))
case("uint8 from negative", lambda: torch.tensor([-1], dtype=torch.uint8))
case("full int overflow", lambda: torch.full((2,), 300, dtype=torch.uint8))
case("int8 cast wraps", lambda: torch.tensor([200, -200]).to(torch.int8))
case("repeat_interleave negative", lambda: torch.repeat_interleave(torch.tensor([1, 2]), torch.tensor([1, -1])))
case("zeros size float", lambda: torch.zeros(2.0))
case("zeros size tensor", lambda: torch.zeros(torch.tensor(2)).shape)
case("randn size huge product", lambda: torch.randn(2 ** 31, 2 ** 31, 2 ** 2))
# NumPy negative strides / non-contiguous
a = np.arange(6.0)[::-1]
case("from_numpy negative stride", lambda: torch.from_numpy(a))
case("as_tensor negative stride", lambda: torch.as_tensor(a))
case("tensor negative stride", lambda: torch.tensor(a))
case("as_tensor np transposed", lambda: torch.as_tensor(np.arange(6).reshape(2, 3).T).stride())
case("from_numpy object array", lambda: torch.from_numpy(np.array([1, "a"], dtype=object)))
case("from_numpy unsupported dtype", lambda: torch.from_numpy(np.array(["a"])))
case("from_numpy big-endian", lambda: torch.from_numpy(np.arange(3, dtype=">i4")))
t = torch.arange(12.0).view(3, 4)
case("numpy of transposed", lambda: t.t().numpy().tolist())
case("numpy requires grad", lambda: torch.ones(2, requires_grad=True).numpy())
case("in-place on expanded", lambda: torch.zeros(1).expand(3).add_(1))
case("in-place overlapping", lambda: t[:, :2].copy_(t[:, 1:3]).tolist())
case("view on non-contiguous", lambda: t.t().view(12))
case("strided slice assign", lambda: t.t()[::2].fill_(0).shape)
case("leaf in-place", lambda: torch.ones(2, requires_grad=True).add_(1))


def backward_twice(make):
    leaf = torch.ones(2, requires_grad=True)
    y = make(leaf)
    y.backward()
    y.backward()
    return leaf.grad


case("backward twice (x * 2)", lambda: backward_twice(lambda v: (v * 2).sum()))
case("backward twice (x / 2)", lambda: backward_twice(lambda v: (v / 2).sum()))
case("backward twice (2 * x)", lambda: backward_twice(lambda v: (2 * v).sum()))
case("backward twice (x * x)", lambda: backward_twice(lambda v: (v * v).sum()))
case("backward twice (x + 1)", lambda: backward_twice(lambda v: (v + 1).sum()))
case("backward twice (exp)", lambda: backward_twice(lambda v: v.exp().sum()))
case("backward non-scalar", lambda: (torch.ones(2, requires_grad=True) * 2).backward())
case("grad of int", lambda: torch.ones(2, dtype=torch.long, requires_grad=True))
# out-of-range indices
case("index out of range", lambda: t[3])
case("index negative out of range", lambda: t[:, -5])
case("index_select out of range", lambda: t.index_select(0, torch.tensor([3])))
case("gather out of range", lambda: t.gather(1, torch.tensor([[4]])))
case("scatter out of range", lambda: torch.zeros(3).scatter_(0, torch.tensor([5]), 1.0))
case("advanced index out of range", lambda: t[torch.tensor([0, 7])])
case("bool mask wrong shape", lambda: t[torch.tensor([True, False])])
case("index_add out of range", lambda: torch.zeros(3).index_add_(0, torch.tensor([3]), torch.ones(1)))
case("take out of range", lambda: torch.take(t, torch.tensor([12])))
case("one_hot too small", lambda: F.one_hot(torch.tensor([3]), 3))
case("narrow out of range", lambda: t.narrow(1, 3, 2))
case("select dim out of range", lambda: t.select(2, 0))
case("put_ out of range", lambda: torch.zeros(2).put_(torch.tensor([2]), torch.ones(1)))
case("tensor index float", lambda: t[torch.tensor([0.0])])
case("index_put_ broadcast fail", lambda: t.index_put_((torch.tensor([0, 1]),), torch.ones(3)))
# bad pickles for torch.load(weights_only=True)


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def saved(obj, pickle_only=False):
    buf = io.BytesIO()
    if pickle_only:
        pickle.dump(obj, buf)
    else:
        torch.save(obj, buf)
    buf.seek(0)
    return buf


case("load evil weights_only", lambda: torch.load(saved({"a": Evil()}), weights_only=True))
case("load truncated", lambda: torch.load(io.BytesIO(saved({"w": torch.ones(3)}).getvalue()[:40]), weights_only=True))
case("load garbage", lambda: torch.load(io.BytesIO(b"not a checkpoint at all"), weights_only=True))
case("load empty", lambda: torch.load(io.BytesIO(b""), weights_only=True))
case("load plain pickle of list", lambda: torch.load(saved([1, 2.5, "x"], pickle_only=True), weights_only=True))
case("load plain pickle evil", lambda: torch.load(saved(Evil(), pickle_only=True), weights_only=True))
case("load custom class", lambda: torch.load(saved({"n": nn.Linear(2, 2)}), weights_only=True))
case("load ok", lambda: torch.load(saved({"w": torch.ones(2), "step": 3, "t": (1, "a")}), weights_only=True))
case("load missing file", lambda: torch.load("/nonexistent/ckpt.pt", weights_only=True))
case("load_state_dict non-dict", lambda: lin.load_state_dict([1, 2]))
case("load_state_dict wrong shape", lambda: lin.load_state_dict({"weight": torch.ones(3, 3), "bias": torch.ones(2)}))
