# More hostile and edge inputs on the APIs ordinary programs call, beyond s19_hostile.py: interpolate
# modes/antialias/dtypes, gradient clipping (non-finite norms, inf norm, get_total_norm), OneCycleLR,
# LSTM with proj_size over packed input, encoder layers with causal masks, MultiheadAttention masks,
# the loss zoo's edge cases (ignore_index everywhere, out-of-range targets, probabilities outside
# [0, 1]), one_hot/normalize/pdist, pooling variants; Module API misuse (names, state_dict
# surgery, containers), tensor creation/indexing/reduction errors; and torch.distributions (log_prob,
# cdf/icdf, entropy, KL pairs, transforms, constraints, validation); autograd misuse (backward twice,
# in-place writes into saved tensors, hooks, inference tensors, custom Functions); optimizers resumed from
# their state_dict, bad options and the scheduler zoo. Each case prints its result or the
# exception's type and message.
import io
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import distributions as D

warnings.simplefilter("ignore")


def case(name, fn):
    try:
        out = fn()
        if isinstance(out, torch.Tensor):
            small = out.numel() <= 12
            out = (
                tuple(out.shape),
                str(out.dtype),
                [round(v, 5) for v in out.flatten().tolist()]
                if small and out.is_floating_point()
                else out.tolist()
                if small
                else "...",
            )
        print(name, "->", out)
    except Exception as e:  # noqa: BLE001
        print(name, "!!", type(e).__name__, "|", str(e).split("\n")[0][:160])


def sgd(lr=0.1, **kw):
    return torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=lr, **kw)


def onecycle_lrs(steps, **kw):
    sched = torch.optim.lr_scheduler.OneCycleLR(sgd(momentum=0.9), max_lr=1.0, **kw)
    return [round((sched.step(), sched.get_last_lr()[0])[1], 6) for _ in range(steps)]


# --- interpolate, clipping, schedulers, recurrent/attention layers, losses, pooling
x = torch.arange(16.0).view(1, 1, 4, 4)
case("interp bicubic antialias", lambda: F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True))
case(
    "interp bilinear antialias up",
    lambda: F.interpolate(x, size=(5, 6), mode="bilinear", antialias=True).sum(),
)
case("interp nearest-exact scale", lambda: F.interpolate(x, scale_factor=0.75, mode="nearest-exact"))
case("interp area 3d", lambda: F.interpolate(torch.arange(10.0).view(1, 1, 10), size=4, mode="area"))
case(
    "interp trilinear align",
    lambda: F.interpolate(
        torch.arange(8.0).view(1, 1, 2, 2, 2), size=3, mode="trilinear", align_corners=True
    ).sum(),
)
case("interp scale list", lambda: F.interpolate(x, scale_factor=[2, 0.5]).shape)
case("interp bool", lambda: F.interpolate(x.bool(), size=3))
case(
    "interp double bicubic ac",
    lambda: F.interpolate(x.double(), size=5, mode="bicubic", align_corners=True).sum(),
)
case(
    "clip nonfinite",
    lambda: nn.utils.clip_grad_norm_([nn.Parameter(torch.ones(2))], 1.0, error_if_nonfinite=True),
)
p = nn.Parameter(torch.ones(2))
p.grad = torch.tensor([float("inf"), 1.0])
case("clip inf error", lambda: nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True))
case("clip inf noerror", lambda: (nn.utils.clip_grad_norm_([p], 1.0), p.grad)[1])
p2 = nn.Parameter(torch.ones(2))
p2.grad = torch.tensor([3.0, 4.0])
case("clip norm inf type", lambda: (nn.utils.clip_grad_norm_([p2], 1.0, norm_type="inf"), p2.grad)[1])
case("clip zero params", lambda: nn.utils.clip_grad_norm_([], 1.0))
case("get_total_norm", lambda: nn.utils.get_total_norm([torch.tensor([3.0, 4.0]), torch.tensor([12.0])]))
case(
    "clip_grads_with_norm_",
    lambda: (nn.utils.clip_grads_with_norm_([p2], 1.0, torch.tensor(10.0)), p2.grad)[1],
)
case("onecycle three phase", lambda: onecycle_lrs(9, total_steps=10, three_phase=True))
case("onecycle too many steps", lambda: onecycle_lrs(5, total_steps=3))
case("onecycle no total", lambda: torch.optim.lr_scheduler.OneCycleLR(sgd(), max_lr=1.0))
lstm = nn.LSTM(3, 5, proj_size=2, batch_first=True, num_layers=2)
for prm in lstm.parameters():
    torch.nn.init.constant_(prm, 0.1)
pk = nn.utils.rnn.pack_padded_sequence(torch.ones(2, 4, 3), [4, 2], batch_first=True)
case("lstm proj packed", lambda: nn.utils.rnn.pad_packed_sequence(lstm(pk)[0], batch_first=True)[0].sum())
case("lstm proj h shape", lambda: [tuple(t.shape) for t in lstm(pk)[1]])
case(
    "gru bidir h0 wrong", lambda: nn.GRU(3, 4, bidirectional=True)(torch.ones(2, 1, 3), torch.zeros(1, 1, 4))
)
enc = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True, norm_first=True)
for prm in enc.parameters():
    torch.nn.init.constant_(prm, 0.05)
