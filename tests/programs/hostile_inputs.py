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
