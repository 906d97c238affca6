# Hostile inputs on the APIs the session-19 programs use: pixel (un)shuffle, unfold, interpolate with
# antialias, EmbeddingBag offsets/per_sample_weights, sparse embeddings with SparseAdam, LBFGS,
# Categorical and MixtureSameFamily, checkpoint, pack_sequence/pad_sequence, ReduceLROnPlateau,
# CyclicLR, LambdaLR, TransformerEncoderLayer, scaled_dot_product_attention, the regression losses
# and set_printoptions, with wrong shapes/dtypes, empty batches, NaN/inf, huge sizes and bad kwargs.
# Each case prints its result or the exception's type and message.
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, MixtureSameFamily, Normal
from torch.nn.utils.rnn import pack_sequence, pad_sequence
from torch.utils.checkpoint import checkpoint

sdpa = F.scaled_dot_product_attention
halves = torch.tensor([0.5, 0.5])

warnings.simplefilter("ignore")


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


# --- pixel shuffle / unfold / interpolate
case("pixel_shuffle channels not divisible", lambda: F.pixel_shuffle(torch.zeros(1, 5, 2, 2), 2))
case("pixel_shuffle 2d input", lambda: F.pixel_shuffle(torch.zeros(4, 2), 2))
case("pixel_shuffle factor 0", lambda: F.pixel_shuffle(torch.zeros(1, 4, 2, 2), 0))
case("pixel_shuffle negative factor", lambda: F.pixel_shuffle(torch.zeros(1, 4, 2, 2), -2))
case("pixel_unshuffle size not divisible", lambda: F.pixel_unshuffle(torch.zeros(1, 1, 3, 4), 2))
case("pixel_shuffle empty batch", lambda: shape(F.pixel_shuffle(torch.zeros(0, 4, 2, 2), 2)))
case("pixel_shuffle int tensor", lambda: F.pixel_shuffle(torch.arange(16).view(1, 4, 2, 2), 2).sum())
case("pixel_shuffle 5d", lambda: shape(F.pixel_shuffle(torch.zeros(2, 3, 8, 2, 2), 2)))
case("unfold kernel too big", lambda: F.unfold(torch.zeros(1, 1, 3, 3), kernel_size=4))
case("unfold stride 0", lambda: F.unfold(torch.zeros(1, 1, 3, 3), kernel_size=2, stride=0))
case("unfold 5d", lambda: F.unfold(torch.zeros(1, 1, 1, 3, 3), kernel_size=2))
case("fold wrong blocks", lambda: F.fold(torch.zeros(1, 4, 5), output_size=(3, 3), kernel_size=2))
case("interpolate antialias nearest", lambda: F.interpolate(torch.zeros(1, 1, 4, 4), size=2, mode='nearest',
                                                            antialias=True))
case("interpolate antialias 3d", lambda: F.interpolate(torch.zeros(1, 1, 4), size=2, mode='linear', antialias=True))
case("interpolate size and scale", lambda: F.interpolate(torch.zeros(1, 1, 4, 4), size=2, scale_factor=2.0))
case("interpolate neither", lambda: F.interpolate(torch.zeros(1, 1, 4, 4)))
case("interpolate zero size", lambda: F.interpolate(torch.zeros(1, 1, 4, 4), size=(0, 2)))
case("interpolate align_corners nearest", lambda: F.interpolate(torch.zeros(1, 1, 4, 4), size=2, align_corners=True))
case("interpolate bad mode", lambda: F.interpolate(torch.zeros(1, 1, 4, 4), size=2, mode='cubic'))
case("interpolate nan", lambda: F.interpolate(torch.full((1, 1, 2, 2), float('nan')), size=3,
                                              mode='bilinear').isnan().all().item())