mask = nn.Transformer.generate_square_subsequent_mask(3)
case("square mask", lambda: mask)
case("enc causal", lambda: enc(torch.arange(24.0).view(2, 3, 4) / 10, src_mask=mask, is_causal=True).sum())
case("enc causal no mask", lambda: enc(torch.ones(2, 3, 4), is_causal=True).sum())
case(
    "encoder stack causal",
    lambda: nn.TransformerEncoder(enc, 2, enable_nested_tensor=False)(
        torch.arange(24.0).view(2, 3, 4) / 10, mask=mask, is_causal=True
    ).sum(),
)
case(
    "mha need_weights avg",
    lambda: (
        nn.MultiheadAttention(4, 2, batch_first=True)(
            torch.ones(1, 2, 4), torch.ones(1, 3, 4), torch.ones(1, 3, 4)
        )[1].shape
    ),
)
case(
    "mha bad kpm dtype",
    lambda: nn.MultiheadAttention(4, 2, batch_first=True)(
        torch.ones(1, 2, 4),
        torch.ones(1, 3, 4),
        torch.ones(1, 3, 4),
        key_padding_mask=torch.ones(1, 3, dtype=torch.long),
    ),
)
case("gelu bad approx", lambda: F.gelu(torch.ones(2), approximate="fast"))
case("layer_norm bad shape", lambda: F.layer_norm(torch.ones(2, 3), (2,)))
case("group_norm not divisible", lambda: nn.GroupNorm(3, 4)(torch.ones(2, 4, 2)))
case("batchnorm1d single", lambda: nn.BatchNorm1d(3)(torch.ones(1, 3)))
case("batchnorm1d 1x3x1", lambda: nn.BatchNorm1d(3)(torch.ones(1, 3, 1)))
case("instancenorm 1 spatial", lambda: nn.InstanceNorm1d(3)(torch.ones(2, 3, 1)))
case("dropout2d 3d warn", lambda: nn.Dropout2d(0.0)(torch.ones(2, 3, 4)).shape)
case(
    "ce prob targets smoothing",
    lambda: F.cross_entropy(
        torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0.2, 0.3, 0.5]]), label_smoothing=0.1
    ),
)
case("ce ignore all", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([-100, -100])))
case(
    "ce ignore all sum",
    lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([-100, -100]), reduction="sum"),
)
case(
    "nll weights ignore",
    lambda: F.nll_loss(
        torch.log_softmax(torch.arange(6.0).view(2, 3), 1),
        torch.tensor([1, 2]),
        weight=torch.tensor([1.0, 2.0, 3.0]),
        ignore_index=2,
    ),
)
case("ce target out of range", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([0, 3])))
case("bce target outside", lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([2.0])))
case("bce input outside", lambda: F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])))
case(
    "bce logits pos_weight bcast",
    lambda: F.binary_cross_entropy_with_logits(
        torch.zeros(2, 3), torch.ones(2, 3), pos_weight=torch.tensor([1.0, 2.0, 3.0])
    ),
)
case(
    "kl_div batchmean",
    lambda: F.kl_div(
        torch.log(torch.tensor([[0.2, 0.8]])), torch.tensor([[0.5, 0.5]]), reduction="batchmean"
    ),
)
case("kl_div mean warn", lambda: F.kl_div(torch.log(torch.tensor([[0.2, 0.8]])), torch.tensor([[0.5, 0.5]])))
case(
    "ctc basic",
    lambda: F.ctc_loss(
        torch.log_softmax(torch.arange(30.0).view(5, 1, 6) / 7, 2),
        torch.tensor([[1, 2]]),
        torch.tensor([5]),
        torch.tensor([2]),
    ),
)
case(
    "multilabel margin",
    lambda: F.multilabel_margin_loss(torch.tensor([[0.1, 0.2, 0.4, 0.8]]), torch.tensor([[3, 0, -1, 1]])),
)
case("soft margin", lambda: F.soft_margin_loss(torch.tensor([0.5, -1.0]), torch.tensor([1.0, -1.0])))
case(
    "multi margin weight",
    lambda: F.multi_margin_loss(
        torch.tensor([[0.1, 0.2, 0.4]]),
        torch.tensor([2]),
        p=2,
        margin=0.5,
        weight=torch.tensor([1.0, 2.0, 3.0]),
    ),
)
case("one_hot neg", lambda: F.one_hot(torch.tensor([-1, 2])))
case("one_hot classes small", lambda: F.one_hot(torch.tensor([3]), 2))
case("one_hot float", lambda: F.one_hot(torch.tensor([1.0])))
case("one_hot empty", lambda: F.one_hot(torch.tensor([], dtype=torch.long)))
case("one_hot empty classes", lambda: F.one_hot(torch.tensor([], dtype=torch.long), 3).shape)
case("normalize zero", lambda: F.normalize(torch.zeros(2, 3)))
case("cosine_similarity zero", lambda: F.cosine_similarity(torch.zeros(1, 3), torch.ones(1, 3)))
case(
    "cosine_similarity bcast",
    lambda: F.cosine_similarity(torch.ones(2, 1, 3), torch.ones(1, 4, 3), dim=-1).shape,
)
case("pairwise eps", lambda: F.pairwise_distance(torch.ones(1, 3), torch.ones(1, 3)))
case("pdist 1 row", lambda: F.pdist(torch.ones(1, 3)))
case("pdist 3d", lambda: F.pdist(torch.ones(1, 2, 3)))
case(
    "embedding scale_grad",
    lambda: (
        lambda w: (F.embedding(torch.tensor([1, 1, 2]), w, scale_grad_by_freq=True).sum().backward(), w.grad)[
            1
        ]
    )(nn.Parameter(torch.ones(3, 2))),
)
case(
    "unfold padding dilation",
    lambda: F.unfold(torch.arange(16.0).view(1, 1, 4, 4), 2, dilation=2, padding=1, stride=2),
)
case(
    "fold roundtrip", lambda: F.fold(F.unfold(torch.ones(1, 2, 4, 4), 2, stride=2), (4, 4), 2, stride=2).sum()
)
case("adaptive pool 3d", lambda: F.adaptive_avg_pool3d(torch.arange(27.0).view(1, 3, 3, 3), (2, 2, 2)))
case(
    "adaptive max return",
    lambda: F.adaptive_max_pool2d(torch.arange(16.0).view(1, 1, 4, 4), 2, return_indices=True)[1],
)
case(
    "maxunpool",
    lambda: F.max_unpool2d(
        *F.max_pool2d(torch.arange(16.0).view(1, 1, 4, 4), 2, return_indices=True), 2
    ).sum(),
)
case("lppool", lambda: F.lp_pool2d(torch.arange(16.0).view(1, 1, 4, 4), 2, 2))
case(
    "avgpool ceil count_include",
    lambda: F.avg_pool2d(torch.arange(25.0).view(1, 1, 5, 5), 2, ceil_mode=True, count_include_pad=False),
)
case("avgpool divisor", lambda: F.avg_pool2d(torch.arange(16.0).view(1, 1, 4, 4), 2, divisor_override=3))
case(
    "fractional maxpool",
    lambda: nn.FractionalMaxPool2d(2, output_size=2, _random_samples=torch.full((1, 1, 2), 0.5))(
        torch.arange(16.0).view(1, 1, 4, 4)
    ),
)

