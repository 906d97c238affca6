# Hostile inputs on the APIs the session-20 programs use: rotary embeddings (polar, view_as_complex /
# view_as_real), repeat_interleave, scaled_dot_product_attention with enable_gqa, multinomial / topk / sort
# sampling, RMSNorm and GroupNorm, cumprod / gather schedules, einsum, the FFT convolution, cdist / one_hot /
# index_add_ / scatter_ of vector quantisation, KLDivLoss and CosineEmbeddingLoss, Beta, nn.Transformer masks,
# multi_head_attention_forward, LBFGS, torch.utils.data (random_split, samplers, collate), RNG state round
# trips, state_dict loading and SequentialLR, with wrong shapes/dtypes, empty batches, NaN/inf and bad kwargs.
# Each case prints its result or the exception's type and message.
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Beta
from torch.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)
from torch.utils.data.dataloader import default_collate

warnings.simplefilter("ignore")
sdpa = F.scaled_dot_product_attention


def case(name, fn):
    try:
        out = fn()
        if isinstance(out, torch.Tensor):
            out = (tuple(out.shape), str(out.dtype), out.tolist() if out.numel() <= 12 else "...")
        print(name, "->", out)
    except Exception as e:  # noqa: BLE001
        print(name, "!!", type(e).__name__, "|", str(e).split("\n")[0][:160])


def shape(t):
    return tuple(t.shape)


def grads(fn, *values):
    """The gradients fn's scalar result sends to leaves made from values."""
    leaves = [torch.tensor(v, requires_grad=True) for v in values]
    fn(*leaves).backward()
    return [leaf.grad for leaf in leaves]


z = torch.zeros
o = torch.ones

# --- rotary embeddings: polar / complex views
case("polar int", lambda: torch.polar(torch.ones(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64)))
case("polar dtype mismatch", lambda: torch.polar(torch.ones(2), torch.zeros(2, dtype=torch.float64)))
case("polar broadcast", lambda: shape(torch.polar(torch.ones(3, 1), torch.zeros(4))))
case("polar shape mismatch", lambda: torch.polar(torch.ones(3), torch.zeros(4)))
case("polar negative abs", lambda: torch.view_as_real(torch.polar(torch.tensor([-1.0]), torch.tensor([0.0]))))
case("polar nan angle", lambda: torch.view_as_real(torch.polar(torch.tensor([1.0]), torch.tensor([float("nan")]))))
case("view_as_complex last dim 3", lambda: torch.view_as_complex(z(2, 3)))
case("view_as_complex 0-d", lambda: torch.view_as_complex(torch.tensor(1.0)))
case("view_as_complex int", lambda: torch.view_as_complex(torch.zeros(2, 2, dtype=torch.int64)))
case("view_as_complex stride", lambda: torch.view_as_complex(z(2, 4)[:, ::2]))
case("view_as_complex transposed", lambda: torch.view_as_complex(z(2, 3).t()))
case("view_as_complex float64", lambda: str(torch.view_as_complex(z(3, 2, dtype=torch.float64)).dtype))
case("view_as_complex empty", lambda: shape(torch.view_as_complex(z(0, 2))))
case("view_as_real real", lambda: torch.view_as_real(z(2)))
case("view_as_real complex grad", lambda: shape(torch.view_as_real(torch.zeros(3, dtype=torch.complex64,
                                                                               requires_grad=True))))
case("complex mul real broadcast", lambda: shape(torch.view_as_complex(z(1, 4, 2)) * torch.ones(4)))
case("outer 2d", lambda: torch.outer(z(2, 2), z(2)))
case("outer int float", lambda: str(torch.outer(torch.arange(3), torch.ones(2)).dtype))
case("rotate_half odd", lambda: shape(torch.cat((-z(2, 3)[..., 1:], z(2, 3)[..., :1]), dim=-1)))

# --- repeat_interleave / expand for grouped-query attention
case("repeat_interleave negative", lambda: torch.repeat_interleave(z(2, 3), -1, dim=0))
case("repeat_interleave bad dim", lambda: torch.repeat_interleave(z(2, 3), 2, dim=2))
case("repeat_interleave repeats len", lambda: torch.repeat_interleave(z(2, 3), torch.tensor([1, 2, 3]), dim=0))
case("repeat_interleave float repeats", lambda: torch.repeat_interleave(z(2, 3), torch.tensor([1.0, 2.0]), dim=0))
case("repeat_interleave 2d repeats", lambda: torch.repeat_interleave(z(2, 3), torch.ones(2, 1, dtype=torch.long)))
case("repeat_interleave zero", lambda: shape(torch.repeat_interleave(z(2, 3), 0, dim=1)))
case("repeat_interleave no dim", lambda: shape(torch.repeat_interleave(z(2, 3), 2)))
case("repeat_interleave tensor only", lambda: torch.repeat_interleave(torch.tensor([2, 0, 1])))
case("repeat_interleave output_size", lambda: shape(torch.repeat_interleave(z(2, 3), 2, dim=0, output_size=4)))
case("expand heads wrong", lambda: z(1, 2, 2, 1, 4).expand(1, 2, 3, 2, 4))
case("sdpa gqa heads not divisible", lambda: sdpa(z(1, 3, 2, 4), z(1, 2, 2, 4), z(1, 2, 2, 4), enable_gqa=True))
case("sdpa gqa off mismatch", lambda: sdpa(z(1, 4, 2, 4), z(1, 2, 2, 4), z(1, 2, 2, 4)))
case("sdpa gqa ok", lambda: shape(sdpa(z(1, 4, 2, 4), z(1, 2, 3, 4), z(1, 2, 3, 4), enable_gqa=True)))
case("sdpa gqa kv heads differ", lambda: sdpa(z(1, 4, 2, 4), z(1, 2, 3, 4), z(1, 1, 3, 4), enable_gqa=True))
case("sdpa gqa 3d", lambda: shape(sdpa(z(4, 2, 4), z(2, 3, 4), z(2, 3, 4), enable_gqa=True)))
case("sdpa bool mask all false row", lambda: sdpa(o(1, 1, 2, 2), o(1, 1, 2, 2), o(1, 1, 2, 2),
                                                  attn_mask=torch.tensor([[True, True], [False, False]])).isnan()
     .any().item())
