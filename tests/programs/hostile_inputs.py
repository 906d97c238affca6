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
case("indexed cpu device", lambda: (str(torch.ones(2, device="cpu:0").device),
                                   str(torch.zeros(1, device=torch.device("cpu", 0)).device)))
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
# more shapes, sizes and arguments
case("index int64 max", lambda: torch.zeros(10)[2 ** 63 - 1])
case("index beyond int64", lambda: torch.zeros(10)[2 ** 64])
case("view huge -1", lambda: torch.arange(10).view(-1, 2 ** 62))
case("repeat overflow", lambda: torch.ones(2).repeat(2 ** 31, 2 ** 31))
case("randperm huge", lambda: torch.randperm(2 ** 63))
case("eye negative", lambda: torch.eye(-1))
case("linspace huge", lambda: torch.linspace(0, 1, 2 ** 62))
case("full nan long", lambda: torch.full((2,), float("nan"), dtype=torch.long))
case("conv stride 0", lambda: F.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 2, 2), stride=0))
case("conv negative padding", lambda: F.conv1d(torch.ones(1, 1, 4), torch.ones(1, 1, 2), padding=-1))
case("maxpool kernel 0", lambda: F.max_pool2d(torch.ones(1, 1, 4, 4), 0))
case("avgpool pad too big", lambda: F.avg_pool2d(torch.ones(1, 1, 4, 4), 2, padding=2))
case("interpolate scale 0", lambda: F.interpolate(torch.ones(1, 1, 4), scale_factor=0.0))
case("interpolate no size", lambda: F.interpolate(torch.ones(1, 1, 4)))
case("pad too negative", lambda: F.pad(torch.ones(2, 3), (-4, 0)))
case("reflect pad too big", lambda: F.pad(torch.ones(1, 2, 3), (3, 3), mode="reflect"))
case("linear negative features", lambda: nn.Linear(-1, 2))
case("embedding zero rows", lambda: nn.Embedding(0, 3)(torch.tensor([0])))
case("topk k too big", lambda: torch.arange(3.0).topk(4))
case("kthvalue 0", lambda: torch.arange(3.0).kthvalue(0))
case("split size 0", lambda: torch.arange(4).split(0))
case("chunk 0", lambda: torch.arange(4).chunk(0))
case("unflatten bad", lambda: torch.ones(6).unflatten(0, (4, -1)))
case("movedim duplicate", lambda: torch.ones(2, 3).movedim((0, 0), (1, 0)))
case("permute wrong", lambda: torch.ones(2, 3).permute(0, 0))
case("squeeze dim range", lambda: torch.ones(2, 1).squeeze(3))
case("expand -1 new dim", lambda: torch.ones(3).expand(-1, 3))
case("expand wrong size", lambda: torch.ones(2, 3).expand(3, 3))
case("where dtype mix", lambda: torch.where(torch.tensor([True, False]), torch.tensor([1, 2]),
                                           torch.tensor([0.5, 1.5])))