# --- Module API, tensor creation/indexing/reductions, serialization
m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
case("named_modules prefix", lambda: [n for n, _ in m.named_modules(prefix="model")])
case(
    "named_parameters remove_duplicate",
    lambda: len(list(nn.ModuleList([m[0], m[0]]).named_parameters(remove_duplicate=False))),
)
case("get_submodule bad", lambda: m.get_submodule("5"))
case("get_parameter", lambda: tuple(m.get_parameter("0.bias").shape))
case("get_parameter bad", lambda: m.get_parameter("0.foo"))
case("set_submodule", lambda: (m.set_submodule("1", nn.Tanh()), type(m[1]).__name__)[1])
case("register_buffer bad name", lambda: m.register_buffer("a.b", torch.ones(1)))
case("register_buffer existing attr", lambda: m.register_buffer("training", torch.ones(1)))
case("register_parameter non-param", lambda: m.register_parameter("w", torch.ones(1)))
case("add_module non module", lambda: m.add_module("x", 3))
case("setattr param to tensor", lambda: setattr(m[0], "weight", torch.ones(3, 2)))
case("load_state_dict missing", lambda: str(m.load_state_dict({"0.weight": torch.ones(3, 2)}, strict=False)))
case("load_state_dict shape", lambda: m.load_state_dict({"0.weight": torch.ones(2, 2)}, strict=False))
case("load_state_dict unexpected strict", lambda: m.load_state_dict({**m.state_dict(), "zzz": torch.ones(1)}))
case("state_dict keep_vars", lambda: type(m.state_dict(keep_vars=True)["0.weight"]).__name__)
case("state_dict prefix", lambda: list(m.state_dict(prefix="p."))[:2])
case("requires_grad_ buffers", lambda: [p.requires_grad for p in m.requires_grad_(False).parameters()][:2])
case(
    "zero_grad set_to_none False",
    lambda: (
        m.requires_grad_(True),
        m(torch.ones(1, 2)).sum().backward(),
        m.zero_grad(set_to_none=False),
        m[0].weight.grad.sum().item(),
    )[-1],
)
case("train(str)", lambda: m.train("yes"))
case("to bad dtype", lambda: m.to(torch.int64))
case("half roundtrip", lambda: m.half().float()[0].weight.dtype)
case("extra_repr", lambda: repr(nn.Conv2d(1, 2, 3, groups=1, bias=False, padding_mode="reflect", padding=1)))
case("repr empty seq", lambda: repr(nn.Sequential()))
case("seq slice", lambda: repr(m[1:]))
case("seq insert", lambda: len(nn.Sequential(nn.ReLU()).insert(0, nn.Tanh())))
case(
    "seq append pop",
    lambda: (lambda s: (s.append(nn.ReLU()), type(s.pop(0)).__name__, len(s))[1:])(nn.Sequential(nn.Tanh())),
)
case("seq add", lambda: len(nn.Sequential(nn.ReLU()) + nn.Sequential(nn.Tanh())))
case("seq mul", lambda: len(nn.Sequential(nn.ReLU()) * 3))
case("modulelist extend bad", lambda: nn.ModuleList().extend(3))
case("moduledict update list", lambda: list(nn.ModuleDict().update([("a", nn.ReLU())]) or []))
case("moduledict pop", lambda: type(nn.ModuleDict({"a": nn.ReLU()}).pop("a")).__name__)
case("paramlist append tensor", lambda: type(nn.ParameterList().append(torch.ones(1))[0]).__name__)
case("paramdict get default", lambda: nn.ParameterDict().get("x", 5))
case("apply returns", lambda: m.apply(lambda mod: None) is m)
case(
    "hook forward kwargs",
    lambda: (
        lambda h: (
            m.register_forward_pre_hook(lambda mod, a, k: (a, k), with_kwargs=True),
            m(torch.ones(1, 2)).shape,
        )[1]
    )(None),
)
case("parameters_to_vector", lambda: nn.utils.parameters_to_vector(m.parameters()).shape)
case("vector_to_parameters bad", lambda: nn.utils.vector_to_parameters(torch.ones(3), m.parameters()))
case("vector_to_parameters not tensor", lambda: nn.utils.vector_to_parameters([1.0], m.parameters()))
case(
    "fuse_conv_bn_eval",
    lambda: (
        type(torch.nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 2, 3).eval(), nn.BatchNorm2d(2).eval())).__name__
    ),
)
case("skip_init", lambda: tuple(nn.utils.skip_init(nn.Linear, 3, 4).weight.shape))
case("tensor.item multi", lambda: torch.ones(2).item())
case("tensor bool ambiguous", lambda: bool(torch.ones(2)))
case("tensor int float", lambda: int(torch.tensor(2.7)))
case("index bool mask wrong", lambda: torch.ones(3)[torch.tensor([True, False])])
case("index out of range", lambda: torch.ones(3)[5])
case("index tensor oob", lambda: torch.ones(3)[torch.tensor([5])])
case("setitem bcast fail", lambda: torch.ones(3, 2).__setitem__(slice(None), torch.ones(3)))
case("view incompatible", lambda: torch.ones(4, 3).t().view(12))
case("reshape -1 twice", lambda: torch.ones(4).reshape(-1, -1))
case("expand bad", lambda: torch.ones(2, 3).expand(4, 3))
case("cat dims mismatch", lambda: torch.cat([torch.ones(2, 3), torch.ones(2, 4)]))
case("cat empty list", lambda: torch.cat([]))
case("stack shapes", lambda: torch.stack([torch.ones(2), torch.ones(3)]))
case("matmul 1d 1d mismatch", lambda: torch.ones(2) @ torch.ones(3))
case("mm dtype mismatch", lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64))
case("linear int", lambda: F.linear(torch.ones(2, 2, dtype=torch.long), torch.ones(2, 2, dtype=torch.long)))
case("topk too big", lambda: torch.ones(3).topk(5))
case("multinomial neg", lambda: torch.multinomial(torch.tensor([0.5, -0.1]), 1))
case("multinomial zero", lambda: torch.multinomial(torch.tensor([0.0, 0.0]), 1))
case("multinomial no replace too many", lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 3))
case("randint bad", lambda: torch.randint(5, 2, (3,)))
case("arange bad step", lambda: torch.arange(0, 5, 0))
case("arange wrong sign", lambda: torch.arange(0, 5, -1))
case("linspace negative steps", lambda: torch.linspace(0, 1, -1))
case("full bool int", lambda: torch.full((2,), True).dtype)
case("full int float", lambda: torch.full((2,), 1).dtype)
case("tensor ragged", lambda: torch.tensor([[1, 2], [3]]))
case("tensor from str", lambda: torch.tensor("abc"))
case("tensor overflow", lambda: torch.tensor([2**64]))
case("sum dtype", lambda: torch.ones(3, dtype=torch.int32).sum().dtype)
case("mean int", lambda: torch.ones(3, dtype=torch.long).mean())
case("std single", lambda: torch.ones(1).std())
case("var correction", lambda: torch.arange(4.0).var(correction=0))
case("max empty", lambda: torch.ones(0).max())
case("max dim empty", lambda: torch.ones(0, 3).max(0))
case("argmax empty", lambda: torch.ones(0).argmax())
case("softmax int", lambda: torch.softmax(torch.ones(2, dtype=torch.long), 0))
case("log_softmax dtype", lambda: F.log_softmax(torch.ones(2), 0, dtype=torch.float64).dtype)
case("clamp min>max", lambda: torch.arange(4.0).clamp(3, 1))
case("clamp none", lambda: torch.ones(2).clamp())
case("where scalar dtypes", lambda: torch.where(torch.tensor([True, False]), 1, 2.5).dtype)
case("masked_fill non-bool", lambda: torch.ones(2).masked_fill(torch.tensor([1, 0]), 0.0))
case("scatter_ bad index", lambda: torch.zeros(3).scatter_(0, torch.tensor([5]), 1.0))
case("gather bad dims", lambda: torch.ones(2, 2).gather(1, torch.tensor([0, 1])))
case("index_select float idx", lambda: torch.ones(3).index_select(0, torch.tensor([0.0])))
case("nonzero as_tuple", lambda: [t.tolist() for t in torch.tensor([[0, 1], [1, 0]]).nonzero(as_tuple=True)])
case("sort stable", lambda: torch.tensor([2, 1, 2, 1]).sort(stable=True).indices)
case(
    "unique counts",
    lambda: [t.tolist() for t in torch.tensor([3, 1, 3, 2]).unique(return_counts=True, return_inverse=True)],
)
case("bincount neg", lambda: torch.bincount(torch.tensor([-1, 2])))
case("histc", lambda: torch.histc(torch.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3))
case("cumsum int dtype", lambda: torch.tensor([1, 2], dtype=torch.int8).cumsum(0).dtype)
case("quantile q>1", lambda: torch.quantile(torch.ones(3), 1.5))
case("quantile empty", lambda: torch.quantile(torch.ones(0), 0.5))
case("quantile int", lambda: torch.quantile(torch.ones(3, dtype=torch.long), 0.5))
case("nanquantile all nan", lambda: torch.nanquantile(torch.tensor([float("nan")]), 0.5))
case("median even", lambda: torch.tensor([1.0, 2.0, 3.0, 4.0]).median())
case("kthvalue k too big", lambda: torch.ones(3).kthvalue(4))
case("einsum bad", lambda: torch.einsum("ij,jk->ik", torch.ones(2, 3), torch.ones(2, 3)))
case("split sizes bad", lambda: torch.ones(5).split([2, 2]))
case("chunk 0", lambda: torch.ones(5).chunk(0))
case("repeat fewer dims", lambda: torch.ones(2, 3).repeat(2))
case("flip dup dims", lambda: torch.ones(2, 3).flip(0, 0))
case("roll no dims", lambda: torch.arange(4).view(2, 2).roll(1))
case("tril bad", lambda: torch.ones(3).tril())
case("diag 3d", lambda: torch.ones(2, 2, 2).diag())
case(
    "save load weights_only",
    lambda: (
        lambda b: (
            torch.save({"a": torch.ones(2), "n": 3}, b),
            b.seek(0),
            torch.load(b, weights_only=True)["n"],
        )[-1]
    )(io.BytesIO()),
)
case("load bad bytes", lambda: torch.load(io.BytesIO(b"notapickle"), weights_only=True))