case("sdpa causal and mask", lambda: sdpa(z(1, 1, 2, 2), z(1, 1, 2, 2), z(1, 1, 2, 2), attn_mask=z(2, 2),
                                          is_causal=True))
case("sdpa scale 0", lambda: sdpa(o(1, 1, 2, 2), o(1, 1, 2, 2), o(1, 1, 2, 2), scale=0.0))
case("sdpa empty seq", lambda: shape(sdpa(z(1, 1, 0, 4), z(1, 1, 0, 4), z(1, 1, 0, 4))))
case("sdpa v dim differs", lambda: shape(sdpa(z(1, 1, 2, 4), z(1, 1, 3, 4), z(1, 1, 3, 5))))
case("sdpa float mask wrong shape", lambda: sdpa(z(1, 1, 2, 4), z(1, 1, 3, 4), z(1, 1, 3, 4), attn_mask=z(2, 2)))

# --- sampling
case("multinomial negative", lambda: torch.multinomial(torch.tensor([0.5, -0.1]), 1))
case("multinomial zero sum", lambda: torch.multinomial(torch.tensor([0.0, 0.0]), 1))
case("multinomial nan", lambda: torch.multinomial(torch.tensor([float("nan"), 1.0]), 1))
case("multinomial inf", lambda: torch.multinomial(torch.tensor([float("inf"), 1.0]), 1))
case("multinomial too many", lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 3))
case("multinomial too many nonzero", lambda: torch.multinomial(torch.tensor([0.5, 0.0, 0.5]), 3))
case("multinomial 3d", lambda: torch.multinomial(o(2, 2, 2), 1))
case("multinomial 0 samples", lambda: shape(torch.multinomial(o(2, 3), 0)))
case("multinomial negative samples", lambda: torch.multinomial(o(3), -1))
case("multinomial int", lambda: torch.multinomial(torch.tensor([1, 2]), 1))
case("multinomial empty categories", lambda: torch.multinomial(z(2, 0), 1))
case("multinomial empty batch", lambda: shape(torch.multinomial(z(0, 3), 2)))
case("multinomial one-hot", lambda: torch.multinomial(torch.tensor([[0.0, 1.0, 0.0]]), 2, replacement=True))
case("multinomial generator", lambda: shape(torch.multinomial(o(4), 2, generator=torch.Generator().manual_seed(1))))
case("topk k too big", lambda: torch.topk(z(3), 4))
case("topk negative", lambda: torch.topk(z(3), -1))
case("topk 0", lambda: shape(torch.topk(z(2, 3), 0).values))
case("topk nan", lambda: torch.topk(torch.tensor([1.0, float("nan"), 3.0]), 2).values)
case("topk dim out", lambda: torch.topk(z(2, 3), 1, dim=2))
case("topk bool", lambda: torch.topk(torch.tensor([True, False]), 1))
case("sort descending stable", lambda: torch.sort(torch.tensor([1.0, 2.0, 1.0]), descending=True, stable=True)
     .indices)
case("sort nan", lambda: torch.sort(torch.tensor([float("nan"), 1.0, -float("inf")])).values)
case("argsort stable kw", lambda: torch.argsort(torch.tensor([2, 1, 2, 1]), stable=True))
case("gather out of range", lambda: torch.gather(z(2, 3), -1, torch.tensor([[3], [0]])))
case("gather negative index", lambda: torch.gather(z(2, 3), -1, torch.tensor([[-1], [0]])))
case("gather float index", lambda: torch.gather(z(2, 3), 1, torch.tensor([[1.0]])))
case("gather ndim mismatch", lambda: torch.gather(z(2, 3), 1, torch.tensor([1])))
case("gather index too big dim", lambda: torch.gather(z(2, 3), 1, torch.zeros(3, 1, dtype=torch.long)))
case("masked_fill_ with float mask", lambda: z(2).masked_fill_(torch.tensor([1.0, 0.0]), 1.0))
case("masked_fill tensor value 1d", lambda: z(2).masked_fill(torch.tensor([True, False]), torch.tensor([1.0, 2.0])))
case("cumsum int dtype", lambda: str(torch.cumsum(torch.tensor([1, 2], dtype=torch.int32), 0).dtype))
case("cumprod dtype kw", lambda: torch.cumprod(torch.tensor([1, 2, 3]), 0, dtype=torch.float64))
case("cumprod bad dim", lambda: torch.cumprod(z(3), 1))
case("cumprod empty", lambda: shape(torch.cumprod(z(0), 0)))
case("cumprod zeros grad", lambda: (lambda a: (torch.cumprod(a, 0).sum().backward(), a.grad)[1])(
    torch.tensor([2.0, 0.0, 3.0], requires_grad=True)))
case("linspace negative steps", lambda: torch.linspace(0, 1, -1))
case("linspace int dtype", lambda: torch.linspace(0, 10, 4, dtype=torch.int64))
case("clip min > max", lambda: torch.clip(torch.tensor([0.5, 2.0]), 1.0, 0.0))
case("clip tensor bounds", lambda: torch.clip(torch.tensor([0.5, 2.0]), torch.tensor([1.0]), torch.tensor([1.5, 3.0])))