case("where non-bool cond", lambda: torch.where(torch.tensor([1, 0]), torch.ones(2), torch.zeros(2)))
case("masked_fill float mask", lambda: torch.zeros(2).masked_fill(torch.tensor([1.0, 0.0]), 1.0))
case("scatter src dtype", lambda: torch.zeros(3).scatter_(0, torch.tensor([0]), torch.tensor([1], dtype=torch.long)))
case("scatter index float", lambda: torch.zeros(3).scatter_(0, torch.tensor([0.0]), 1.0))
case("cat empty list", lambda: torch.cat([]))
case("stack empty list", lambda: torch.stack([]))
case("cat dim out of range", lambda: torch.cat([torch.ones(2), torch.ones(2)], dim=1))
case("cdist mismatch", lambda: torch.cdist(torch.ones(2, 3), torch.ones(2, 4)))
case("bmm mismatch", lambda: torch.bmm(torch.ones(2, 3, 4), torch.ones(3, 4, 5)))
case("matmul 0-d", lambda: torch.matmul(torch.tensor(1.0), torch.ones(2)))
case("dot length mismatch", lambda: torch.dot(torch.ones(2), torch.ones(3)))
case("dot int float", lambda: torch.dot(torch.ones(2), torch.ones(2, dtype=torch.long)))
case("item of many", lambda: torch.ones(2).item())
case("int() of many", lambda: int(torch.ones(2)))
case("bool of many", lambda: bool(torch.ones(2)))
case("bool of empty", lambda: bool(torch.ones(0)))
case("len of 0-d", lambda: len(torch.tensor(1.0)))
case("iterate 0-d", lambda: list(torch.tensor(1.0)))
case("float of int tensor", lambda: float(torch.tensor([7])))
case("index with list of lists", lambda: t[[[0, 1], [1, 2]]])
case("index float scalar", lambda: t[1.0])
case("index none ellipsis", lambda: t[None, ..., None].shape)
case("two ellipsis", lambda: t[..., ...])
case("too many indices", lambda: t[0, 0, 0])
case("step 0 slice", lambda: t[::0])
case("negative step slice", lambda: t[::-1])
case("setitem wrong shape", lambda: t.clone().__setitem__((slice(None), 0), torch.ones(4)))
case("setitem list", lambda: t.clone().__setitem__(0, [1.0, 2.0, 3.0, 4.0]))
case("sum dtype int overflow", lambda: torch.tensor([2 ** 62, 2 ** 62]).sum())
case("cumsum int8 promotes", lambda: torch.tensor([100, 100], dtype=torch.int8).cumsum(0))
case("mul int8 wraps", lambda: torch.tensor([100], dtype=torch.int8) * 2)
case("pow int negative", lambda: torch.tensor([2]) ** -1)
case("pow int negative tensor", lambda: torch.tensor([2]).pow(torch.tensor([-1])))
case("abs int min", lambda: torch.tensor([-2 ** 63]).abs())
case("neg bool", lambda: -torch.tensor([True]))
case("bitwise float", lambda: torch.tensor([1.0]) & torch.tensor([1.0]))
case("shift negative", lambda: torch.tensor([1]) << -1)
case("sqrt negative", lambda: torch.tensor([-1.0]).sqrt())
case("log zero", lambda: torch.tensor([0.0, -1.0]).log())
case("lgamma poles", lambda: torch.tensor([0.0, -1.0]).lgamma())
case("atan2 zeros", lambda: torch.atan2(torch.tensor([0.0, -0.0]), torch.tensor([-0.0, -0.0])))
case("round half even", lambda: torch.tensor([0.5, 1.5, 2.5, -0.5]).round())
case("fmod negative", lambda: torch.fmod(torch.tensor([-3.0, 3.0]), 2))
case("remainder negative", lambda: torch.remainder(torch.tensor([-3, 3]), 2))
case("floor_divide negative", lambda: torch.tensor([-7]) // 2)
case("div trunc zero int", lambda: torch.div(torch.tensor([1]), 0, rounding_mode="trunc"))
case("div floor zero int", lambda: torch.div(torch.tensor([1]), 0, rounding_mode="floor"))
# transforms, forward AD, nn.utils, sequences, linalg, distributions, schedulers, pytree: misuse
import torch.autograd.forward_ad as fwAD  # noqa: E402
import torch.distributions as D  # noqa: E402
import torch.nn.utils.parametrize as P  # noqa: E402
import torch.nn.utils.prune as prune  # noqa: E402
import torch.utils._pytree as pytree  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence  # noqa: E402

# (PyTorch turns distribution validation off once torch.compile/export has been used in the process;
# the earlier programs use them, so it is set here)
D.Distribution.set_default_validate_args(True)
case("vmap in_dims too big", lambda: torch.func.vmap(torch.sin, in_dims=2)(torch.ones(2, 3)))
case("vmap in_dims wrong length", lambda: torch.func.vmap(torch.add, in_dims=(0,))(torch.ones(2), torch.ones(2)))
case("vmap out_dims bad", lambda: torch.func.vmap(torch.sin, out_dims=3)(torch.ones(2, 3)))
case("vmap item", lambda: torch.func.vmap(lambda v: v.item())(torch.ones(2)))
case("vmap data-dependent if", lambda: torch.func.vmap(lambda v: v if v.sum() > 0 else -v)(torch.ones(2, 2)))
case("vmap no tensor inputs", lambda: torch.func.vmap(lambda v: v)(3))
case("grad non-scalar", lambda: torch.func.grad(lambda v: v * 2)(torch.ones(3)))
case("grad int input", lambda: torch.func.grad(lambda v: v.sum())(torch.ones(3, dtype=torch.long)))
case("grad argnums out of range", lambda: torch.func.grad(lambda a: a.sum(), argnums=1)(torch.ones(2)))
case("grad has_aux not tuple", lambda: torch.func.grad(lambda a: a.sum(), has_aux=True)(torch.ones(2)))
case("jacrev non-tensor output", lambda: torch.func.jacrev(lambda a: 3.0)(torch.ones(2)))
case("jvp primals not tuple", lambda: torch.func.jvp(torch.sin, torch.ones(2), (torch.ones(2),)))
case("jvp shape mismatch", lambda: torch.func.jvp(torch.sin, (torch.ones(2),), (torch.ones(3),)))
case("functional_call missing key", lambda: torch.func.functional_call(nn.Linear(2, 2), {"weight": torch.ones(3, 2)},
                                                                       (torch.ones(1, 2),)))
case("functional_call unexpected key", lambda: torch.func.functional_call(nn.Linear(2, 2), {"nope": torch.ones(1)},
                                                                          (torch.ones(1, 2),), strict=True))
case("make_dual outside level", lambda: fwAD.make_dual(torch.ones(2), torch.ones(2)))
case("nested dual level", lambda: [fwAD.enter_dual_level(), fwAD.enter_dual_level()])
try:
    fwAD.exit_dual_level()
except RuntimeError:
    pass
case("autograd.functional.jacobian non-tensor", lambda: torch.autograd.functional.jacobian(lambda a: a, [1.0]))
case("hessian non-scalar", lambda: torch.autograd.functional.hessian(lambda a: a * 2, torch.ones(2)))
case("checkpoint no grad inputs", lambda: torch.utils.checkpoint.checkpoint(lambda a: a * 2, torch.ones(2),
                                                                            use_reentrant=False).requires_grad)
case("parametrize unknown tensor", lambda: P.register_parametrization(nn.Linear(2, 2), "nope", nn.Identity()))
case("remove_parametrizations none", lambda: P.remove_parametrizations(nn.Linear(2, 2), "weight"))
case("prune amount > 1", lambda: prune.l1_unstructured(nn.Linear(2, 2), "weight", amount=1.5))
case("prune amount too many", lambda: prune.random_unstructured(nn.Linear(2, 2), "weight", amount=10))
case("prune remove unpruned", lambda: prune.remove(nn.Linear(2, 2), "weight"))
case("weight_norm bad dim", lambda: torch.nn.utils.parametrizations.weight_norm(nn.Linear(2, 2), dim=5))
case("spectral_norm no weight", lambda: torch.nn.utils.parametrizations.spectral_norm(nn.ReLU()))
case("pack lengths unsorted", lambda: pack_padded_sequence(torch.ones(3, 2, 1), torch.tensor([1, 3])))
case("pack length zero", lambda: pack_padded_sequence(torch.ones(3, 2, 1), torch.tensor([3, 0])))
case("pack lengths cuda-like list", lambda: pack_padded_sequence(torch.ones(3, 2, 1), [3, 2]).batch_sizes)
case("pad_sequence mismatched", lambda: pad_sequence([torch.ones(2, 3), torch.ones(2, 4)]))
case("ctc targets too long", lambda: F.ctc_loss(torch.randn(2, 1, 3).log_softmax(2), torch.tensor([[1, 2, 1]]),
                                                [2], [3]))
case("ctc blank out of range", lambda: F.ctc_loss(torch.randn(4, 1, 3).log_softmax(2), torch.tensor([[1]]), [4], [1],
                                                  blank=3))
case("mha bad mask shape", lambda: nn.MultiheadAttention(4, 2)(torch.ones(3, 1, 4), torch.ones(3, 1, 4),
                                                               torch.ones(3, 1, 4), attn_mask=torch.ones(2, 2)))
case("mha bad key_padding shape", lambda: nn.MultiheadAttention(4, 2)(torch.ones(3, 1, 4), torch.ones(3, 1, 4),
                                                                      torch.ones(3, 1, 4),
                                                                      key_padding_mask=torch.ones(1, 2).bool()))
case("transformer d_model mismatch", lambda: nn.Transformer(8, 2, 1, 1, 16)(torch.ones(3, 1, 8), torch.ones(2, 1, 6)))
case("embedding_bag offsets not starting 0", lambda: F.embedding_bag(torch.tensor([0, 1]), torch.ones(3, 2),
                                                                     torch.tensor([1])))
case("embedding_bag 2d with offsets", lambda: F.embedding_bag(torch.tensor([[0, 1]]), torch.ones(3, 2),
                                                              torch.tensor([0])))
case("cholesky of nonsquare", lambda: torch.linalg.cholesky(torch.ones(2, 3)))
case("lstsq shape mismatch", lambda: torch.linalg.lstsq(torch.ones(3, 2), torch.ones(4, 1)))
case("solve int", lambda: torch.linalg.solve(torch.eye(2, dtype=torch.long), torch.ones(2, dtype=torch.long)))
case("eigh grad of degenerate", lambda: torch.autograd.grad(torch.linalg.eigh(torch.eye(2).requires_grad_())[1].sum(),
                                                            torch.eye(2))[0])
case("svd of empty", lambda: torch.linalg.svd(torch.ones(0, 3)).S)
case("det of int", lambda: torch.linalg.det(torch.eye(2, dtype=torch.long)))
case("MixtureSameFamily bad mixture", lambda: D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(torch.zeros(2), 1.0)))
case("Independent too many dims", lambda: D.Independent(D.Normal(torch.zeros(2), 1.0), 2))
case("TransformedDistribution bad transform", lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), [3]))
case("kl not implemented", lambda: D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(torch.ones(2))))
case("sample_n negative", lambda: D.Normal(0.0, 1.0).sample((-1,)))
case("Categorical empty probs", lambda: D.Categorical(torch.ones(0)))
case("onecycle no total", lambda: torch.optim.lr_scheduler.OneCycleLR(
    torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1), max_lr=1.0))
case("onecycle step past end", lambda: [s.step() for s in [torch.optim.lr_scheduler.OneCycleLR(
    torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1), max_lr=1.0, total_steps=2)] for _ in range(4)])
case("cosine warm restarts T_0 0", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1), T_0=0))
case("plateau bad mode", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(
    torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1), mode="avg"))
case("swalr bad strategy", lambda: torch.optim.swa_utils.SWALR(
    torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1), swa_lr=0.1, anneal_strategy="step"))
case("adam negative lr", lambda: torch.optim.Adam([torch.ones(1, requires_grad=True)], lr=-1))
case("adam bad beta", lambda: torch.optim.Adam([torch.ones(1, requires_grad=True)], betas=(1.0, 0.9)))
case("optimizer empty params", lambda: torch.optim.SGD([], lr=0.1))
case("optimizer duplicate params",
     lambda: len(torch.optim.SGD([lin.weight, lin.weight], lr=0.1).param_groups[0]["params"]))