case("upsample bicubic 3d input", lambda: nn.Upsample(scale_factor=2, mode='bicubic')(torch.zeros(1, 1, 4)))
case("upsample bilinear 5d input", lambda: nn.Upsample(scale_factor=2, mode='bilinear')(torch.zeros(1, 1, 2, 2, 2)))
case("interpolate area 5d", lambda: F.interpolate(torch.arange(64.0).view(1, 1, 4, 4, 4), size=(2, 3, 1), mode='area'))
case("interpolate area 6d", lambda: F.interpolate(torch.zeros(1, 1, 2, 2, 2, 2), size=1, mode='area'))
# --- embedding bags and sparse
bag = nn.EmbeddingBag(10, 3, mode='sum')
case("bag offsets not starting at 0", lambda: bag(torch.tensor([1, 2, 3]), torch.tensor([1, 2])))
case("bag offsets beyond input", lambda: bag(torch.tensor([1, 2, 3]), torch.tensor([0, 5])))
case("bag index out of range", lambda: bag(torch.tensor([1, 12, 3]), torch.tensor([0, 1])))
case("bag negative index", lambda: bag(torch.tensor([1, -1, 3]), torch.tensor([0, 1])))
case("bag 2d input with offsets", lambda: bag(torch.tensor([[1, 2]]), torch.tensor([0])))
case("bag 1d without offsets", lambda: bag(torch.tensor([1, 2])))
case("bag float input", lambda: bag(torch.tensor([1.0, 2.0]), torch.tensor([0])))
case("bag psw wrong shape", lambda: bag(torch.tensor([1, 2, 3]), torch.tensor([0, 1]),
                                        per_sample_weights=torch.ones(2)))
case("bag psw with mean", lambda: nn.EmbeddingBag(10, 3, mode='mean')(torch.tensor([1, 2]), torch.tensor([0]),
                                                                       per_sample_weights=torch.ones(2)))
case("bag psw int dtype", lambda: bag(torch.tensor([1, 2]), torch.tensor([0]),
                                      per_sample_weights=torch.ones(2, dtype=torch.long)))
case("bag bad mode", lambda: nn.EmbeddingBag(10, 3, mode='median'))
case("bag empty input", lambda: shape(bag(torch.tensor([], dtype=torch.long), torch.tensor([0, 0]))))
case("bag include_last_offset", lambda: shape(nn.EmbeddingBag(10, 3, include_last_offset=True)(
    torch.tensor([1, 2, 3]), torch.tensor([0, 1, 3]))))
case("bag offsets int32 input int64", lambda: shape(bag(torch.tensor([1, 2, 3]),
                                                        torch.tensor([0, 1], dtype=torch.int32))))
case("embedding padding_idx out of range", lambda: nn.Embedding(5, 2, padding_idx=5))
case("embedding negative num", lambda: nn.Embedding(-1, 2))
case("embedding from_pretrained 1d", lambda: nn.Embedding.from_pretrained(torch.ones(4)))
case("embedding max_norm negative", lambda: shape(nn.Embedding(5, 2, max_norm=-1.0)(torch.tensor([1]))))
emb = nn.Embedding(5, 2, sparse=True)
case("sparse adam with dense param", lambda: torch.optim.SparseAdam([nn.Parameter(torch.ones(2).to_sparse())]))
case("sparse adam lr negative", lambda: torch.optim.SparseAdam(emb.parameters(), lr=-1.0))
case("sparse adam beta out of range", lambda: torch.optim.SparseAdam(emb.parameters(), betas=(1.0, 0.9)))


def sparse_grad_to_adam():
    emb.zero_grad()
    emb(torch.tensor([1])).sum().backward()
    torch.optim.Adam(emb.parameters()).step()


case("adam with sparse grad", sparse_grad_to_adam)


def sparse_grad_weight_decay():
    emb.zero_grad()
    emb(torch.tensor([1])).sum().backward()
    torch.optim.SGD(emb.parameters(), lr=0.1, weight_decay=0.1).step()


case("sgd sparse grad weight_decay", sparse_grad_weight_decay)


def sparse_grad_maximize_decay():
    emb.zero_grad()
    emb(torch.tensor([1])).sum().backward()
    torch.optim.SGD(emb.parameters(), lr=0.1, weight_decay=0.1, maximize=True).step()


case("sgd sparse grad maximize weight_decay", sparse_grad_maximize_decay)