# --- norms
case("RMSNorm wrong shape", lambda: nn.RMSNorm(4)(z(2, 3)))
case("RMSNorm eps None", lambda: shape(nn.RMSNorm([2, 3], eps=None)(o(4, 2, 3))))
case("RMSNorm no affine", lambda: len(list(nn.RMSNorm(3, elementwise_affine=False).parameters())))
case("rms_norm functional", lambda: F.rms_norm(torch.tensor([[3.0, 4.0]]), (2,)).tolist())
case("rms_norm weight mismatch", lambda: F.rms_norm(o(2, 3), (3,), weight=o(2)))
case("rms_norm int", lambda: F.rms_norm(torch.ones(2, 3, dtype=torch.long), (3,)))
case("GroupNorm not divisible", lambda: nn.GroupNorm(3, 4))
case("GroupNorm wrong channels", lambda: nn.GroupNorm(2, 4)(z(2, 6, 3)))
case("group_norm 1d", lambda: F.group_norm(z(4), 2))
case("group_norm empty batch", lambda: shape(F.group_norm(z(0, 4, 3), 2)))
case("group_norm groups 0", lambda: F.group_norm(z(2, 4, 3), 0))
case("group_norm constant", lambda: F.group_norm(o(1, 4, 3), 2).tolist()[0][0])
case("LayerNorm channels mismatch", lambda: nn.LayerNorm(8)(z(2, 8, 4, 4)))

# --- einsum / fft
case("einsum bad letters", lambda: torch.einsum("b h 1, b h j", z(2, 2, 2), z(2, 2, 2)))
case("einsum operand count", lambda: torch.einsum("ij,jk->ik", z(2, 2)))
case("einsum dim mismatch", lambda: torch.einsum("ij,jk->ik", z(2, 3), z(2, 2)))
case("einsum output letter", lambda: torch.einsum("ij->k", z(2, 2)))
case("einsum repeated output", lambda: torch.einsum("ij->ii", z(2, 2)))
case("einsum ellipsis", lambda: shape(torch.einsum("...ij,...jk->...ik", z(3, 2, 4), z(4, 5))))
case("einsum complex real", lambda: torch.einsum("hn,hnl->hl", torch.zeros(2, 3, dtype=torch.complex64), z(2, 3, 4)))
case("einsum int float", lambda: torch.einsum("i,i->", torch.tensor([1, 2]), torch.tensor([1.0, 2.0])))
case("rfft n 0", lambda: torch.fft.rfft(z(4), n=0))
case("rfft complex", lambda: torch.fft.rfft(torch.zeros(4, dtype=torch.complex64)))
case("irfft n 1", lambda: shape(torch.fft.irfft(torch.zeros(3, dtype=torch.complex64), n=1)))
case("rfft bad norm", lambda: torch.fft.rfft(z(4), norm="unitary"))
case("rfft int", lambda: str(torch.fft.rfft(torch.arange(4)).dtype))
case("rfft empty", lambda: torch.fft.rfft(z(0)))

# --- vector quantisation
case("cdist dim mismatch", lambda: torch.cdist(z(3, 2), z(4, 3)))
case("cdist 1d", lambda: torch.cdist(z(3), z(3)))
case("cdist negative p", lambda: torch.cdist(z(3, 2), z(4, 2), p=-1))
case("cdist int", lambda: torch.cdist(torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long)))
case("cdist empty", lambda: shape(torch.cdist(z(0, 2), z(3, 2))))
case("cdist batch broadcast", lambda: shape(torch.cdist(z(2, 1, 3, 2), z(5, 4, 2))))
case("one_hot negative", lambda: F.one_hot(torch.tensor([-1, 0])))
case("one_hot too small", lambda: F.one_hot(torch.tensor([3]), 2))
case("one_hot float", lambda: F.one_hot(torch.tensor([1.0])))
case("one_hot empty no classes", lambda: F.one_hot(torch.tensor([], dtype=torch.long)))
case("one_hot empty classes", lambda: shape(F.one_hot(torch.tensor([], dtype=torch.long), 3)))
case("index_add_ shape", lambda: z(3, 2).index_add_(0, torch.tensor([0, 1]), z(2, 3)))
case("index_add_ out of range", lambda: z(3, 2).index_add_(0, torch.tensor([3]), z(1, 2)))
case("index_add_ float index", lambda: z(3, 2).index_add_(0, torch.tensor([0.0]), z(1, 2)))
case("index_add_ dtype", lambda: z(3, 2).index_add_(0, torch.tensor([0]), torch.ones(1, 2, dtype=torch.float64)))
case("index_add_ alpha", lambda: z(2).index_add_(0, torch.tensor([1, 1]), torch.ones(2), alpha=3).tolist())
case("scatter_ index out of range", lambda: z(2, 3).scatter_(1, torch.tensor([[3], [0]]), 1))
case("scatter_ src smaller", lambda: z(2, 3).scatter_(1, torch.tensor([[0, 1]]), z(1, 1)))
case("scatter_ bad reduce", lambda: z(2, 3).scatter_(1, torch.tensor([[0]]), 1.0, reduce="max"))
case("bincount negative", lambda: torch.bincount(torch.tensor([-1, 0])))
case("bincount float", lambda: torch.bincount(torch.tensor([1.0])))
case("bincount weights len", lambda: torch.bincount(torch.tensor([0, 1]), weights=torch.ones(3)))
case("bincount minlength negative", lambda: torch.bincount(torch.tensor([0]), minlength=-1))
case("argmin empty", lambda: torch.argmin(z(0, 3), dim=0))
case("argmin empty dim1", lambda: shape(torch.argmin(z(0, 3), dim=1)))

# --- losses
case("kl_div shape mismatch", lambda: F.kl_div(z(2, 3), z(2, 4), reduction="batchmean"))
case("kl_div bad reduction", lambda: F.kl_div(z(2, 3), z(2, 3), reduction="avg"))
case("kl_div target negative", lambda: F.kl_div(z(1, 2), torch.tensor([[-0.5, 1.5]]), reduction="sum").item())
case("kl_div batchmean 0-d", lambda: F.kl_div(torch.tensor(-1.0), torch.tensor(0.5), reduction="batchmean").item())
case("kl_div int target", lambda: F.kl_div(z(2), torch.tensor([0, 1]), reduction="sum"))
case("KLDivLoss log_target inf", lambda: nn.KLDivLoss(reduction="sum", log_target=True)(
    torch.tensor([-1.0]), torch.tensor([float("-inf")])).item())