case("optimizer tensor not iterable", lambda: torch.optim.SGD(lin.weight, lr=0.1))
case("pytree unflatten wrong count", lambda: pytree.tree_unflatten([1], pytree.tree_structure((1, 2))))
case("pytree map mismatch", lambda: pytree.tree_map(lambda a, b: a, [1, 2], [1]))
case("compile non-callable", lambda: torch.compile(3))
case("sparse mm dense-dense shape", lambda: torch.sparse.mm(torch.eye(2).to_sparse(), torch.ones(3, 2)))
case("sparse_coo bad values len", lambda: torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(3), (2,)))
case("autograd Function no ctx save", lambda: torch.autograd.Function.apply(torch.ones(1)))
case("register_hook no grad", lambda: torch.ones(1).register_hook(lambda g: g))
case("backward on non-float", lambda: torch.ones(2, dtype=torch.long).sum().backward())
case("grad of unused",
     lambda: torch.autograd.grad(torch.ones(1, requires_grad=True).sum(), torch.ones(1, requires_grad=True)))

# -- session 16: kinds not covered above -------------------------------------------------------
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.data import DataLoader, WeightedRandomSampler, random_split  # noqa: E402
from torch.utils.data._utils.collate import default_collate  # noqa: E402

# interpolate / unfold / fold
case("interpolate bilinear on 3d", lambda: F.interpolate(torch.ones(1, 2, 4), scale_factor=2, mode="bilinear"))
case("interpolate linear on 4d", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=3, mode="linear"))
case("interpolate bad mode", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=3, mode="cubic"))
case("interpolate size and scale", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=3, scale_factor=2.0))
case("interpolate size wrong length", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=(3, 3, 3)))
case("interpolate align_corners nearest", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=3, align_corners=True))
case("interpolate negative size", lambda: F.interpolate(torch.ones(1, 1, 2, 2), size=(-1, 2)))
case("unfold 2d input", lambda: F.unfold(torch.ones(4, 4), 2))
case("unfold kernel too big", lambda: F.unfold(torch.ones(1, 1, 3, 3), 4))
case("unfold stride 0", lambda: F.unfold(torch.ones(1, 1, 3, 3), 2, stride=0))
case("fold wrong block count", lambda: F.fold(torch.ones(1, 4, 5), (3, 3), 2))
case("fold channels not divisible", lambda: F.fold(torch.ones(1, 5, 4), (3, 3), 2))
case("tensor.unfold step 0", lambda: torch.arange(6.0).unfold(0, 2, 0))
case("tensor.unfold size too big", lambda: torch.arange(6.0).unfold(0, 7, 1))
case("pixel_shuffle not divisible", lambda: F.pixel_shuffle(torch.ones(1, 3, 2, 2), 2))
# attention
q4 = torch.ones(2, 2, 3, 4)
case("sdpa q k head dim mismatch", lambda: F.scaled_dot_product_attention(q4, torch.ones(2, 2, 3, 5), q4))
case("sdpa bad mask shape", lambda: F.scaled_dot_product_attention(q4, q4, q4, attn_mask=torch.ones(4, 4)))
case("sdpa mask and causal", lambda: F.scaled_dot_product_attention(q4, q4, q4, attn_mask=torch.ones(3, 3),
                                                                      is_causal=True))
case("sdpa int inputs", lambda: F.scaled_dot_product_attention(*(torch.ones(1, 1, 2, 2, dtype=torch.long),) * 3))
case("sdpa gqa heads not divisible", lambda: F.scaled_dot_product_attention(torch.ones(1, 3, 2, 4),
                                                                            torch.ones(1, 2, 2, 4),
                                                                            torch.ones(1, 2, 2, 4), enable_gqa=True))


def _sdpa_flash_only():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q4, q4, q4)


case("sdpa_kernel flash on cpu", _sdpa_flash_only)
case("sdpa_kernel bad backend", lambda: sdpa_kernel("math").__enter__())
case("square mask negative", lambda: nn.Transformer.generate_square_subsequent_mask(-1))
# signal / complex
case("stft without return_complex", lambda: torch.stft(torch.ones(64), 16))
case("stft n_fft too big", lambda: torch.stft(torch.ones(8), 16, center=False, return_complex=True))
case("stft window wrong length", lambda: torch.stft(torch.ones(64), 16, window=torch.ones(8), return_complex=True))
case("istft real input", lambda: torch.istft(torch.ones(9, 5), 16))
case("rfft of complex", lambda: torch.fft.rfft(torch.ones(4, dtype=torch.cfloat)))
case("fft n 0", lambda: torch.fft.fft(torch.ones(4), n=0))
case("fft dim out of range", lambda: torch.fft.fft(torch.ones(4), dim=1))
case("irfft n 0", lambda: torch.fft.irfft(torch.ones(3, dtype=torch.cfloat), n=0))
case("fft2 of 1d", lambda: torch.fft.fft2(torch.ones(4)))
case("complex lt", lambda: torch.ones(2, dtype=torch.cfloat) < torch.zeros(2, dtype=torch.cfloat))
case("complex max", lambda: torch.ones(2, dtype=torch.cfloat).max())
case("complex sort", lambda: torch.ones(2, dtype=torch.cfloat).sort())
case("complex clamp", lambda: torch.ones(2, dtype=torch.cfloat).clamp(0, 1))
case("complex to float cast", lambda: torch.tensor([1 + 2j]).to(torch.float32))
case("complex relu", lambda: F.relu(torch.ones(2, dtype=torch.cfloat)))
case("view_as_real of real", lambda: torch.view_as_real(torch.ones(2)))
case("view_as_complex bad last dim", lambda: torch.view_as_complex(torch.ones(2, 3)))
case("polar dtype mismatch", lambda: torch.polar(torch.ones(2), torch.ones(2, dtype=torch.double)))
case("complex backward non-real loss", lambda: (torch.ones(2, dtype=torch.cfloat, requires_grad=True) * 2).sum()
     .backward())
# special / masked
case("polygamma negative n", lambda: torch.special.polygamma(-1, torch.ones(2)))
case("multigammaln small x", lambda: torch.special.multigammaln(torch.tensor([0.5]), 3))
case("zeta int", lambda: torch.special.zeta(torch.tensor([2]), torch.tensor([1])))
case("gammainc float other", lambda: torch.special.gammainc(torch.ones(2), 1.0))
case("logit int", lambda: torch.special.logit(torch.tensor([0, 1])))
case("erfinv out of domain", lambda: torch.special.erfinv(torch.tensor([1.5, -1.0, 1.0])))
case("masked sum mask wrong shape", lambda: torch.masked.sum(torch.ones(2, 3), 1,
                                                             mask=torch.ones(3, 2, dtype=torch.bool)))
case("masked sum mask more dims", lambda: torch.masked.sum(torch.ones(3), 0, mask=torch.ones(1, 3, dtype=torch.bool)))
case("masked mean all masked", lambda: torch.masked.mean(torch.ones(2, 2), 1, mask=torch.zeros(2, 2, dtype=torch.bool)))
case("masked amax float mask", lambda: torch.masked.amax(torch.ones(2, 2), 1, mask=torch.ones(2, 2)))
# autocast
case("autocast bad device", lambda: torch.autocast("gpu").__enter__())
case("autocast cpu float16", lambda: str(torch.autocast("cpu", dtype=torch.float16).fast_dtype))
case("autocast cpu int dtype", lambda: torch.autocast("cpu", dtype=torch.int32).fast_dtype)
# custom ops and Functions
case("custom_op no namespace", lambda: torch.library.custom_op("nonamespace", mutates_args=())(lambda x: x))
case("custom_op no annotations", lambda: torch.library.custom_op("hostile::noann", mutates_args=())(lambda x: x))
case("custom_op missing mutates_args", lambda: torch.library.custom_op("hostile::nomut")(lambda x: x))