def sparse_grad_momentum():
    e = nn.Embedding(4, 2, sparse=True)
    with torch.no_grad():
        e.weight.copy_(torch.arange(8.0).view(4, 2))
    opt = torch.optim.SGD(e.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        e(torch.tensor([1, 1, 3])).sum().backward()
        opt.step()
    return e.weight


case("sgd sparse grad momentum", sparse_grad_momentum)
case("dense add sparse alpha", lambda: torch.ones(2, 2).add(torch.tensor([[0., 1.], [2., 0.]]).to_sparse(), alpha=0.5))
# --- LBFGS
w = nn.Parameter(torch.ones(3))
case("lbfgs no closure", lambda: torch.optim.LBFGS([w]).step())
case("lbfgs two groups", lambda: torch.optim.LBFGS([{'params': [w]}, {'params': [nn.Parameter(torch.ones(1))]}]))
case("lbfgs bad line search", lambda: torch.optim.LBFGS([w], line_search_fn='armijo').step(lambda: (w ** 2).sum()))


def lbfgs_nan():
    p = nn.Parameter(torch.ones(2))
    opt = torch.optim.LBFGS([p], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = (p * float('nan')).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    return (loss.isnan().item(), p.isnan().tolist())


case("lbfgs nan loss", lbfgs_nan)


def lbfgs_zero_grad():
    p = nn.Parameter(torch.zeros(2))
    opt = torch.optim.LBFGS([p], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss
    return (opt.step(closure).item(), p.tolist(), opt.state[p]['n_iter'], opt.state[p]['func_evals'])


case("lbfgs already optimal", lbfgs_zero_grad)
case("lbfgs lr zero", lambda: torch.optim.LBFGS([w], lr=0.0).defaults['lr'])
# --- distributions
case("categorical probs negative", lambda: Categorical(probs=torch.tensor([0.5, -0.5])))
case("categorical probs nan", lambda: Categorical(probs=torch.tensor([0.5, float('nan')])))
case("categorical logits inf", lambda: Categorical(logits=torch.tensor([0.0, float('inf')])).probs)
case("categorical both", lambda: Categorical(probs=torch.tensor([0.5, 0.5]), logits=torch.tensor([0.0, 0.0])))
case("categorical neither", lambda: Categorical())
case("categorical scalar probs", lambda: Categorical(probs=torch.tensor(1.0)))
case("categorical log_prob out of support", lambda: Categorical(probs=halves).log_prob(torch.tensor(2)))
case("categorical log_prob float value", lambda: Categorical(probs=halves).log_prob(torch.tensor(1.0)))
case("categorical unnormalised", lambda: Categorical(probs=torch.tensor([1.0, 3.0])).log_prob(torch.tensor(1)))
case("categorical zero probs entropy", lambda: Categorical(probs=torch.tensor([0.0, 0.0, 1.0])).entropy())
case("categorical validate off", lambda: Categorical(probs=torch.tensor([0.5, -0.5]), validate_args=False).probs)
case("categorical log_prob batch mismatch", lambda: Categorical(probs=torch.ones(2, 3) / 3)
     .log_prob(torch.tensor([0, 1, 2])))
case("mixture batch mismatch", lambda: MixtureSameFamily(Categorical(probs=torch.ones(2, 3) / 3),
                                                          Normal(torch.zeros(2, 4), torch.ones(2, 4))))
case("mixture not categorical", lambda: MixtureSameFamily(Normal(0.0, 1.0), Normal(torch.zeros(3), torch.ones(3))))
case("normal negative scale", lambda: Normal(0.0, -1.0))
case("normal zero scale log_prob", lambda: Normal(0.0, 0.0, validate_args=False).log_prob(torch.tensor(0.0)))
# --- checkpoint
lin = nn.Linear(2, 2)
case("checkpoint no use_reentrant", lambda: shape(checkpoint(lin, torch.ones(1, 2))))
case("checkpoint bad kwarg reentrant", lambda: checkpoint(lin, torch.ones(1, 2), use_reentrant=True, foo=1))
case("checkpoint non-callable", lambda: checkpoint(3, torch.ones(1, 2), use_reentrant=False))
case("checkpoint wrong shape", lambda: checkpoint(lin, torch.ones(1, 3), use_reentrant=False))
case("checkpoint no tensor input reentrant", lambda: checkpoint(lambda: torch.ones(1), use_reentrant=True))
# --- packing
case("pack_sequence empty list", lambda: pack_sequence([]))
case("pack_sequence unsorted enforce", lambda: pack_sequence([torch.ones(2), torch.ones(3)]))
case("pack_sequence zero length", lambda: pack_sequence([torch.ones(2), torch.ones(0)], enforce_sorted=False))
case("pack_sequence dtype mix", lambda: pack_sequence([torch.ones(3), torch.ones(2, dtype=torch.long)]).data.dtype)
case("pad_sequence trailing mismatch", lambda: pad_sequence([torch.ones(2, 3), torch.ones(2, 4)]))
case("pad_sequence empty list", lambda: pad_sequence([]))
case("pad_sequence bad side", lambda: pad_sequence([torch.ones(2)], padding_side='middle'))
case("pad_sequence 0-d", lambda: pad_sequence([torch.tensor(1.0), torch.tensor(2.0)]))
case("pad_sequence later 0-d", lambda: pad_sequence([torch.ones(2), torch.tensor(2.0)]))
case("size of 0-d", lambda: torch.tensor(1.0).size(0))
case("stride of 0-d", lambda: torch.tensor(1.0).stride(-1))
case("size of 0-d bad dim", lambda: torch.tensor(1.0).size(3))
# --- schedulers
opt = torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1, momentum=0.9)
case("plateau bad mode", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='avg'))
case("plateau factor 1", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0))
case("plateau bad threshold mode", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt, threshold_mode='pct'))
case("plateau min_lr wrong length", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2]))
case("plateau step nan", lambda: (torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0).step(float('nan')),
                                  opt.param_groups[0]['lr'])[1])