case("cosine_embedding target shape", lambda: F.cosine_embedding_loss(z(3, 2), z(3, 2), o(2)))
case("cosine_embedding 3d", lambda: F.cosine_embedding_loss(z(1, 3, 2), z(1, 3, 2), o(1)))
case("cosine_embedding zero vectors", lambda: F.cosine_embedding_loss(z(2, 3), z(2, 3), o(2)).item())
case("cross_entropy soft target shape", lambda: F.cross_entropy(z(2, 3), z(2, 4)))
case("cross_entropy soft ignore_index", lambda: F.cross_entropy(z(2, 3), o(2, 3) / 3, ignore_index=1).item())
case("cross_entropy all ignored", lambda: F.cross_entropy(z(2, 3), torch.tensor([-100, -100])).item())
case("cross_entropy label_smoothing > 1", lambda: F.cross_entropy(z(2, 3), torch.tensor([0, 1]), label_smoothing=1.5))
case("smooth_l1 negative beta", lambda: F.smooth_l1_loss(z(2), o(2), beta=-1.0))
case("mse broadcast", lambda: F.mse_loss(z(2, 1), o(2)).item())

# --- Beta
case("Beta negative", lambda: Beta(torch.tensor(-1.0), torch.tensor(1.0)))
case("Beta zero", lambda: Beta(torch.tensor(0.0), torch.tensor(1.0)))
case("Beta nan", lambda: Beta(torch.tensor(float("nan")), torch.tensor(1.0)))
case("Beta no validate", lambda: Beta(torch.tensor(-1.0), torch.tensor(1.0), validate_args=False).mean.item())
case("Beta log_prob outside", lambda: Beta(torch.tensor(2.0), torch.tensor(2.0)).log_prob(torch.tensor(1.5)))
case("Beta log_prob at 0", lambda: Beta(torch.tensor(2.0), torch.tensor(2.0)).log_prob(torch.tensor(0.0)).item())
case("Beta broadcast", lambda: Beta(o(2, 1), o(3)).batch_shape)
case("Beta floats", lambda: Beta(0.5, 0.5).mean.item())
case("Beta sample shape", lambda: shape(Beta(o(2), o(2)).sample((3,))))
case("Beta int concentration", lambda: Beta(torch.tensor(1), torch.tensor(2)).mean)

# --- nn.Transformer / MHA
case("square mask 0", lambda: shape(nn.Transformer.generate_square_subsequent_mask(0)))
case("square mask negative", lambda: nn.Transformer.generate_square_subsequent_mask(-1))
case("square mask dtype", lambda: str(nn.Transformer.generate_square_subsequent_mask(2, dtype=torch.float64).dtype))
case("Transformer d_model mismatch", lambda: nn.Transformer(8, 2, 1, 1, 16)(z(3, 2, 4), z(3, 2, 8)))
case("Transformer batch mismatch", lambda: nn.Transformer(8, 2, 1, 1, 16)(z(3, 2, 8), z(3, 1, 8)))
case("Transformer heads", lambda: nn.Transformer(8, 3, 1, 1, 16))
case("Transformer pad mask shape", lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)(
    z(3, 2, 8), z(3, 2, 8), src_key_padding_mask=torch.zeros(3, 2, dtype=torch.bool)))
case("Transformer tgt mask shape", lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)(
    z(3, 2, 8), z(4, 2, 8), tgt_mask=z(3, 3)))
case("Transformer bool pad all", lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).eval()(
    o(2, 3, 8), o(2, 3, 8), src_key_padding_mask=torch.ones(2, 3, dtype=torch.bool)).isnan().any().item())
case("Transformer unbatched", lambda: shape(nn.Transformer(8, 2, 1, 1, 16)(z(3, 8), z(4, 8))))
case("TransformerDecoderLayer memory dim", lambda: nn.TransformerDecoderLayer(8, 2, 16)(z(3, 2, 8), z(3, 2, 4)))
case("mha_forward embed check", lambda: F.multi_head_attention_forward(
    z(2, 1, 4), z(2, 1, 4), z(2, 1, 4), 8, 2, z(12, 4), z(12), None, None, False, 0.0, z(4, 4), z(4), training=False))
case("mha_forward separate no weights", lambda: F.multi_head_attention_forward(
    z(2, 1, 4), z(2, 1, 4), z(2, 1, 4), 4, 2, None, None, None, None, False, 0.0, z(4, 4), z(4),
    use_separate_proj_weight=True))
case("mha_forward out width", lambda: shape(F.multi_head_attention_forward(
    z(1, 2, 4), z(3, 2, 4), z(3, 2, 4), 4, 2, None, z(12), None, None, False, 0.0, z(6, 4), z(6),
    use_separate_proj_weight=True, q_proj_weight=z(4, 4), k_proj_weight=z(4, 4), v_proj_weight=z(4, 4),
    need_weights=False)[0]))
case("mha_forward out width empty batch", lambda: shape(F.multi_head_attention_forward(
    z(1, 0, 4), z(3, 0, 4), z(3, 0, 4), 4, 2, None, z(12), None, None, False, 0.0, z(6, 4), z(6),
    use_separate_proj_weight=True, q_proj_weight=z(4, 4), k_proj_weight=z(4, 4), v_proj_weight=z(4, 4),
    need_weights=False)[0]))
case("mha empty batch batch_first", lambda: shape(nn.MultiheadAttention(4, 2, batch_first=True)(
    z(0, 3, 4), z(0, 5, 4), z(0, 5, 4))[0]))