# --- torch.distributions
case("normal rsample shape", lambda: D.Normal(torch.zeros(2), torch.ones(2)).rsample((3,)).shape)
case("normal icdf", lambda: D.Normal(0.0, 2.0).icdf(torch.tensor([0.1, 0.5, 0.9])))
case("normal entropy", lambda: D.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 3.0])).entropy())
case("normal cdf", lambda: D.Normal(1.0, 2.0).cdf(torch.tensor([0.0, 1.0, 5.0])))
case("normal repr", lambda: repr(D.Normal(torch.zeros(2), torch.ones(2))))
case(
    "mvn precision",
    lambda: D.MultivariateNormal(
        torch.zeros(2), precision_matrix=torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    ).log_prob(torch.ones(2)),
)
case(
    "mvn scale_tril",
    lambda: D.MultivariateNormal(torch.zeros(2), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 2.0]])).entropy(),
)
case("mvn bad cov", lambda: D.MultivariateNormal(torch.zeros(2), torch.tensor([[1.0, 2.0], [2.0, 1.0]])))
case(
    "mvn variance",
    lambda: D.MultivariateNormal(torch.zeros(2), torch.tensor([[2.0, 0.5], [0.5, 1.0]])).variance,
)
case(
    "lowrank mvn",
    lambda: D.LowRankMultivariateNormal(torch.zeros(3), torch.ones(3, 1), torch.ones(3)).log_prob(
        torch.ones(3)
    ),
)
case("beta mean", lambda: D.Beta(torch.tensor(2.0), torch.tensor(3.0)).log_prob(torch.tensor(0.3)))
case(
    "gamma log_prob",
    lambda: D.Gamma(torch.tensor([2.0, 3.0]), torch.tensor([1.0, 0.5])).log_prob(torch.tensor([1.0, 2.0])),
)
case(
    "dirichlet log_prob",
    lambda: D.Dirichlet(torch.tensor([1.0, 2.0, 3.0])).log_prob(torch.tensor([0.2, 0.3, 0.5])),
)
case(
    "dirichlet bad value",
    lambda: D.Dirichlet(torch.tensor([1.0, 2.0, 3.0])).log_prob(torch.tensor([0.2, 0.3, 0.6])),
)
case(
    "bernoulli logits",
    lambda: D.Bernoulli(logits=torch.tensor([0.0, 2.0])).log_prob(torch.tensor([1.0, 0.0])),
)
case("bernoulli bad value", lambda: D.Bernoulli(probs=torch.tensor([0.3])).log_prob(torch.tensor([0.5])))
case("binomial", lambda: D.Binomial(10, torch.tensor([0.2, 0.7])).log_prob(torch.tensor([3.0, 7.0])))
case("poisson", lambda: D.Poisson(torch.tensor([2.0])).log_prob(torch.tensor([3.0])))
case("geometric", lambda: D.Geometric(torch.tensor([0.3])).log_prob(torch.tensor([2.0])))
case("laplace", lambda: D.Laplace(0.0, 1.0).log_prob(torch.tensor([0.5, -2.0])))
case("studentT", lambda: D.StudentT(3.0).log_prob(torch.tensor([0.5])))
case("uniform out", lambda: D.Uniform(0.0, 1.0).log_prob(torch.tensor([1.5])))
case("uniform out novalidate", lambda: D.Uniform(0.0, 1.0, validate_args=False).log_prob(torch.tensor([1.5])))
case("exponential cdf", lambda: D.Exponential(2.0).cdf(torch.tensor([0.5])))
case("lognormal mean", lambda: D.LogNormal(0.0, 0.5).mean)
case("gumbel", lambda: D.Gumbel(0.0, 1.0).log_prob(torch.tensor([0.3])))
case("vonmises", lambda: D.VonMises(0.0, 2.0).log_prob(torch.tensor([0.3])))
case(
    "relaxed bernoulli",
    lambda: D.RelaxedBernoulli(torch.tensor(0.5), probs=torch.tensor([0.3])).log_prob(torch.tensor([0.4])),
)
case(
    "onehot cat",
    lambda: D.OneHotCategorical(probs=torch.tensor([0.2, 0.8])).log_prob(torch.tensor([0.0, 1.0])),
)
case(
    "multinomial dist",
    lambda: D.Multinomial(5, probs=torch.tensor([0.2, 0.8])).log_prob(torch.tensor([2.0, 3.0])),
)
case(
    "transformed",
    lambda: D.TransformedDistribution(
        D.Normal(0.0, 1.0), [D.transforms.AffineTransform(1.0, 2.0), D.transforms.ExpTransform()]
    ).log_prob(torch.tensor([2.0])),
)
case(
    "tanh transform",
    lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.TanhTransform()]).log_prob(
        torch.tensor([0.5])
    ),
)
case("kl normal normal", lambda: D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(1.0, 2.0)))
case(
    "kl mvn",
    lambda: D.kl_divergence(
        D.MultivariateNormal(torch.zeros(2), torch.eye(2)),
        D.MultivariateNormal(torch.ones(2), 2 * torch.eye(2)),
    ),
)
case("kl missing", lambda: D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0)))
case("kl beta", lambda: D.kl_divergence(D.Beta(2.0, 3.0), D.Beta(1.0, 1.0)))
case("independent reinterp too many", lambda: D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 2))
case("expand", lambda: D.Normal(0.0, 1.0).expand((3,)).log_prob(torch.zeros(3)))
case("constraint check", lambda: D.constraints.simplex.check(torch.tensor([0.5, 0.5])))
case("biject_to positive", lambda: D.biject_to(D.constraints.positive)(torch.tensor([0.0, 1.0])))
case("transform inv", lambda: D.transforms.SigmoidTransform().inv(torch.tensor([0.25])))
case("stickbreaking", lambda: D.transforms.StickBreakingTransform()(torch.tensor([0.0, 0.0])))
case(
    "has_rsample",
    lambda: (
        D.Normal(0.0, 1.0).has_rsample,
        D.Categorical(torch.ones(2)).has_rsample,
        D.Gamma(1.0, 1.0).has_rsample,
    ),
)
case(
    "support repr",
    lambda: (
        str(D.Normal(0.0, 1.0).support),
        str(D.Categorical(torch.ones(3)).support),
        str(D.Beta(1.0, 1.0).support),
    ),
)
case("cat entropy logits -inf", lambda: D.Categorical(logits=torch.tensor([0.0, -float("inf")])).entropy())
case("normal scale zero", lambda: D.Normal(0.0, 0.0))
case("normal nan loc", lambda: D.Normal(float("nan"), 1.0))
case(
    "set_default_validate",
    lambda: (
        D.Distribution.set_default_validate_args(False),
        D.Normal(0.0, -1.0).scale.item(),
        D.Distribution.set_default_validate_args(True),
    )[1],
)