case("plateau step tensor", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt).step(torch.tensor(1.0)))
case("plateau step string", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(opt).step('1.0'))
case("cyclic bad mode", lambda: torch.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode='sine'))
case("cyclic momentum without momentum", lambda: torch.optim.lr_scheduler.CyclicLR(
    torch.optim.Adagrad([nn.Parameter(torch.ones(1))]), 0.01, 0.1))
case("lambda lr wrong count", lambda: torch.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0, lambda e: 2.0]))
case("lambda lr returns string", lambda: torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 'x'))
case("warm restarts T_0 zero", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0))
case("warm restarts T_mult float", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5))
case("warm restarts negative epoch", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2).step(-1))
case("multistep unsorted milestones", lambda: torch.optim.lr_scheduler.MultiStepLR(opt, [5, 2]).milestones)
# --- transformer and attention
case("encoder layer d_model not divisible", lambda: nn.TransformerEncoderLayer(10, 3))
case("encoder layer bad activation", lambda: nn.TransformerEncoderLayer(8, 2, activation='swish'))
enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True)
case("encoder layer wrong width", lambda: enc(torch.zeros(2, 3, 6)))
case("encoder layer empty batch", lambda: shape(enc(torch.zeros(0, 3, 8))))
case("encoder layer bad mask shape", lambda: enc(torch.zeros(2, 3, 8), src_mask=torch.zeros(2, 2)))
case("encoder layer padding mask float", lambda: shape(enc(torch.zeros(2, 3, 8),
                                                           src_key_padding_mask=torch.zeros(2, 3))))
all_masked = torch.ones(1, 2, dtype=torch.bool)
case("encoder layer all masked", lambda: enc(torch.ones(1, 2, 8), src_key_padding_mask=all_masked).isnan().all().item())
q = torch.zeros(1, 2, 4, 8)
case("sdpa causal with mask", lambda: sdpa(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool),
                                                                     is_causal=True))
case("sdpa head dim mismatch", lambda: sdpa(q, q, torch.zeros(1, 2, 4, 6)).shape)
case("sdpa q k dim mismatch", lambda: sdpa(q, torch.zeros(1, 2, 4, 6), q))
case("sdpa int inputs", lambda: sdpa(q.long(), q.long(), q.long()))
case("sdpa mixed dtypes", lambda: sdpa(q, q.double(), q))
case("sdpa dropout out of range", lambda: shape(sdpa(q, q, q, dropout_p=1.5)))
case("sdpa causal q longer than k", lambda: sdpa(torch.ones(1, 1, 3, 2), torch.ones(1, 1, 2, 2),
                                                                           torch.ones(1, 1, 2, 2), is_causal=True))