case("mha batch_first out width", lambda: shape(nn.MultiheadAttention(4, 2, batch_first=True)(
    z(2, 3, 4), z(2, 5, 4), z(2, 5, 4))[1]))
case("pad_sequence mixed dtypes", lambda: nn.utils.rnn.pad_sequence([torch.zeros(2), torch.zeros(3, dtype=torch.long)]))
case("pad_sequence padding_side", lambda: nn.utils.rnn.pad_sequence([o(1), o(2)], batch_first=True,
                                                                    padding_side="left").tolist())
case("pad_sequence bad side", lambda: nn.utils.rnn.pad_sequence([o(1)], padding_side="middle"))

# --- optimizers / schedulers / state
p0 = nn.Parameter(torch.ones(2))
case("LBFGS bad line search", lambda: torch.optim.LBFGS([p0], line_search_fn="armijo").step(lambda: p0.sum()))
case("LBFGS no closure", lambda: torch.optim.LBFGS([p0]).step())
case("LBFGS zero grad closure", lambda: torch.optim.LBFGS([nn.Parameter(torch.ones(2))]).step(
    lambda: torch.zeros((), requires_grad=True)).item())
case("LBFGS nan loss", lambda: (lambda q: (torch.optim.LBFGS([q], max_iter=3).step(
    lambda: ((q * float("nan")).sum().backward(), (q * float("nan")).sum())[1]), q.isnan().any().item())[1])(
    nn.Parameter(torch.ones(2))))
case("AdamW negative wd", lambda: torch.optim.AdamW([p0], weight_decay=-0.1))
case("AdamW bad betas", lambda: torch.optim.AdamW([p0], betas=(1.0, 0.9)))
case("AdamW empty params", lambda: torch.optim.AdamW([]))
case("AdamW duplicate params", lambda: torch.optim.AdamW([{"params": [p0]}, {"params": [p0]}]))
case("AdamW lr tensor", lambda: torch.optim.AdamW([p0], lr=torch.tensor(0.1)).param_groups[0]["lr"])
case("RMSprop negative alpha", lambda: torch.optim.RMSprop([p0], alpha=-0.1))
case("optimizer load groups mismatch", lambda: torch.optim.SGD([p0], lr=0.1).load_state_dict(
    torch.optim.SGD([{"params": [p0]}, {"params": [nn.Parameter(o(1))]}], lr=0.1).state_dict()))
case("optimizer load size mismatch", lambda: torch.optim.SGD([p0], lr=0.1).load_state_dict(
    torch.optim.SGD([nn.Parameter(o(1)), nn.Parameter(o(1))], lr=0.1).state_dict()))
case("SequentialLR milestones", lambda: torch.optim.lr_scheduler.SequentialLR(
    torch.optim.SGD([p0], lr=0.1), [torch.optim.lr_scheduler.ConstantLR(torch.optim.SGD([p0], lr=0.1))],
    milestones=[2]))
case("LinearLR start_factor 0", lambda: torch.optim.lr_scheduler.LinearLR(torch.optim.SGD([p0], lr=0.1),
                                                                          start_factor=0.0))
case("OneCycleLR no total", lambda: torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p0], lr=0.1), 0.1))
case("OneCycleLR pct", lambda: torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p0], lr=0.1), 0.1,
                                                                   total_steps=10, pct_start=1.5))
case("OneCycleLR past end", lambda: (lambda s: [s.step() for _ in range(3)])(
    torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p0], lr=0.1), 0.1, total_steps=2)))
case("CosineWarmRestarts T_0 0", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([p0], lr=0.1), T_0=0))
case("CosineWarmRestarts T_mult float", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([p0], lr=0.1), T_0=2, T_mult=1.5))
case("set_rng_state wrong dtype", lambda: torch.set_rng_state(torch.zeros(5056)))
case("set_rng_state wrong size", lambda: torch.set_rng_state(torch.zeros(10, dtype=torch.uint8)))
case("Generator set_state wrong", lambda: torch.Generator().set_state(torch.zeros(3, dtype=torch.uint8)))
case("Generator manual_seed negative", lambda: torch.Generator().manual_seed(-1).initial_seed())
case("Generator manual_seed float", lambda: torch.Generator().manual_seed(1.5))
case("load_state_dict size mismatch", lambda: nn.Linear(2, 3).load_state_dict(nn.Linear(2, 4).state_dict()))
case("load_state_dict not mapping", lambda: nn.Linear(2, 3).load_state_dict([1, 2]))
case("requires_grad_ int tensor", lambda: torch.tensor([1]).requires_grad_())
case("requires_grad_ non-leaf off", lambda: (o(2, requires_grad=True) * 2).requires_grad_(False))
case("GradScaler bad device", lambda: type(torch.amp.GradScaler("tpu")).__name__)
case("GradScaler disabled scale", lambda: torch.amp.GradScaler("cpu", enabled=False).scale(torch.tensor(2.0)).item())
case("share_memory_ view", lambda: z(4)[1:].share_memory_().is_shared())
case("clip_grad_norm_ nan error", lambda: (lambda q: (setattr(q, "grad", torch.tensor([float("nan")])),
                                                      nn.utils.clip_grad_norm_([q], 1.0, error_if_nonfinite=True)))(
    nn.Parameter(o(1))))
case("clip_grad_norm_ no grads", lambda: nn.utils.clip_grad_norm_([nn.Parameter(o(1))], 1.0).item())