def _custom_returns_input():
    @torch.library.custom_op("hostile::alias", mutates_args=())
    def alias(x: torch.Tensor) -> torch.Tensor:
        return x

    return alias(torch.ones(2))


case("custom_op returns its input", _custom_returns_input)


class _WrongGradCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g


class _WrongGradShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return torch.ones(5)


case("Function backward too few grads", lambda: _WrongGradCount.apply(torch.ones(2, requires_grad=True),
                                                                       torch.ones(2, requires_grad=True)).sum()
     .backward())
case("Function backward wrong shape", lambda: _WrongGradShape.apply(torch.ones(2, requires_grad=True)).sum().backward())
case("Function vmap without rule", lambda: torch.func.vmap(_WrongGradShape.apply)(torch.ones(2, 3)))
case("Function grad without setup_context", lambda: torch.func.grad(lambda t: _WrongGradShape.apply(t).sum())(
    torch.ones(3)))
case("multi_grad_hook bad mode", lambda: torch.autograd.graph.register_multi_grad_hook(
    [torch.ones(1, requires_grad=True)], lambda g: None, mode="first"))
# data utilities
case("dataloader batch_size 0", lambda: DataLoader(range(4), batch_size=0))
case("dataloader negative workers", lambda: DataLoader(range(4), num_workers=-1))
case("dataloader shuffle with sampler", lambda: DataLoader(range(4), shuffle=True, sampler=[0, 1]))
case("dataloader prefetch without workers", lambda: DataLoader(range(4), prefetch_factor=2))
case("weighted sampler negative weight", lambda: list(WeightedRandomSampler([1.0, -1.0], 2)))
case("weighted sampler num_samples 0", lambda: WeightedRandomSampler([1.0, 2.0], 0))
case("weighted sampler 2d weights", lambda: WeightedRandomSampler([[1.0, 2.0]], 2))
case("random_split fractions bad sum", lambda: random_split(range(10), [0.5, 0.6]))
case("random_split negative length", lambda: [len(s) for s in random_split(range(3), [4, -1])])
case("collate unequal sizes", lambda: default_collate([torch.ones(2), torch.ones(3)]))
case("collate unsupported type", lambda: default_collate([object(), object()]))
case("collate dicts different keys", lambda: default_collate([{"a": 1}, {"b": 2}]))
case("collate numpy strings", lambda: default_collate([np.array(["a"]), np.array(["b"])]))
# training-loop misuse


def _nan_grad_params():
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([float("nan"), 1.0])
    return [p]


def _step_without_grads():
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.Adam([p], lr=0.1)
    opt.zero_grad(set_to_none=True)
    opt.step()
    return p


def _sched_first():
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1)
    sched.step()
    return sched.get_last_lr()


case("clip_grad_norm nonfinite", lambda: nn.utils.clip_grad_norm_(_nan_grad_params(), 1.0, error_if_nonfinite=True))
case("cross_entropy label_smoothing > 1", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([0, 1]),
                                                                   label_smoothing=1.5))
case("one_hot negative", lambda: F.one_hot(torch.tensor([-1, 0])))
case("kl_div shape mismatch", lambda: F.kl_div(torch.ones(2, 3), torch.ones(3, 2), reduction="batchmean"))
case("zero_grad set_to_none then step", lambda: _step_without_grads())
case("lr_scheduler before optimizer step", lambda: _sched_first())
case("batchnorm2d 3d input", lambda: nn.BatchNorm2d(2)(torch.ones(2, 2, 3)))
case("convtranspose output_padding too big", lambda: nn.ConvTranspose2d(1, 1, 3, stride=2, output_padding=2)(
    torch.ones(1, 1, 3, 3)))
case("convtranspose bad output_size", lambda: nn.ConvTranspose2d(1, 1, 3, stride=2)(torch.ones(1, 1, 3, 3),
                                                                                     output_size=(20, 20)))
case("layer_norm wrong shape", lambda: F.layer_norm(torch.ones(2, 3), (4,)))
case("group_norm not divisible", lambda: nn.GroupNorm(3, 4)(torch.ones(1, 4, 2)))
case("embedding max_norm int", lambda: nn.Embedding(3, 2, max_norm=1.0)(torch.tensor([0.0])))

# --- session 17: graph scatter ops, embedding bags, metric losses, schedulers, optimizers, init,
# hooks, checkpointing, RNG state, inference tensors, module registration ---
from torch.optim import lr_scheduler  # noqa: E402
from torch.utils.checkpoint import checkpoint, checkpoint_sequential  # noqa: E402

src3 = torch.ones(4, 2)
idx4 = torch.tensor([0, 1, 0, 2])
case("scatter_reduce bad reduce", lambda: torch.zeros(3, 2).scatter_reduce(0, idx4.view(-1, 1).expand(4, 2), src3,
                                                                          reduce="max"))
case("scatter_reduce int32 index", lambda: torch.zeros(3, 2).scatter_reduce(
    0, idx4.view(-1, 1).expand(4, 2).int(), src3, reduce="sum"))
case("scatter_reduce index too big", lambda: torch.zeros(3, 2).scatter_reduce(
    0, torch.tensor([[5, 0]]), src3, reduce="amax"))
case("scatter_reduce mean int", lambda: torch.zeros(3, dtype=torch.long).scatter_reduce(
    0, torch.tensor([0, 0, 1]), torch.tensor([1, 2, 4]), reduce="mean", include_self=False))
case("scatter_reduce src dtype", lambda: torch.zeros(3).scatter_reduce(0, torch.tensor([0, 1]),
                                                                      torch.tensor([1, 2]), reduce="sum"))
case("scatter_add index more dims", lambda: torch.zeros(3).scatter_add_(0, torch.zeros(2, 2, dtype=torch.long),
                                                                       torch.ones(2, 2)))
case("index_add_ source wrong size", lambda: torch.zeros(3, 2).index_add_(0, idx4, torch.ones(3, 2)))
case("index_add_ source wrong width", lambda: torch.zeros(3, 2).index_add_(0, idx4, torch.ones(4, 3)))
case("index_add_ float index", lambda: torch.zeros(3, 2).index_add_(0, idx4.float(), src3))
case("index_add_ 2d index", lambda: torch.zeros(3, 2).index_add_(0, idx4.view(2, 2), src3))
case("index_reduce_ bad reduce", lambda: torch.zeros(3, 2).index_reduce_(0, idx4, src3, "sum"))
case("index_reduce_ int ok", lambda: torch.ones(3, dtype=torch.long).index_reduce_(
    0, torch.tensor([0, 0, 2]), torch.tensor([4, 6, 3]), "mean"))
case("bincount negative", lambda: torch.bincount(torch.tensor([0, -1, 2])))
case("bincount 2d", lambda: torch.bincount(torch.tensor([[0, 1]])))
case("bincount float", lambda: torch.bincount(torch.tensor([0.0, 1.0])))
case("bincount weights length", lambda: torch.bincount(torch.tensor([0, 1]), weights=torch.ones(3)))
case("bincount empty", lambda: torch.bincount(torch.tensor([], dtype=torch.long), minlength=3))
case("bincount minlength negative", lambda: torch.bincount(torch.tensor([0, 1]), minlength=-1))
case("histc bins 0", lambda: torch.histc(torch.ones(3), bins=0))
case("histc min > max", lambda: torch.histc(torch.ones(3), bins=4, min=2, max=1))
case("searchsorted dtype mismatch", lambda: torch.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([1.5])))
case("searchsorted batch mismatch", lambda: torch.searchsorted(torch.ones(2, 3), torch.ones(3, 1)))
case("searchsorted side and right", lambda: torch.searchsorted(torch.tensor([1.0, 2.0]), torch.tensor([1.0]),
                                                              right=False, side="right"))