case("sdpa scale zero", lambda: sdpa(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2),
                                                               torch.arange(4.0).view(1, 1, 2, 2), scale=0.0))
case("sdpa enable_gqa mismatch", lambda: sdpa(torch.zeros(1, 4, 2, 8), torch.zeros(1, 3, 2, 8),
                                                                        torch.zeros(1, 3, 2, 8), enable_gqa=True))
# --- losses
case("huber negative delta", lambda: F.huber_loss(torch.zeros(2), torch.ones(2), delta=-1.0))
case("huber zero delta", lambda: F.huber_loss(torch.zeros(2), torch.ones(2), delta=0.0))
case("smoothl1 negative beta", lambda: F.smooth_l1_loss(torch.zeros(2), torch.ones(2), beta=-1.0))
case("huber shape broadcast", lambda: F.huber_loss(torch.zeros(3, 1), torch.ones(3)))
case("huber int target", lambda: F.huber_loss(torch.zeros(2), torch.ones(2, dtype=torch.long)))
case("huber bad reduction", lambda: F.huber_loss(torch.zeros(2), torch.ones(2), reduction='avg'))
case("gaussian nll negative var", lambda: F.gaussian_nll_loss(torch.zeros(2), torch.ones(2), -torch.ones(2)))
case("gaussian nll var wrong shape", lambda: F.gaussian_nll_loss(torch.zeros(2, 3), torch.ones(2, 3), torch.ones(3, 2)))
case("gaussian nll var one column", lambda: F.gaussian_nll_loss(torch.zeros(2, 3), torch.ones(2, 3), torch.ones(2, 1)))
case("gaussian nll zero var", lambda: F.gaussian_nll_loss(torch.zeros(2), torch.ones(2), torch.zeros(2)))
case("poisson nll empty", lambda: F.poisson_nll_loss(torch.zeros(0), torch.zeros(0)))
case("poisson nll shape mismatch", lambda: F.poisson_nll_loss(torch.zeros(3), torch.zeros(2)))
case("triplet wrong dims", lambda: F.triplet_margin_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 4)))
case("triplet 3d", lambda: F.triplet_margin_loss(torch.zeros(2, 3, 1), torch.zeros(2, 3, 1), torch.zeros(2, 3, 1)))
case("triplet negative margin", lambda: F.triplet_margin_loss(torch.zeros(2, 3), torch.ones(2, 3), torch.ones(2, 3),
                                                              margin=-1.0))
case("cosine embedding bad target", lambda: F.cosine_embedding_loss(torch.ones(2, 3), torch.ones(2, 3), torch.ones(3)))
case("cosine embedding 3d", lambda: F.cosine_embedding_loss(torch.ones(1, 2, 3), torch.ones(1, 2, 3), torch.ones(1)))
case("margin ranking mismatch", lambda: F.margin_ranking_loss(torch.ones(3), torch.ones(2), torch.ones(3)))
case("pairwise distance mismatch", lambda: F.pairwise_distance(torch.ones(2, 3), torch.ones(2, 4)))
case("cdist different feature dims", lambda: torch.cdist(torch.ones(2, 3), torch.ones(2, 4)))
case("cdist negative p", lambda: torch.cdist(torch.ones(2, 3), torch.ones(2, 3), p=-1.0))
case("cdist int", lambda: torch.cdist(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)))
# --- printing
case("printoptions bad profile", lambda: torch.set_printoptions(profile='tiny'))
case("printoptions bad kwarg", lambda: torch.set_printoptions(precison=3))
case("printoptions negative precision", lambda: (torch.set_printoptions(precision=-1), str(torch.tensor([1.5]))))
torch.set_printoptions(profile='default')
case("huge repr summarised", lambda: len(repr(torch.zeros(10 ** 6))))
case("huge size", lambda: torch.empty(2 ** 62, 2 ** 4))
case("negative size", lambda: torch.zeros(2, -1))