# --- torch.utils.data
case("random_split lengths sum", lambda: random_split(range(10), [3, 3]))
case("random_split fractions", lambda: [len(s) for s in random_split(range(10), [0.33, 0.33, 0.34])])
case("random_split bad fractions", lambda: random_split(range(10), [0.5, 0.6]))
case("random_split negative", lambda: [type(s).__name__ for s in random_split(range(10), [-1, 11])])
case("random_split empty", lambda: [len(s) for s in random_split(range(0), [0, 0])])
case("WeightedRandomSampler negative", lambda: list(WeightedRandomSampler([-1.0, 1.0], 2)))
case("WeightedRandomSampler zero samples", lambda: WeightedRandomSampler([1.0, 1.0], 0))
case("WeightedRandomSampler bool replacement", lambda: WeightedRandomSampler([1.0], 1, replacement=1))
case("WeightedRandomSampler 2d", lambda: WeightedRandomSampler([[1.0, 1.0]], 1))
case("WeightedRandomSampler too many", lambda: list(WeightedRandomSampler([1.0, 1.0], 3, replacement=False)))
case("WeightedRandomSampler all zero", lambda: list(WeightedRandomSampler([0.0, 0.0], 2)))
case("BatchSampler size 0", lambda: BatchSampler(range(3), 0, False))
case("BatchSampler drop_last int", lambda: BatchSampler(range(3), 2, 1))
case("RandomSampler num_samples 0", lambda: RandomSampler(range(3), num_samples=0))
case("RandomSampler replacement str", lambda: RandomSampler(range(3), replacement="yes"))
case("Subset index out", lambda: Subset(range(3), [5])[0])
case("ConcatDataset empty", lambda: ConcatDataset([]))
case("collate tensor sizes", lambda: default_collate([torch.zeros(2), torch.zeros(3)]))
case("collate dict keys", lambda: default_collate([{"a": 1}, {"b": 2}]))
case("collate empty", lambda: default_collate([]))
case("collate numpy object", lambda: __import__("numpy").array([object()]).dtype and default_collate(
    [__import__("numpy").array(["a"]), __import__("numpy").array(["b"])]))
case("DataLoader batch_size and batch_sampler", lambda: torch.utils.data.DataLoader(
    range(4), batch_size=2, batch_sampler=BatchSampler(range(4), 2, False)))
case("DataLoader sampler and shuffle", lambda: torch.utils.data.DataLoader(range(4), sampler=range(4), shuffle=True))
case("DataLoader negative workers", lambda: torch.utils.data.DataLoader(range(4), num_workers=-1))
case("DataLoader prefetch no workers", lambda: torch.utils.data.DataLoader(range(4), prefetch_factor=2))
case("DataLoader persistent no workers", lambda: torch.utils.data.DataLoader(range(4), persistent_workers=True))
case("DataLoader timeout negative", lambda: torch.utils.data.DataLoader(range(4), timeout=-1))

# --- datasets, samplers and loaders, complex autograd, embeddings, losses on empty batches, norms, convs,
# searchsorted / meshgrid / roll, nn.init and in-place pointwise ops
case("view_as_complex offset odd", lambda: torch.view_as_complex(z(5)[1:].view(2, 2)))
case("view_as_complex offset even", lambda: torch.view_as_complex(z(6)[2:].view(2, 2)).shape)
case("view_as_complex bf16", lambda: torch.view_as_complex(z(2, 2, dtype=torch.bfloat16)))
case("view_as_real conj resolved", lambda: torch.view_as_real(torch.zeros(2, dtype=torch.complex64).conj()
                                                              .resolve_conj()).shape)
case("polar grad", lambda: grads(lambda a, b: torch.view_as_real(torch.polar(a, b)).sum(), [2.0], [0.5]))
case("complex grad abs", lambda: grads(lambda c: torch.view_as_complex(c).abs().sum(), [[3.0, 4.0]]))
case("complex angle grad", lambda: grads(lambda c: torch.view_as_complex(c).angle().sum(), [[3.0, 4.0]]))
case("complex exp grad", lambda: grads(lambda c: torch.view_as_real(torch.exp(torch.view_as_complex(c))).sum(),
                                         [[0.3, 0.4]]))