case("repeat_interleave length mismatch", lambda: torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2])))
case("unique dim out of range", lambda: torch.unique(torch.ones(2, 2), dim=2))
case("unique_consecutive dim", lambda: torch.unique_consecutive(torch.tensor([[1, 1], [1, 1], [2, 2]]), dim=0,
                                                                return_counts=True))
case("cumsum dim out of range", lambda: torch.ones(2, 2).cumsum(2))
case("gather index ndim", lambda: torch.ones(2, 3).gather(1, torch.tensor([0, 1])))
case("gather index bigger", lambda: torch.ones(2, 3).gather(1, torch.zeros(3, 1, dtype=torch.long)))

bag4 = nn.EmbeddingBag(5, 2, mode="max")
case("embedding_bag per_sample_weights max", lambda: bag4(torch.tensor([0, 1]), torch.tensor([0]),
                                                          per_sample_weights=torch.ones(2)))
case("embedding_bag per_sample_weights shape", lambda: nn.EmbeddingBag(5, 2, mode="sum")(
    torch.tensor([0, 1]), torch.tensor([0]), per_sample_weights=torch.ones(3)))
# (decreasing offsets: PyTorch returns what its kernel happens to compute, ember refuses them;
# docs/deviations.md, "embedding_bag offsets")
case("embedding_bag offset past end", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([0, 1]), torch.tensor([0, 3])))
case("embedding_bag bad mode", lambda: nn.EmbeddingBag(5, 2, mode="median"))
case("embedding_bag index out of range", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([0, 5]), torch.tensor([0])))
case("embedding_bag float offsets", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([0, 1]), torch.tensor([0.0])))
case("embedding_bag 1d no offsets", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([0, 1])))
case("embedding_bag include_last one offset", lambda: nn.EmbeddingBag(5, 2, include_last_offset=True)(
    torch.tensor([0, 1]), torch.tensor([0])).shape)
case("embedding_bag 3d input", lambda: nn.EmbeddingBag(5, 2)(torch.zeros(1, 2, 2, dtype=torch.long)))
case("embedding_bag padding_idx out of range", lambda: nn.EmbeddingBag(5, 2, padding_idx=5))
case("embedding sparse backward", lambda: nn.Embedding(4, 2, sparse=True)(torch.tensor([1])).sum().backward())
def _sparse_adam_dense():
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.SparseAdam([p])
    p.sum().backward()
    opt.step()


def _adam_sparse_grad():
    e = nn.Embedding(4, 2, sparse=True)
    opt = torch.optim.Adam(e.parameters())
    e(torch.tensor([1])).sum().backward()
    opt.step()


case("sparseadam dense grad", lambda: _sparse_adam_dense())
case("adam sparse grad", lambda: _adam_sparse_grad())
case("cosine_similarity shape", lambda: F.cosine_similarity(torch.ones(2, 3), torch.ones(2, 4)))
case("cosine_similarity zero vectors", lambda: F.cosine_similarity(torch.zeros(1, 3), torch.zeros(1, 3)))
case("normalize int", lambda: F.normalize(torch.tensor([[3, 4]])))
case("normalize zero vector", lambda: F.normalize(torch.zeros(1, 3)))
case("triplet margin shape", lambda: F.triplet_margin_loss(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2, 4)))
case("triplet distance 1d", lambda: F.triplet_margin_with_distance_loss(torch.ones(3), torch.ones(3), torch.ones(3)))
case("cosine_embedding bad target", lambda: F.cosine_embedding_loss(torch.ones(2, 3), torch.ones(2, 3),
                                                                    torch.ones(3)))
case("margin_ranking shape", lambda: F.margin_ranking_loss(torch.ones(3), torch.ones(2), torch.ones(3)))
case("pdist 3d", lambda: F.pdist(torch.ones(2, 2, 2)))
case("pdist negative p", lambda: F.pdist(torch.ones(3, 2), p=-1))
case("cdist negative p", lambda: torch.cdist(torch.ones(2, 3), torch.ones(2, 3), p=-1))
case("cdist 1d", lambda: torch.cdist(torch.ones(3), torch.ones(3)))
case("pairwise_distance shape", lambda: F.pairwise_distance(torch.ones(2, 3), torch.ones(3, 3)))
case("logsigmoid int", lambda: F.logsigmoid(torch.tensor([1, 2])))


def _opt1(lr=0.1, **kw):
    return torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=lr, **kw)


case("sequentiallr milestones length", lambda: lr_scheduler.SequentialLR(
    o := _opt1(), [lr_scheduler.ConstantLR(o), lr_scheduler.ExponentialLR(o, 0.9)], milestones=[1, 2]))
case("sequentiallr other optimizer", lambda: lr_scheduler.SequentialLR(
    _opt1(), [lr_scheduler.ConstantLR(_opt1()), lr_scheduler.ExponentialLR(_opt1(), 0.9)], milestones=[1]))
case("chained other optimizer", lambda: lr_scheduler.ChainedScheduler(
    [lr_scheduler.ConstantLR(_opt1()), lr_scheduler.ExponentialLR(_opt1(), 0.9)]))
case("cycliclr bad mode", lambda: lr_scheduler.CyclicLR(_opt1(momentum=0.9), 0.01, 0.1, mode="square"))
case("cycliclr no momentum", lambda: lr_scheduler.CyclicLR(torch.optim.Adagrad([nn.Parameter(torch.ones(1))]),
                                                          0.01, 0.1))
case("cycliclr base_lr list length", lambda: lr_scheduler.CyclicLR(_opt1(momentum=0.9), [0.01, 0.02], 0.1))
case("linearlr start_factor 0", lambda: lr_scheduler.LinearLR(_opt1(), start_factor=0))
case("linearlr end_factor > 1", lambda: lr_scheduler.LinearLR(_opt1(), end_factor=1.5))
case("constantlr factor > 1", lambda: lr_scheduler.ConstantLR(_opt1(), factor=2.0))
case("lambdalr wrong count", lambda: lr_scheduler.LambdaLR(_opt1(), [lambda e: 1.0, lambda e: 0.5]))
case("multiplicative not callable", lambda: lr_scheduler.MultiplicativeLR(_opt1(), lr_lambda=0.9).step())
case("plateau bad threshold_mode", lambda: lr_scheduler.ReduceLROnPlateau(_opt1(), threshold_mode="pct"))
case("plateau factor 1", lambda: lr_scheduler.ReduceLROnPlateau(_opt1(), factor=1.0))
case("plateau min_lr list length", lambda: lr_scheduler.ReduceLROnPlateau(_opt1(), min_lr=[0.1, 0.2]))
case("onecycle bad anneal", lambda: lr_scheduler.OneCycleLR(_opt1(momentum=0.9), 0.1, total_steps=10,
                                                           anneal_strategy="exp"))
case("onecycle pct_start > 1", lambda: lr_scheduler.OneCycleLR(_opt1(momentum=0.9), 0.1, total_steps=10,
                                                              pct_start=1.5))
case("polynomiallr zero total", lambda: _poly_zero())
case("warm restarts T_mult float", lambda: lr_scheduler.CosineAnnealingWarmRestarts(_opt1(), T_0=2, T_mult=1.5))
case("warm restarts negative epoch", lambda: lr_scheduler.CosineAnnealingWarmRestarts(_opt1(), T_0=2).step(-1))
case("scheduler without initial_lr", lambda: lr_scheduler.StepLR(_opt1(), 2, last_epoch=3))
case("scheduler not an optimizer", lambda: lr_scheduler.StepLR([nn.Parameter(torch.ones(1))], 2))