# --- autograd as programs misuse it
def twice():
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


case("backward twice", twice)


def twice_retain():
    x = torch.ones(2, requires_grad=True)
    y = (x.exp()).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


case("backward twice retain", twice_retain)
case("backward nonscalar", lambda: (torch.ones(2, requires_grad=True) * 2).backward())
case("backward no grad", lambda: torch.ones(2).sum().backward())
case(
    "grad unused",
    lambda: torch.autograd.grad(
        (torch.ones(2, requires_grad=True) * 2).sum(), [torch.ones(2, requires_grad=True)]
    ),
)
case(
    "grad allow_unused",
    lambda: torch.autograd.grad(
        (lambda a: (a * 2).sum())(torch.ones(2, requires_grad=True)),
        [torch.ones(2, requires_grad=True)],
        allow_unused=True,
    ),
)


def mat_unused():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    return torch.autograd.grad((a * 2).sum(), [a, b], allow_unused=True, materialize_grads=True)[1]


case("grad materialize", mat_unused)


def inplace_leaf():
    x = torch.ones(2, requires_grad=True)
    x.add_(1)


case("inplace leaf", inplace_leaf)


def inplace_saved():
    x = torch.ones(2, requires_grad=True)
    y = x.sigmoid()
    y.mul_(2)
    y.sum().backward()
    return x.grad