case("complex .real grad", lambda: grads(lambda c: (torch.view_as_complex(c) * (1 + 2j)).real.sum(), [[0.3, 0.4]]))
case("complex backward non-real", lambda: torch.view_as_complex(torch.ones(1, 2, requires_grad=True)).sum().backward())
case("rfft grad", lambda: grads(lambda x: torch.fft.irfft(torch.fft.rfft(x, n=8) * 2, n=8)[:3].sum(), [1.0, 2.0, 3.0]))
case("share_memory_ requires_grad", lambda: torch.ones(2, requires_grad=True).share_memory_().is_shared())
case("share_memory_ nonleaf", lambda: (torch.ones(2, requires_grad=True) * 2).share_memory_().is_shared())
case("get_worker_info main", lambda: get_worker_info())
case("StackDataset mismatch", lambda: StackDataset(range(3), range(4)))
case("StackDataset both", lambda: StackDataset(range(3), a=range(3)))
case("StackDataset empty", lambda: StackDataset())
case("Subset tensor indices", lambda: [Subset(range(10), torch.tensor([3, 1]))[i] for i in range(2)])
case("Subset list index", lambda: Subset(range(10), [3, 1, 4])[[0, 2]])
case("ConcatDataset iterable", lambda: ConcatDataset([range(3), ChainDataset([])]))
case("ChainDataset not iterable", lambda: list(ChainDataset([range(3)])))
case("TensorDataset size mismatch", lambda: TensorDataset(z(3), z(4)))
case("TensorDataset empty", lambda: len(TensorDataset()))
case("random_split fractions tiny", lambda: [len(s) for s in random_split(range(3), [0.5, 0.5])])
case("random_split fractions 4", lambda: [len(s) for s in random_split(range(10), [0.1, 0.2, 0.3, 0.4])])
case("random_split zero frac", lambda: [len(s) for s in random_split(range(5), [0.0, 1.0])])
case("WeightedRandomSampler tensor num", lambda: len(WeightedRandomSampler([1.0], torch.tensor(3))))
case("WeightedRandomSampler nan", lambda: list(WeightedRandomSampler([float("nan"), 1.0], 2)))
case("WeightedRandomSampler inf", lambda: list(WeightedRandomSampler([float("inf"), 1.0], 2)))
case("BatchSampler bool size", lambda: BatchSampler(range(3), True, False))
case("BatchSampler float size", lambda: BatchSampler(range(3), 2.0, False))
case("RandomSampler gen", lambda: sorted(RandomSampler(range(4), generator=torch.Generator().manual_seed(0))))
case("SequentialSampler len", lambda: len(SequentialSampler(range(4))))
case("DataLoader batch_size 0", lambda: DataLoader(range(4), batch_size=0))
case("DataLoader batch_size None", lambda: list(DataLoader(range(3), batch_size=None)))
case("DataLoader drop_last no batch", lambda: DataLoader(range(3), batch_size=None, drop_last=True))
case("DataLoader iterable shuffle", lambda: DataLoader(ChainDataset([]), shuffle=True))
case("DataLoader iterable sampler", lambda: DataLoader(ChainDataset([]), sampler=[0]))
case("DataLoader collate raises", lambda: list(DataLoader(range(3), batch_size=2, collate_fn=lambda b: 1 / 0)))
case("DataLoader worker raises", lambda: list(DataLoader(Subset([1, 2], [0, 5]), num_workers=1)))
case("DataLoader bad context", lambda: DataLoader(range(3), num_workers=1, multiprocessing_context="nope"))
case("DataLoader context no workers", lambda: DataLoader(range(3), multiprocessing_context="spawn"))
case("DataLoader generator len", lambda: len(DataLoader(range(10), batch_size=3, shuffle=True, drop_last=True)))
case("collate mixed types", lambda: default_collate([1, 2.5]))
case("collate tensor and int", lambda: default_collate([torch.tensor(1), 2]))
case("collate bytes", lambda: default_collate([b"a", b"b"]))
case("collate None", lambda: default_collate([None, None]))
case("collate tuple lens", lambda: default_collate([(1, 2), (3,)]))
case("collate numpy str", lambda: default_collate([__import__("numpy").array(["a"])]))
case("collate numpy 0d", lambda: default_collate([__import__("numpy").array(1.5), __import__("numpy").array(2.5)]))
case("collate set", lambda: default_collate([{1}, {2}]))
case("collate dict nested", lambda: default_collate([{"a": {"b": 1}}, {"a": {"b": 2}}]))
case("collate float16 tensors", lambda: default_collate([torch.ones(1, dtype=torch.float16)] * 2).dtype)
case("Embedding padding_idx out", lambda: nn.Embedding(3, 2, padding_idx=3))
case("Embedding padding_idx neg", lambda: nn.Embedding(3, 2, padding_idx=-1).padding_idx)
case("Embedding index out", lambda: nn.Embedding(3, 2)(torch.tensor([3])))
case("Embedding negative index", lambda: nn.Embedding(3, 2)(torch.tensor([-1])))
case("Embedding float index", lambda: nn.Embedding(3, 2)(torch.tensor([1.0])))
case("Embedding int32 index", lambda: nn.Embedding(3, 2)(torch.tensor([1], dtype=torch.int32)).shape)
case("cross_entropy target oob", lambda: F.cross_entropy(z(2, 3), torch.tensor([0, 3])))
case("cross_entropy target negative", lambda: F.cross_entropy(z(2, 3), torch.tensor([0, -2])))
case("cross_entropy int input", lambda: F.cross_entropy(torch.zeros(2, 3, dtype=torch.long), torch.tensor([0, 1])))
case("cross_entropy weight size", lambda: F.cross_entropy(z(2, 3), torch.tensor([0, 1]), weight=o(2)))
case("cross_entropy 3d target mismatch", lambda: F.cross_entropy(z(2, 3, 4), torch.zeros(2, 5, dtype=torch.long)))
case("nll_loss empty", lambda: F.nll_loss(z(0, 3), torch.zeros(0, dtype=torch.long)).item())
case("nll_loss empty sum", lambda: F.nll_loss(z(0, 3), torch.zeros(0, dtype=torch.long), reduction="sum").item())
case("cross_entropy empty", lambda: F.cross_entropy(z(0, 3), torch.zeros(0, dtype=torch.long)).item())
case("mse empty", lambda: F.mse_loss(z(0), z(0)).item())
case("smooth_l1 empty", lambda: F.smooth_l1_loss(z(0), z(0)).item())
case("kl_div batchmean empty", lambda: F.kl_div(z(0, 3), z(0, 3), reduction="batchmean").item())
case("kl_div nan", lambda: F.kl_div(torch.tensor([float("nan")]), torch.tensor([0.5]), reduction="sum").item())
case("binary_cross_entropy out of range", lambda: F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])))
case("bce with logits pos_weight shape", lambda: F.binary_cross_entropy_with_logits(z(2, 3), z(2, 3), pos_weight=o(2)))
case("GroupNorm 0 batch", lambda: nn.GroupNorm(2, 4)(z(0, 4, 2)).shape)
case("GroupNorm nan", lambda: nn.GroupNorm(2, 4)(torch.full((1, 4, 2), float("nan"))).isnan().all().item())
case("GroupNorm 2d input", lambda: nn.GroupNorm(2, 4)(o(3, 4)).shape)
case("LayerNorm empty", lambda: nn.LayerNorm(3)(z(0, 3)).shape)
case("BatchNorm1d batch 1", lambda: nn.BatchNorm1d(3)(o(1, 3)))
case("BatchNorm2d batch 1 spatial", lambda: nn.BatchNorm2d(3)(o(1, 3, 2, 2)).sum().item())
case("BatchNorm1d 3d wrong ch", lambda: nn.BatchNorm1d(3)(o(2, 4, 5)))
case("Conv1d groups wrong", lambda: nn.Conv1d(4, 4, 3, groups=3))
case("Conv1d depthwise wrong ch", lambda: nn.Conv1d(4, 4, 3, groups=4)(z(1, 3, 5)))
case("Conv1d padding same stride", lambda: nn.Conv1d(4, 4, 3, padding="same", stride=2))
case("Conv2d kernel too big", lambda: nn.Conv2d(1, 1, 5)(z(1, 1, 3, 3)))
case("ConvTranspose2d output_padding", lambda: nn.ConvTranspose2d(1, 1, 3, stride=2, output_padding=2))
case("ConvTranspose2d output_size", lambda: nn.ConvTranspose2d(1, 1, 3, stride=2)(z(1, 1, 4, 4), output_size=[10, 10]))
case("Upsample nearest scale float", lambda: nn.Upsample(scale_factor=1.5)(z(1, 1, 4, 4)).shape)
case("GLU odd", lambda: nn.GLU(dim=-2)(z(2, 3, 4)))
case("SiLU int", lambda: F.silu(torch.tensor([1])))
case("softplus beta 0", lambda: F.softplus(torch.tensor([1.0]), beta=0).tolist())
case("gelu approximate bad", lambda: F.gelu(z(2), approximate="fast"))
case("linear 1d weight", lambda: F.linear(z(2, 3), z(3)).shape)
case("linear bias wrong", lambda: F.linear(z(2, 3), z(4, 3), z(3)))
case("bmm batch mismatch", lambda: torch.bmm(z(2, 3, 4), z(3, 4, 5)))
case("bmm 2d", lambda: torch.bmm(z(3, 4), z(4, 5)))
case("eye negative", lambda: torch.eye(-1))
case("norm dims p fro tuple", lambda: torch.norm(o(2, 3, 3), dim=(1, 2)).tolist())
case("norm p nuc dim", lambda: torch.norm(o(2, 3, 3), p="nuc", dim=(1, 2)).tolist())
case("norm bad p", lambda: torch.norm(o(3), p="bad"))
case("searchsorted unsorted ok", lambda: torch.searchsorted(torch.tensor([3.0, 1.0, 2.0]), torch.tensor([2.0])))
case("searchsorted dims mismatch", lambda: torch.searchsorted(z(2, 3), z(3, 1)))
case("searchsorted side right conflict", lambda: torch.searchsorted(z(3), z(1), right=False, side="right"))
case("searchsorted int float", lambda: torch.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([2.5])).tolist())
case("searchsorted sorter", lambda: torch.searchsorted(torch.tensor([3.0, 1.0, 2.0]), torch.tensor([2.5]),
                                                       sorter=torch.tensor([1, 2, 0])))