def _poly_zero():
    s = lr_scheduler.PolynomialLR(_opt1(), total_iters=0)
    s.step()
    return s.get_last_lr()


P1 = [nn.Parameter(torch.ones(1))]
case("rmsprop negative alpha", lambda: torch.optim.RMSprop(P1, alpha=-0.1))
case("rmsprop negative momentum", lambda: torch.optim.RMSprop(P1, momentum=-0.1))
case("adagrad negative lr_decay", lambda: torch.optim.Adagrad(P1, lr_decay=-1.0))
case("adagrad negative accumulator", lambda: torch.optim.Adagrad(P1, initial_accumulator_value=-1.0))
case("nadam negative momentum_decay", lambda: torch.optim.NAdam(P1, momentum_decay=-1.0))
case("radam bad beta", lambda: torch.optim.RAdam(P1, betas=(0.9, 1.0)))
case("rprop bad etas", lambda: torch.optim.Rprop(P1, etas=(1.2, 0.5)))
case("adamax negative eps", lambda: torch.optim.Adamax(P1, eps=-1e-8))
case("sgd nesterov no momentum", lambda: torch.optim.SGD(P1, lr=0.1, nesterov=True))
case("sgd negative momentum", lambda: torch.optim.SGD(P1, lr=0.1, momentum=-0.5))
case("sgd negative weight_decay", lambda: torch.optim.SGD(P1, lr=0.1, weight_decay=-1.0))
case("adamw foreach and fused", lambda: torch.optim.AdamW(P1, foreach=True, fused=True))
case("adam lr tensor with foreach", lambda: torch.optim.Adam(P1, lr=torch.tensor(0.01), foreach=True).step())
case("asgd negative lambd ok", lambda: torch.optim.ASGD(P1, lambd=-1.0).defaults["lambd"])
case("add_param_group overlap", lambda: torch.optim.SGD(P1, lr=0.1).add_param_group({"params": P1}))
case("optimizer param not leaf", lambda: torch.optim.SGD([torch.ones(1, requires_grad=True) * 2], lr=0.1))
case("optimizer set of params", lambda: torch.optim.SGD({nn.Parameter(torch.ones(1))}, lr=0.1))
case("optimizer load wrong groups", lambda: torch.optim.SGD(P1, lr=0.1).load_state_dict(
    torch.optim.SGD([{"params": P1}, {"params": [nn.Parameter(torch.ones(1))]}], lr=0.1).state_dict()))
case("optimizer load wrong sizes", lambda: torch.optim.SGD(P1, lr=0.1).load_state_dict(
    torch.optim.SGD([nn.Parameter(torch.ones(1)), nn.Parameter(torch.ones(1))], lr=0.1).state_dict()))
case("lbfgs two groups", lambda: torch.optim.LBFGS([{"params": P1}, {"params": [nn.Parameter(torch.ones(1))]}]))


def _add_group_no_lr():
    opt = torch.optim.SGD(P1, lr=0.1)
    opt.add_param_group({"params": [nn.Parameter(torch.ones(1))], "momentum": 0.5})
    return [(g["lr"], g["momentum"]) for g in opt.param_groups]


case("add_param_group missing lr", lambda: _add_group_no_lr())
case("xavier 1d", lambda: nn.init.xavier_uniform_(torch.empty(5)))
case("kaiming bad mode", lambda: nn.init.kaiming_uniform_(torch.empty(2, 2), mode="fan_avg"))
case("kaiming zero-element", lambda: nn.init.kaiming_normal_(torch.empty(0, 3)).shape)
case("kaiming bad nonlinearity", lambda: nn.init.kaiming_uniform_(torch.empty(2, 2), nonlinearity="swish"))
case("calculate_gain bad param", lambda: nn.init.calculate_gain("leaky_relu", "x"))
case("calculate_gain bool param", lambda: nn.init.calculate_gain("leaky_relu", True))
case("orthogonal 1d", lambda: nn.init.orthogonal_(torch.empty(4)))
case("sparse_ 3d", lambda: nn.init.sparse_(torch.empty(2, 2, 2), 0.5))
case("eye_ 3d", lambda: nn.init.eye_(torch.empty(2, 2, 2)))
case("dirac_ 2d", lambda: nn.init.dirac_(torch.empty(2, 2)))
case("dirac_ groups not divisible", lambda: nn.init.dirac_(torch.empty(3, 2, 3), groups=2))
case("trunc_normal a > b", lambda: nn.init.trunc_normal_(torch.empty(3), a=2.0, b=-2.0).shape)
case("uniform_ int tensor", lambda: nn.init.uniform_(torch.empty(3, dtype=torch.long)))
case("fan of 1d", lambda: nn.init._calculate_fan_in_and_fan_out(torch.empty(3)))

lin2 = nn.Linear(2, 2)
def _hooked(handle):
    try:
        return lin2(torch.ones(1, 2))
    finally:
        handle.remove()


def _bw_inplace():
    m = nn.ReLU(inplace=True)
    m.register_full_backward_hook(lambda mod, gi, go: None)
    x = torch.ones(2, requires_grad=True) * 1
    return m(x)


def _bw_wrong_count():
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    m(torch.ones(1, 2, requires_grad=True)).sum().backward()


case("forward pre hook bad return", lambda: _hooked(lin2.register_forward_pre_hook(lambda m, a: 5)))
case("forward pre hook kwargs bad return", lambda: _hooked(lin2.register_forward_pre_hook(
    lambda m, a, k: (a,), with_kwargs=True)))
case("forward hook kwargs on positional", lambda: _hooked(lin2.register_forward_hook(
    lambda m, a, k, o: o * 0, with_kwargs=True)))
case("full backward hook on inplace output", lambda: _bw_inplace())
case("backward hook returns wrong count", lambda: _bw_wrong_count())


def _reentrant_grad():
    lin = nn.Linear(2, 2)
    x = torch.ones(1, 2, requires_grad=True)
    return torch.autograd.grad(checkpoint(lin, x, use_reentrant=True).sum(), x)


def _non_reentrant_grad():
    lin = nn.Linear(2, 2)
    x = torch.ones(1, 2, requires_grad=True)
    return torch.autograd.grad(checkpoint(lin, x, use_reentrant=False).sum(), [x, lin.weight])[1]


def _checkpoint_inplace_input():
    x = torch.ones(3, requires_grad=True) * 1
    y = checkpoint(lambda t: t.exp(), x, use_reentrant=False)
    x.mul_(2)
    y.sum().backward()


def _checkpoint_backward_twice():
    x = torch.ones(3, requires_grad=True)
    y = checkpoint(lambda t: t.exp().sum(), x, use_reentrant=False)
    y.backward()
    y.backward()


case("checkpoint reentrant autograd.grad", _reentrant_grad)
case("checkpoint non-reentrant autograd.grad", _non_reentrant_grad)
case("checkpoint reentrant kwargs", lambda: checkpoint(lambda t, s: t * s, torch.ones(1, requires_grad=True),
                                                       use_reentrant=True, s=2))
case("checkpoint bad determinism_check", lambda: checkpoint(torch.exp, torch.ones(1, requires_grad=True),
                                                            use_reentrant=False, determinism_check="strict"))
case("checkpoint context_fn reentrant", lambda: checkpoint(torch.exp, torch.ones(1, requires_grad=True),
                                                           use_reentrant=True, context_fn=lambda: (None, None)))