case("inplace on sigmoid out", inplace_saved)


def inplace_saved2():
    x = torch.ones(2, requires_grad=True)
    y = x * 1
    z = y.exp()
    y.add_(1)
    z.sum().backward()
    return x.grad


case("inplace on exp input ok", inplace_saved2)


def inplace_saved3():
    x = torch.ones(2, requires_grad=True)
    y = x * 1
    z = y.pow(2)
    y.add_(1)
    z.sum().backward()


case("inplace on pow input", inplace_saved3)


def retain():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    return y.grad


case("retain_grad", retain)


def hook():
    x = torch.ones(2, requires_grad=True)
    x.register_hook(lambda g: g * 10)
    (x * 2).sum().backward()
    return x.grad


case("tensor hook", hook)


def post_acc():
    x = torch.ones(2, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.sum().item()))
    (x * 2).sum().backward()
    return seen


case("post accumulate hook", post_acc)


def detect():
    with torch.autograd.detect_anomaly():
        x = torch.tensor([0.0], requires_grad=True)
        (x.sqrt() * 0).sum().backward()
        return x.grad


case("detect anomaly nan", detect)


def no_grad_dec():
    @torch.no_grad()
    def f(x):
        return x * 2

    return f(torch.ones(1, requires_grad=True)).requires_grad