case("searchsorted nan", lambda: torch.searchsorted(torch.tensor([1.0, 2.0]), torch.tensor([float("nan")])).tolist())
case("searchsorted out_int32", lambda: torch.searchsorted(torch.tensor([1.0, 2.0]), torch.tensor([1.5]),
                                                         out_int32=True))
case("searchsorted scalar", lambda: torch.searchsorted(torch.tensor([1.0, 2.0]), 1.5))
case("meshgrid bad indexing", lambda: torch.meshgrid(z(2), z(3), indexing="yx"))
case("meshgrid list", lambda: [t.shape for t in torch.meshgrid([torch.arange(2), torch.arange(3)], indexing="xy")])
case("roll mismatch", lambda: torch.roll(z(2, 3), shifts=(1, 2), dims=(0,)))
case("roll no dims", lambda: torch.roll(torch.arange(4).view(2, 2), 1).tolist())
case("roll empty", lambda: torch.roll(z(0, 3), 1, 0).shape)
case("trunc_normal_ a>b", lambda: nn.init.trunc_normal_(z(3), a=2.0, b=-2.0).shape)
case("kaiming_uniform_ 1d", lambda: nn.init.kaiming_uniform_(z(3)))
case("kaiming bad mode", lambda: nn.init.kaiming_uniform_(z(3, 3), mode="fan"))
case("kaiming bad nonlinearity", lambda: nn.init.kaiming_uniform_(z(3, 3), nonlinearity="gelu"))
case("xavier 1d", lambda: nn.init.xavier_uniform_(z(3)))
case("orthogonal 1d", lambda: nn.init.orthogonal_(z(3)))
case("zeros_ int", lambda: nn.init.zeros_(torch.ones(2, dtype=torch.long)).tolist())
case("normal_ int", lambda: nn.init.normal_(torch.ones(2, dtype=torch.long)))
case("lerp_ weight tensor", lambda: o(2).lerp_(z(2), torch.tensor([0.5, 2.0])).tolist())
case("lerp_ dtype mismatch", lambda: o(2).lerp_(z(2, dtype=torch.float64), 0.5))
case("lerp_ int", lambda: torch.ones(2, dtype=torch.long).lerp_(torch.zeros(2, dtype=torch.long), 0.5))
case("clamp no bounds", lambda: torch.tensor([0.5]).clamp())
case("rsqrt zero", lambda: torch.rsqrt(torch.tensor([0.0, -1.0])).tolist())
case("type_as int", lambda: torch.tensor([1.7]).type_as(torch.tensor([1])).tolist())
case("type str", lambda: torch.tensor([1.7]).type("torch.IntTensor").tolist())
case("type bad str", lambda: torch.tensor([1.7]).type("torch.Nope"))
case("norm nuc 1d", lambda: torch.norm(o(3), p="nuc"))
case("norm nuc 3d no dim", lambda: torch.norm(o(2, 2, 2), p="nuc"))
case("norm nuc int dim", lambda: torch.norm(o(2, 2), p="nuc", dim=0))
case("norm nuc batched", lambda: torch.norm(o(2, 2, 2), p="nuc", dim=(1, 2)).tolist())
case("norm fro 3 dims", lambda: torch.norm(o(2, 2, 2), p="fro", dim=(0, 1, 2)))