case("checkpoint input modified in place", _checkpoint_inplace_input)
case("checkpoint backward twice", _checkpoint_backward_twice)
case("checkpoint_sequential segments 0", lambda: checkpoint_sequential(nn.Sequential(nn.Linear(2, 2)), 0,
                                                                       torch.ones(1, 2), use_reentrant=False))
case("checkpoint_sequential more segments", lambda: checkpoint_sequential(
    nn.Sequential(nn.Linear(2, 2), nn.ReLU()), 5, torch.ones(1, 2, requires_grad=True), use_reentrant=False).shape)


def _inference_then_backward():
    with torch.inference_mode():
        t = torch.ones(2)
    w = torch.ones(2, requires_grad=True)
    return (w * t).sum()


def _inference_inplace_outside():
    with torch.inference_mode():
        t = torch.ones(2)
    t.add_(1)


def _inference_save_for_backward():
    with torch.inference_mode():
        t = torch.ones(2)
    w = torch.ones(2, requires_grad=True)
    return (w * t.exp()).sum().item()


case("inference tensor used with grad", lambda: _inference_then_backward().item())
case("inference tensor in-place outside", _inference_inplace_outside)
def _inference_requires_grad():
    with torch.inference_mode():
        t = torch.ones(2)
    t.requires_grad_()


def _inference_version():
    with torch.inference_mode():
        t = torch.ones(2)
    return t._version


case("inference tensor requires_grad_", _inference_requires_grad)
case("inference tensor version", _inference_version)
case("set_rng_state wrong dtype", lambda: torch.set_rng_state(torch.zeros(5056)))
case("set_rng_state wrong size", lambda: torch.set_rng_state(torch.zeros(10, dtype=torch.uint8)))
case("set_rng_state not tensor", lambda: torch.set_rng_state([0] * 5056))
case("manual_seed negative", lambda: torch.manual_seed(-1).initial_seed())
case("manual_seed too big", lambda: torch.manual_seed(2 ** 70))
case("manual_seed float", lambda: torch.manual_seed(1.5).initial_seed())
case("generator bad state", lambda: torch.Generator().set_state(torch.zeros(3, dtype=torch.uint8)))
case("randn generator device", lambda: torch.randn(2, generator=torch.Generator(device="meta")))

mod = nn.Module()
case("register_buffer non-tensor", lambda: mod.register_buffer("b", [1, 2]))
case("register_buffer dotted name", lambda: mod.register_buffer("a.b", torch.ones(1)))
case("register_buffer empty name", lambda: mod.register_buffer("", torch.ones(1)))
case("register_parameter tensor", lambda: mod.register_parameter("p", torch.ones(1)))
case("add_module non-module", lambda: mod.add_module("m", lambda x: x))
case("add_module dotted", lambda: mod.add_module("a.b", nn.ReLU()))
case("parameter of int tensor", lambda: nn.Parameter(torch.ones(2, dtype=torch.long)))
case("parameter int no grad", lambda: nn.Parameter(torch.ones(2, dtype=torch.long), requires_grad=False).dtype)
case("module to int dtype", lambda: nn.Linear(2, 2).to(torch.long))
case("modulelist index out of range", lambda: nn.ModuleList([nn.ReLU()])[3])
case("sequential index out of range", lambda: nn.Sequential(nn.ReLU())[-2])
case("moduledict non-string key", lambda: nn.ModuleDict({1: nn.ReLU()}))
case("apply non-callable", lambda: nn.Linear(2, 2).apply(5))
case("get_submodule missing", lambda: nn.Sequential(nn.ReLU()).get_submodule("0.weight"))
case("get_parameter missing", lambda: nn.Linear(2, 2).get_parameter("weight2"))
def _param_over_attr():
    m = nn.Module()
    m.p = 5
    m.register_parameter("p", nn.Parameter(torch.ones(1)))


def _int_buffer_grad():
    m = nn.Module()
    m.register_buffer("steps", torch.zeros(1, dtype=torch.long))
    m.steps.requires_grad_()


case("register_parameter existing attr", _param_over_attr)
case("requires_grad_ on int buffer", _int_buffer_grad)
case("transformed dist bad base", lambda: D.TransformedDistribution(torch.ones(2), [D.ExpTransform()]))
case("tanh transform inverse of 1", lambda: D.TanhTransform().inv(torch.tensor([1.0, 0.5])))
case("affine transform event_dim too big", lambda: D.TransformedDistribution(
    D.Normal(torch.zeros(2), torch.ones(2)), D.AffineTransform(0.0, 1.0, event_dim=2)))
case("compose transform non-list", lambda: D.ComposeTransform(D.ExpTransform()))
case("transformed log_prob outside support", lambda: D.TransformedDistribution(
    D.Normal(0.0, 1.0), [D.ExpTransform()], validate_args=True).log_prob(torch.tensor(-1.0)))
case("transform domain check", lambda: D.SigmoidTransform().inv(torch.tensor(1.5)))


# foreach lists, serialization corner cases, module containers and hooks, misc tensor APIs
case("foreach empty list", lambda: torch._foreach_add([], 1))
case("foreach length mismatch", lambda: torch._foreach_mul([torch.ones(2)], [torch.ones(2), torch.ones(2)]))
case("foreach scalar list length", lambda: torch._foreach_div([torch.ones(2)], [1.0, 2.0]))
case("foreach 1-d tensor scalar", lambda: torch._foreach_mul([torch.ones(2)], torch.ones(2)))
case("foreach shape mismatch", lambda: torch._foreach_add([torch.ones(2)], [torch.ones(3)]))
case("foreach int in-place float", lambda: torch._foreach_mul_([torch.ones(2, dtype=torch.long)], 0.5))
case("foreach norm int", lambda: torch._foreach_norm([torch.tensor([1, 2])]))
case("foreach lerp_ length", lambda: torch._foreach_lerp_([torch.ones(2)], [], 0.5))
case("foreach addcdiv by zero", lambda: torch._foreach_addcdiv([torch.ones(2)], [torch.ones(2)], [torch.zeros(2)]))
case("foreach pow negative int", lambda: torch._foreach_pow([torch.tensor([2, 3])], -1))
case("save to read-only buffer", lambda: torch.save(torch.ones(1), io.BytesIO(b"x").getbuffer()))
case("add_safe_globals non-list", lambda: torch.serialization.add_safe_globals(RuntimeError))
case("save lambda", lambda: torch.save({"f": lambda x: x}, io.BytesIO()))


def _saved_buf():
    b = io.BytesIO()
    torch.save({"w": torch.ones(2)}, b)
    b.seek(0)
    return b


def _load_map(loc):
    return torch.load(_saved_buf(), map_location=loc, weights_only=True)["w"].device.type


def _load_module():
    b = io.BytesIO()
    torch.save(nn.Linear(2, 2), b)
    b.seek(0)
    return torch.load(b, weights_only=True)


case("load bad map_location", lambda: _load_map("tpu"))
case("load map_location dict", lambda: _load_map({"cpu": "cpu"}))
case("load mmap on buffer", lambda: torch.load(_saved_buf(), mmap=True, weights_only=True))
case("load weights_only module", _load_module)
case("load_state_dict missing strict", lambda: nn.Linear(2, 2).load_state_dict({"weight": torch.ones(2, 2)}))
case("load_state_dict unexpected strict", lambda: nn.Linear(2, 2).load_state_dict(
    {"weight": torch.ones(2, 2), "bias": torch.ones(2), "scale": torch.ones(1)}))
case("load_state_dict non-tensor value", lambda: nn.Linear(2, 2).load_state_dict({"weight": [[1.0, 2.0]] * 2,
                                                                                  "bias": torch.ones(2)}))
case("state_dict prefix", lambda: sorted(nn.Linear(2, 2).state_dict(prefix="m.")))