case("no_grad decorator", no_grad_dec)
case(
    "enable_grad in no_grad",
    lambda: (
        lambda: [
            torch.set_grad_enabled(False),
            (torch.ones(1, requires_grad=True) * 2).requires_grad,
            torch.set_grad_enabled(True),
        ][1]
    )(),
)
case(
    "inference tensor grad",
    lambda: (lambda t: t.requires_grad_())(torch.inference_mode()(lambda: torch.ones(1))()),
)


def infmode():
    with torch.inference_mode():
        t = torch.ones(2)
    return (t * torch.ones(2, requires_grad=True)).sum().backward()


case("inference tensor in graph", infmode)


def infmode_inplace():
    with torch.inference_mode():
        t = torch.ones(2)
    t.add_(1)


case("inference tensor inplace outside", infmode_inplace)


def jac():
    return torch.autograd.functional.jacobian(lambda x: x**2, torch.tensor([1.0, 2.0]))


case("jacobian", jac)
case("hessian", lambda: torch.autograd.functional.hessian(lambda x: (x**3).sum(), torch.tensor([1.0, 2.0])))
case("vjp", lambda: torch.autograd.functional.vjp(lambda x: x * 2, torch.ones(2), torch.ones(2))[1])


def gradcheck():
    return torch.autograd.gradcheck(
        lambda x: (x * x).sum(), (torch.ones(2, dtype=torch.double, requires_grad=True),)
    )


case("gradcheck", gradcheck)
case(
    "gradcheck float warn",
    lambda: torch.autograd.gradcheck(
        lambda x: x * 2, (torch.ones(2, requires_grad=True),), raise_exception=False
    ),
)


def double_backward():
    x = torch.tensor([2.0], requires_grad=True)
    (g,) = torch.autograd.grad(x**3, x, create_graph=True)
    (g2,) = torch.autograd.grad(g, x)
    return g2


case("double backward", double_backward)


def fn_ctx():
    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g, None

    x = torch.ones(2, requires_grad=True)
    Sq.apply(x).sum().backward()


case("function too many grads", fn_ctx)


def fn_wrong_shape():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.ones(3)

    x = torch.ones(2, requires_grad=True)
    Bad.apply(x).sum().backward()


case("function wrong grad shape", fn_wrong_shape)


def set_detect():
    torch.autograd.set_detect_anomaly(False)
    return torch.is_anomaly_enabled()


case("set_detect_anomaly", set_detect)


def grad_of_int():
    return torch.ones(2, dtype=torch.long, requires_grad=True)


case("int requires grad", grad_of_int)


def grad_setter_bad():
    x = torch.ones(2, requires_grad=True)
    x.grad = torch.ones(3)


case("grad setter bad shape", grad_setter_bad)


def grad_setter_dtype():
    x = torch.ones(2, requires_grad=True)
    x.grad = torch.ones(2, dtype=torch.double)


case("grad setter bad dtype", grad_setter_dtype)


def detach_inplace():
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    d = y.detach()
    d.add_(1)
    y.sum().backward()
    return x.grad


case("detach shares version", detach_inplace)


def leaf_view_inplace():
    x = torch.ones(4, requires_grad=True)
    v = x[:2]
    v.mul_(2)


case("leaf view inplace", leaf_view_inplace)


def view_inplace():
    x = torch.ones(4, requires_grad=True)
    y = x * 1
    v = y[:2]
    v.mul_(3)
    y.sum().backward()
    return x.grad


case("view inplace grad", view_inplace)


def unbind_inplace():
    x = torch.ones(2, 2, requires_grad=True)
    a, b = (x * 1).unbind(0)
    a.mul_(2)


case("unbind output inplace", unbind_inplace)


def nn_param_grad_acc():
    lin = nn.Linear(2, 1)
    x = torch.ones(3, 2)
    lin(x).sum().backward()
    lin(x).sum().backward()
    return lin.bias.grad


case("grad accumulates", nn_param_grad_acc)


# --- optimizers resumed from state_dict, bad options, schedulers
def P(v=(1.0, -2.0)):
    p = nn.Parameter(torch.tensor(list(v)))
    p.grad = torch.tensor([0.5, 0.25])
    return p


for name, kw in [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1)),
    ("Adam", dict(lr=0.1, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.1, weight_decay=0.5)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.2)),
    ("NAdam", dict(lr=0.1, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=0.1, decoupled_weight_decay=True, weight_decay=0.1)),
    ("Rprop", dict(lr=0.1, etas=(0.4, 1.3))),
    ("ASGD", dict(lr=0.1, t0=1)),
    ("Adamax", dict(lr=0.1)),
    ("Adadelta", dict(lr=1.0, rho=0.8)),
]:

    def run(name=name, kw=kw):
        p = P()
        opt = getattr(torch.optim, name)([p], **kw)
        for _ in range(3):
            opt.step()
        sd = opt.state_dict()
        p2 = P()
        opt2 = getattr(torch.optim, name)([p2], **kw)
        opt2.load_state_dict(sd)
        with torch.no_grad():
            p2.copy_(p)
        opt.step()
        opt2.step()
        return [round(v, 6) for v in p.tolist()] + [torch.equal(p, p2)] + sorted(sd["state"][0].keys())

    case(f"{name} resume", run)