def _load_double():
    m = nn.Linear(2, 2)
    m.load_state_dict({"weight": torch.ones(2, 2, dtype=torch.double), "bias": torch.ones(2, dtype=torch.int64)})
    return m.bias


case("load_state_dict dtype cast", lambda: _load_double().tolist())
case("moduledict update non-dict", lambda: nn.ModuleDict().update([nn.ReLU()]))
case("modulelist insert non-module", lambda: nn.ModuleList().insert(0, 5))
case("modulelist extend non-iterable", lambda: nn.ModuleList().extend(nn.ReLU()))
case("sequential append non-module", lambda: nn.Sequential().append(5))
case("sequential slice", lambda: str(nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())[1:]))
case("sequential del out of range", lambda: nn.Sequential(nn.ReLU()).__delitem__(3))
case("parameterlist non-tensor", lambda: nn.ParameterList([1.0]))
case("parameterdict value int", lambda: list(nn.ParameterDict({"a": 1}).items()))
case("register_module bad name type", lambda: nn.Module().register_module(1, nn.ReLU()))
case("train non-bool", lambda: nn.Linear(1, 1).train("yes"))
case("half module double input", lambda: nn.Linear(2, 2).half()(torch.ones(1, 2)))
case("to(device, dtype) int", lambda: nn.Linear(2, 2).to("cpu", torch.int32))
case("zero_grad after no backward", lambda: nn.Linear(2, 2).zero_grad())
def _set_tensor_over_param():
    m = nn.Linear(2, 2)
    m.weight = torch.ones(2, 2)


def _del_param():
    m = nn.Linear(2, 2)
    del m.bias
    return sorted(m.state_dict())


def _remove_twice():
    h = nn.Linear(1, 1).register_forward_hook(lambda *a: None)
    h.remove()
    h.remove()
    return "ok"


case("module setattr tensor over param", _set_tensor_over_param)
case("module delete param", _del_param)
case("hook remove twice", _remove_twice)
case("clip_grad_norm no grads", lambda: nn.utils.clip_grad_norm_([nn.Parameter(torch.ones(2))], 1.0))
case("clip_grad_norm empty", lambda: nn.utils.clip_grad_norm_([], 1.0))
case("parameters_to_vector mixed", lambda: nn.utils.parameters_to_vector([torch.ones(2), torch.ones(1, 3)]).shape)
case("vector_to_parameters wrong size", lambda: nn.utils.vector_to_parameters(torch.ones(5),
                                                                              [nn.Parameter(torch.ones(2))]))
case("vector_to_parameters non-tensor", lambda: nn.utils.vector_to_parameters([1.0], [nn.Parameter(torch.ones(1))]))


def _clip_inf():
    p = nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([1.0, -4.0, 2.0])
    return nn.utils.clip_grad_norm_([p], 2.0, norm_type="inf"), p.grad


def _clip_value(v):
    p = nn.Parameter(torch.ones(3))
    p.grad = torch.tensor([1.0, -4.0, 2.0])
    nn.utils.clip_grad_value_([p], v)
    return p.grad


case("clip_grad_norm inf norm_type", _clip_inf)
case("clip_grad_value negative", lambda: _clip_value(-1.0))
case("meshgrid bad indexing", lambda: torch.meshgrid(torch.ones(2), torch.ones(3), indexing="yx"))
case("meshgrid 2d input", lambda: torch.meshgrid(torch.ones(2, 2), torch.ones(3), indexing="ij"))
case("cartesian_prod 2d", lambda: torch.cartesian_prod(torch.ones(2, 2)))
case("combinations 2d", lambda: torch.combinations(torch.ones(2, 2)))
case("combinations negative r", lambda: torch.combinations(torch.arange(3), r=-1))
case("tril_indices negative", lambda: torch.tril_indices(-1, 3))
case("bucketize 2d boundaries", lambda: torch.bucketize(torch.ones(2), torch.ones(2, 2)))
case("take_along_dim shape", lambda: torch.take_along_dim(torch.ones(2, 3), torch.zeros(3, 1, dtype=torch.long), 1))
case("take_along_dim float index", lambda: torch.take_along_dim(torch.ones(2, 3), torch.zeros(2, 1), 1))
case("kthvalue ties", lambda: torch.tensor([2.0, 1.0, 2.0, 1.0, 2.0]).kthvalue(3))
case("cummax empty", lambda: torch.ones(0).cummax(0))
case("logcumsumexp int", lambda: torch.tensor([1, 2]).logcumsumexp(0))
case("aminmax empty", lambda: torch.aminmax(torch.ones(0)))
case("mode empty dim", lambda: torch.ones(2, 0).mode(1))
case("diff n negative", lambda: torch.diff(torch.ones(3), n=-1))
case("diff prepend dims", lambda: torch.diff(torch.ones(2, 3), prepend=torch.ones(3)))
case("nanquantile int", lambda: torch.tensor([1, 2]).nanquantile(0.5))
case("affine_grid size mismatch", lambda: F.affine_grid(torch.zeros(2, 2, 3), (3, 1, 4, 4), align_corners=False))
case("affine_grid wrong theta", lambda: F.affine_grid(torch.zeros(1, 3, 3), (1, 1, 4, 4), align_corners=False))
case("grid_sample grid last dim", lambda: F.grid_sample(torch.ones(1, 1, 3, 3), torch.zeros(1, 2, 2, 3),
                                                        align_corners=False))
case("grid_sample bad mode", lambda: F.grid_sample(torch.ones(1, 1, 3, 3), torch.zeros(1, 2, 2, 2), mode="area",
                                                   align_corners=False))
case("grid_sample bicubic 3d", lambda: F.grid_sample(torch.ones(1, 1, 2, 2, 2), torch.zeros(1, 1, 1, 1, 3),
                                                     mode="bicubic", align_corners=False))
case("grid_sample batch mismatch", lambda: F.grid_sample(torch.ones(2, 1, 3, 3), torch.zeros(1, 2, 2, 2),
                                                         align_corners=False))
case("channels_last on 3d", lambda: torch.ones(2, 3, 4).contiguous(memory_format=torch.channels_last))
case("channels_last_3d on 4d", lambda: torch.ones(1, 2, 3, 4).to(memory_format=torch.channels_last_3d))
case("is_contiguous channels_last 3d", lambda: torch.ones(2, 3, 4).is_contiguous(memory_format=torch.channels_last))
case("glu odd dim", lambda: F.glu(torch.ones(2, 3)))
case("prelu wrong channels", lambda: nn.PReLU(3)(torch.ones(2, 4)))
case("hardswish int", lambda: F.hardswish(torch.tensor([1, 2])))
case("mish int", lambda: F.mish(torch.tensor([1, 2])))
case("huber negative delta", lambda: F.huber_loss(torch.ones(2), torch.zeros(2), delta=-1.0))
case("smooth_l1 negative beta", lambda: F.smooth_l1_loss(torch.ones(2), torch.zeros(2), beta=-1.0))
case("rrelu lower > upper", lambda: F.rrelu(torch.ones(2), lower=0.5, upper=0.1, training=True))
case("categorical logits and probs", lambda: D.Categorical(probs=torch.ones(2) / 2, logits=torch.zeros(2)))
case("categorical sample shape int", lambda: D.Categorical(logits=torch.zeros(3)).sample(2))
# (validate_args explicitly: importing torch._dynamo, as torch.compile above does, turns PyTorch's
# default validation off for the rest of the process)
case("normal negative scale", lambda: D.Normal(0.0, -1.0, validate_args=True))
case("tanh transform log_abs_det at 1", lambda: D.TanhTransform().log_abs_det_jacobian(torch.tensor(20.0),
                                                                                      torch.tensor(1.0)))