case(
    "lr tensor", lambda: (lambda p: (torch.optim.Adam([p], lr=torch.tensor(0.1)).step(), p.tolist())[1])(P())
)
case("lr negative", lambda: torch.optim.Adam([P()], lr=-0.1))
case("betas bad", lambda: torch.optim.Adam([P()], betas=(0.9, 1.2)))
case("eps negative", lambda: torch.optim.AdamW([P()], eps=-1.0))
case("momentum negative", lambda: torch.optim.SGD([P()], lr=0.1, momentum=-0.1))
case("nesterov no momentum", lambda: torch.optim.SGD([P()], lr=0.1, nesterov=True))
case("sgd no lr", lambda: torch.optim.SGD([P()]).defaults["lr"])
case("weight_decay negative", lambda: torch.optim.SGD([P()], lr=0.1, weight_decay=-1))
case(
    "dup params", lambda: len(torch.optim.SGD([{"params": [p := P()]}, {"params": [p]}], lr=0.1).param_groups)
)
case("params generator consumed", lambda: torch.optim.SGD((x for x in []), lr=0.1))
case("param non leaf", lambda: torch.optim.SGD([P() * 2], lr=0.1))
case("param dict no params", lambda: torch.optim.SGD([{"lr": 0.1}], lr=0.1))
case(
    "load_state_dict group mismatch",
    lambda: torch.optim.SGD([P()], lr=0.1).load_state_dict(torch.optim.SGD([P(), P()], lr=0.1).state_dict()),
)
case(
    "load_state_dict groups count",
    lambda: torch.optim.SGD([P()], lr=0.1).load_state_dict({"state": {}, "param_groups": []}),
)
case("zero_grad none", lambda: (lambda p: (torch.optim.SGD([p], lr=0.1).zero_grad(), p.grad)[1])(P()))
case(
    "zero_grad keep",
    lambda: (lambda p: (torch.optim.SGD([p], lr=0.1).zero_grad(set_to_none=False), p.grad)[1])(P()),
)
case("step closure return", lambda: torch.optim.SGD([P()], lr=0.1).step(lambda: torch.tensor(3.0)))
case(
    "state_dict names",
    lambda: torch.optim.SGD([("w", P())], lr=0.1).state_dict()["param_groups"][0]["param_names"],
)
case(
    "add_param_group overlap",
    lambda: (lambda p: torch.optim.SGD([p], lr=0.1).add_param_group({"params": [p]}))(P()),
)
case("add_param_group set", lambda: torch.optim.SGD([P()], lr=0.1).add_param_group({"params": {P()}}))
case(
    "scheduler before optimizer warn",
    lambda: (
        lambda o: (lambda s: (s.step(), o.step(), s.get_last_lr()))(torch.optim.lr_scheduler.StepLR(o, 1))
    )(torch.optim.SGD([P()], lr=0.1))[2],
)
case(
    "steplr state_dict",
    lambda: sorted(torch.optim.lr_scheduler.StepLR(torch.optim.SGD([P()], lr=0.1), 2).state_dict()),
)
case(
    "lambdalr state_dict lambdas",
    lambda: torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([P()], lr=0.1), lambda e: 0.5).state_dict()[
        "lr_lambdas"
    ],
)
case(
    "sequential bad milestones",
    lambda: (
        lambda o: torch.optim.lr_scheduler.SequentialLR(
            o,
            [torch.optim.lr_scheduler.ConstantLR(o), torch.optim.lr_scheduler.ExponentialLR(o, 0.9)],
            milestones=[1, 2],
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "chained",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(4)])(
            torch.optim.lr_scheduler.ChainedScheduler(
                [
                    torch.optim.lr_scheduler.ConstantLR(o, 0.5, 2),
                    torch.optim.lr_scheduler.ExponentialLR(o, 0.9),
                ]
            )
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "sequential lrs",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(5)])(
            torch.optim.lr_scheduler.SequentialLR(
                o,
                [
                    torch.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, 2),
                    torch.optim.lr_scheduler.CosineAnnealingLR(o, 3),
                ],
                milestones=[2],
            )
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "polynomial",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(5)])(
            torch.optim.lr_scheduler.PolynomialLR(o, 4, 2.0)
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "cosine closed form epoch",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(7)])(
            torch.optim.lr_scheduler.CosineAnnealingLR(o, 3, eta_min=0.01)
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "swa lr",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(4)])(
            torch.optim.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=2)
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "multiplicative",
    lambda: (
        lambda o: (lambda s: [s.step() or round(o.param_groups[0]["lr"], 6) for _ in range(3)])(
            torch.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.5)
        )
    )(torch.optim.SGD([P()], lr=0.1)),
)
case(
    "optimizer pickle",
    lambda: (
        lambda b: (
            torch.save(torch.optim.Adam([P()]).state_dict(), b),
            b.seek(0),
            sorted(torch.load(b, weights_only=True)["param_groups"][0]),
        )[2]
    )(io.BytesIO()),
)
