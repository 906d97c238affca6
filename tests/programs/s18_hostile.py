# Hostile inputs on the APIs the session-18 programs use: recurrent/attention layers, packing,
# schedulers, clipping, parametrizations, torch.func, AveragedModel, autocast, checkpoints, losses,
# with wrong shapes/dtypes, empty batches, NaN/inf and huge sizes. Each case prints its result or the
# exception's type and message; ember must raise what torch raises and compute what it computes.
import io
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

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


# --- recurrent layers
gru = nn.GRU(3, 4, batch_first=True)
lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
case("gru empty batch", lambda: shape(gru(torch.zeros(0, 5, 3))[0]))
case("gru zero length", lambda: shape(gru(torch.zeros(2, 0, 3))[0]))
case("gru 4d input", lambda: gru(torch.zeros(1, 2, 5, 3)))
case("gru int input", lambda: gru(torch.zeros(2, 5, 3, dtype=torch.long)))
case("gru double input", lambda: gru(torch.zeros(2, 5, 3, dtype=torch.double)))
case("gru hidden wrong batch", lambda: gru(torch.zeros(2, 5, 3), torch.zeros(1, 3, 4)))
case("gru hidden 2d for batched", lambda: gru(torch.zeros(2, 5, 3), torch.zeros(2, 4)))
case("lstm hidden tuple of one", lambda: lstm(torch.zeros(2, 5, 3), (torch.zeros(2, 2, 4),)))
case("lstm hidden layers wrong", lambda: lstm(torch.zeros(2, 5, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))))
case("lstm nan input", lambda: lstm(torch.full((1, 2, 3), float('nan')))[0].isnan().all().item())
case("lstm proj_size ge hidden", lambda: nn.LSTM(3, 4, proj_size=4))
case("rnn bad nonlinearity", lambda: nn.RNN(3, 4, nonlinearity='gelu'))
case("gru dropout out of range", lambda: nn.GRU(3, 4, dropout=1.5))
case("gru zero hidden", lambda: nn.GRU(3, 0))
case("gru num_layers zero", lambda: nn.GRU(3, 4, num_layers=0))
case("gru float hidden size", lambda: nn.GRU(3, 4.0))
case("grucell wrong input", lambda: nn.GRUCell(3, 4)(torch.zeros(2, 5)))
case("lstmcell 3d input", lambda: nn.LSTMCell(3, 4)(torch.zeros(1, 2, 3)))
# --- packing
case("pack lengths not sorted", lambda: pack_padded_sequence(torch.zeros(3, 5, 2), [2, 5, 3], batch_first=True))
case("pack zero length", lambda: pack_padded_sequence(torch.zeros(3, 5, 2), [5, 0, 3], batch_first=True,
                                                      enforce_sorted=False))
case("pack lengths wrong count", lambda: pack_padded_sequence(torch.zeros(3, 5, 2), [5, 2], batch_first=True))
case("pack lengths 2d tensor", lambda: pack_padded_sequence(torch.zeros(3, 5, 2), torch.tensor([[5, 2, 1]]),
                                                            batch_first=True))
case("pack lengths float tensor", lambda: pack_padded_sequence(torch.zeros(3, 5, 2), torch.tensor([5., 2., 1.]),
                                                               batch_first=True).batch_sizes)
case("pad_sequence empty list", lambda: pad_sequence([]))
case("pad_sequence mismatched trailing", lambda: pad_sequence([torch.zeros(2, 3), torch.zeros(2, 4)]))
case("pad_sequence left", lambda: pad_sequence([torch.ones(1), torch.ones(3)], batch_first=True,
                                               padding_side='left'))
case("pad_sequence bad side", lambda: pad_sequence([torch.ones(1)], padding_side='middle'))
# --- attention / transformer
mha = nn.MultiheadAttention(8, 2, batch_first=True)
q = torch.zeros(2, 3, 8)
case("mha embed not divisible", lambda: nn.MultiheadAttention(7, 2))
case("mha kpm wrong shape", lambda: mha(q, q, q, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)))
case("mha kpm int", lambda: shape(mha(q, q, q, key_padding_mask=torch.zeros(2, 3, dtype=torch.long))[0]))
case("mha attn_mask wrong 2d", lambda: mha(q, q, q, attn_mask=torch.zeros(3, 4)))
case("mha attn_mask wrong 3d", lambda: mha(q, q, q, attn_mask=torch.zeros(3, 3, 3)))
case("mha attn_mask int", lambda: mha(q, q, q, attn_mask=torch.zeros(3, 3, dtype=torch.long)))
case("mha all keys masked", lambda: mha(q, q, q, key_padding_mask=torch.ones(2, 3, dtype=torch.bool))[0]
     .isnan().all().item())
case("mha key value length differ", lambda: mha(q, torch.zeros(2, 4, 8), torch.zeros(2, 5, 8)))
case("mha query 4d", lambda: mha(torch.zeros(1, 2, 3, 8), q, q))
case("mha empty batch", lambda: shape(mha(torch.zeros(0, 3, 8), torch.zeros(0, 3, 8), torch.zeros(0, 3, 8))[0]))
case("mha is_causal without mask", lambda: mha(q, q, q, is_causal=True))
case("encoder layer bad activation", lambda: nn.TransformerEncoderLayer(8, 2, activation='swish'))
case("encoder layer nhead not divisor", lambda: nn.TransformerEncoderLayer(8, 3))
case("encoder kpm wrong batch", lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, batch_first=True),
                                                               1, enable_nested_tensor=False)(
    q, src_key_padding_mask=torch.zeros(3, 3, dtype=torch.bool)))
case("square mask zero", lambda: nn.Transformer.generate_square_subsequent_mask(0))
case("sdpa dropout train", lambda: shape(F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)))
case("sdpa causal and mask", lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(3, 3),
                                                                    is_causal=True))
case("sdpa bool mask all false", lambda: F.scaled_dot_product_attention(
    q, q, q, attn_mask=torch.zeros(3, 3, dtype=torch.bool)).isnan().all().item())
# --- embeddings / losses
case("embedding negative index", lambda: nn.Embedding(5, 2)(torch.tensor([-1])))
case("embedding padding_idx out of range", lambda: nn.Embedding(5, 2, padding_idx=5))
case("embedding max_norm", lambda: nn.Embedding(5, 2, max_norm=1.0)(torch.tensor([1, 1])).norm(dim=1)
     .le(1.0001).all().item())
case("nll ignore_index all", lambda: F.nll_loss(torch.zeros(2, 3), torch.tensor([-100, -100])))
case("cross_entropy empty", lambda: F.cross_entropy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)))
case("cross_entropy empty sum", lambda: F.cross_entropy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long),
                                                        reduction='sum'))
case("cross_entropy probs wrong shape", lambda: F.cross_entropy(torch.zeros(2, 3), torch.zeros(2, 4)))
case("cross_entropy label_smoothing bad", lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1]),
                                                                  label_smoothing=1.5))
case("cross_entropy 3d target mismatch", lambda: F.cross_entropy(torch.zeros(2, 3, 4), torch.zeros(2, 5,
                                                                                                    dtype=torch.long)))
case("bce target out of range", lambda: F.binary_cross_entropy(torch.full((2,), 0.5), torch.tensor([0.0, 2.0])))
case("bce input out of range", lambda: F.binary_cross_entropy(torch.tensor([1.5, 0.5]), torch.tensor([0.0, 1.0])))
case("bce with logits shape", lambda: F.binary_cross_entropy_with_logits(torch.zeros(2, 1), torch.zeros(2)))
case("bce weight broadcast fail", lambda: F.binary_cross_entropy(torch.full((2, 3), 0.5), torch.zeros(2, 3),
                                                                 weight=torch.ones(2)))
case("huber negative delta", lambda: F.huber_loss(torch.zeros(2), torch.ones(2), delta=-1.0))
case("kl_div log_target", lambda: F.kl_div(torch.zeros(2, 3), torch.zeros(2, 3), reduction='batchmean',
                                           log_target=True))
case("nll bad reduction", lambda: F.nll_loss(torch.zeros(2, 3), torch.tensor([0, 1]), reduction='avg'))
case("mse inf", lambda: F.mse_loss(torch.tensor([float('inf')]), torch.tensor([float('inf')])))
# --- optimizers / schedulers / clipping
p = nn.Parameter(torch.ones(3))
case("sgd negative lr", lambda: torch.optim.SGD([p], lr=-0.1))
case("sgd nesterov no momentum", lambda: torch.optim.SGD([p], lr=0.1, nesterov=True))
case("adam bad beta", lambda: torch.optim.Adam([p], betas=(1.0, 0.999)))
case("adamw negative eps", lambda: torch.optim.AdamW([p], eps=-1e-8))
case("optimizer empty params", lambda: torch.optim.SGD([], lr=0.1))
case("optimizer duplicate params", lambda: len(torch.optim.SGD([p, p], lr=0.1).param_groups[0]['params']))
case("optimizer tensor not leaf", lambda: torch.optim.SGD([p * 2], lr=0.1))
case("optimizer single tensor", lambda: torch.optim.SGD(p, lr=0.1))
case("onecycle no total", lambda: torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p], lr=0.1), max_lr=1.0))
case("onecycle bad pct", lambda: torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p], lr=0.1), max_lr=1.0,
                                                                     total_steps=5, pct_start=1.5))
case("onecycle bad strategy", lambda: torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([p], lr=0.1), max_lr=1.0,
                                                                          total_steps=5, anneal_strategy='exp'))
case("onecycle max_lr list wrong len", lambda: torch.optim.lr_scheduler.OneCycleLR(
    torch.optim.SGD([p], lr=0.1), max_lr=[1.0, 2.0], total_steps=5))
case("warm restarts T_0 zero", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([p], lr=0.1), T_0=0))
case("warm restarts T_mult float", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([p], lr=0.1), T_0=2, T_mult=1.5))
case("warm restarts negative epoch", lambda: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
    torch.optim.SGD([p], lr=0.1), T_0=2).step(-1))
case("steplr no step_size", lambda: torch.optim.lr_scheduler.StepLR(torch.optim.SGD([p], lr=0.1)))
case("sequential bad milestones", lambda: torch.optim.lr_scheduler.SequentialLR(
    torch.optim.SGD([p], lr=0.1), [torch.optim.lr_scheduler.ConstantLR(torch.optim.SGD([p], lr=0.1))], [1]))
case("plateau bad mode", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([p], lr=0.1),
                                                                             mode='avg'))
case("plateau factor ge 1", lambda: torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([p], lr=0.1),
                                                                                factor=1.0))
case("lambdalr wrong count", lambda: torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([p], lr=0.1),
                                                                        [lambda e: 1, lambda e: 2]))
case("scheduler not optimizer", lambda: torch.optim.lr_scheduler.StepLR([p], step_size=1))


def clip_nan():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.tensor([float('nan'), 1.0])
    return nn.utils.clip_grad_norm_([q1], 1.0, error_if_nonfinite=True)


def clip_nan_quiet():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.tensor([float('nan'), 1.0])
    n = nn.utils.clip_grad_norm_([q1], 1.0)
    return math.isnan(n.item()), q1.grad.isnan().tolist()


def clip_no_grads():
    return nn.utils.clip_grad_norm_([nn.Parameter(torch.ones(2))], 1.0)


def clip_zero_norm():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.zeros(2)
    return nn.utils.clip_grad_norm_(q1, 1.0), q1.grad.tolist()


def clip_inf_norm():
    q1 = nn.Parameter(torch.ones(3))
    q1.grad = torch.tensor([3.0, -4.0, 1.0])
    return nn.utils.clip_grad_norm_(q1, 2.0, norm_type='inf'), q1.grad.tolist()


def clip_value_negative():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.tensor([3.0, -4.0])
    nn.utils.clip_grad_value_(q1, -1.0)
    return q1.grad


case("clip nan error", clip_nan)
case("clip nan quiet", clip_nan_quiet)
case("clip no grads", clip_no_grads)
case("clip zero norm", clip_zero_norm)
case("clip inf norm str", clip_inf_norm)
case("clip value negative", clip_value_negative)
case("clip norm negative max", lambda: nn.utils.clip_grad_norm_([], -1.0))
# --- parametrizations
case("weight_norm missing name", lambda: nn.utils.parametrizations.weight_norm(nn.Linear(2, 2), name='w'))
case("spectral_norm zero iters", lambda: nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2),
                                                                                 n_power_iterations=0))
case("spectral_norm on 1d", lambda: nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2), name='bias'))
case("orthogonal on 1d", lambda: nn.utils.parametrizations.orthogonal(nn.Linear(2, 2), name='bias'))
case("orthogonal bad map", lambda: nn.utils.parametrizations.orthogonal(nn.Linear(2, 2), orthogonal_map='qr'))
case("remove unparametrized", lambda: nn.utils.parametrize.remove_parametrizations(nn.Linear(2, 2), 'weight'))
case("parametrization changes shape", lambda: nn.utils.parametrize.register_parametrization(
    nn.Linear(2, 3), 'weight', nn.Flatten(0)))
case("parametrization on buffer", lambda: type(nn.utils.parametrize.register_parametrization(
    nn.BatchNorm1d(2), 'running_mean', nn.Identity())).__name__)
case("parametrization missing tensor", lambda: nn.utils.parametrize.register_parametrization(
    nn.Linear(2, 2), 'nope', nn.Identity()))
# --- torch.func
case("grad non scalar", lambda: torch.func.grad(lambda x: x * 2)(torch.ones(3)))
case("grad int input", lambda: torch.func.grad(lambda x: x.sum())(torch.ones(3, dtype=torch.long)))
case("grad non tensor output", lambda: torch.func.grad(lambda x: 1.0)(torch.ones(3)))
case("grad has_aux not tuple", lambda: torch.func.grad(lambda x: x.sum(), has_aux=True)(torch.ones(3)))
case("grad argnums out of range", lambda: torch.func.grad(lambda x: x.sum(), argnums=2)(torch.ones(3)))
case("vmap mismatched sizes", lambda: torch.func.vmap(torch.add)(torch.ones(2, 3), torch.ones(3, 3)))
case("vmap in_dims too big", lambda: torch.func.vmap(torch.sin, in_dims=2)(torch.ones(2, 3)))
case("vmap in_dims wrong len", lambda: torch.func.vmap(torch.add, in_dims=(0,))(torch.ones(2), torch.ones(2)))
case("vmap no tensors", lambda: torch.func.vmap(lambda x: x)(3))
case("vmap item", lambda: torch.func.vmap(lambda x: x.sum().item())(torch.ones(2, 3)))
case("vmap empty batch", lambda: torch.func.vmap(torch.sin)(torch.ones(0, 3)))
case("vmap chunk_size zero", lambda: torch.func.vmap(torch.sin, chunk_size=0)(torch.ones(2, 3)))
case("vmap randomness error", lambda: torch.func.vmap(lambda x: x + torch.rand(3))(torch.ones(2, 3)))
case("vmap randomness bad", lambda: torch.func.vmap(torch.sin, randomness='maybe')(torch.ones(2, 3)))
case("functional_call missing key", lambda: shape(torch.func.functional_call(
    nn.Linear(2, 2), {'weight': torch.ones(2, 2)}, (torch.ones(1, 2),))))
case("functional_call unexpected key", lambda: torch.func.functional_call(nn.Linear(2, 2), {'nope': torch.ones(2)},
                                                                           (torch.ones(1, 2),), strict=True))
case("functional_call wrong shape", lambda: torch.func.functional_call(nn.Linear(2, 2), {'weight': torch.ones(3, 3)},
                                                                        (torch.ones(1, 2),)))
case("jacrev int output", lambda: torch.func.jacrev(lambda x: x.long())(torch.ones(2)))
case("stack_module_state empty", lambda: torch.func.stack_module_state([]))
case("stack_module_state mismatched", lambda: torch.func.stack_module_state([nn.Linear(2, 2), nn.Linear(2, 3)]))
# --- swa / ema
case("averaged model update before", lambda: torch.optim.swa_utils.AveragedModel(nn.Linear(2, 2)).n_averaged.item())
case("swalr bad strategy", lambda: torch.optim.swa_utils.SWALR(torch.optim.SGD([p], lr=0.1), swa_lr=0.05,
                                                               anneal_strategy='exp'))
case("swalr negative anneal", lambda: torch.optim.swa_utils.SWALR(torch.optim.SGD([p], lr=0.1), swa_lr=0.05,
                                                                  anneal_epochs=-1))
case("foreach_lerp length mismatch", lambda: torch._foreach_lerp_([torch.ones(2)], [torch.ones(2), torch.ones(2)], 0.5))
case("foreach_lerp shape mismatch", lambda: torch._foreach_lerp_([torch.ones(2)], [torch.ones(3)], 0.5))
case("foreach_add empty", lambda: torch._foreach_add([], []))
case("foreach_lerp int", lambda: torch._foreach_lerp_([torch.ones(2, dtype=torch.long)],
                                                      [torch.ones(2, dtype=torch.long)], 0.5))
case("foreach_norm ord", lambda: [t.item() for t in torch._foreach_norm([torch.tensor([3.0, -4.0])], ord=1)])
# --- autocast
case("autocast cpu float16 dtype", lambda: str(torch.autocast('cpu', dtype=torch.float16).fast_dtype))


def autocast_float64():
    with torch.autocast('cpu', dtype=torch.float64):
        return torch.is_autocast_enabled('cpu'), (torch.ones(2, 2) @ torch.ones(2, 2)).dtype


case("autocast cpu float64", autocast_float64)
case("autocast no device", lambda: torch.autocast(dtype=torch.bfloat16))


def autocast_int():
    with torch.autocast('cpu', dtype=torch.bfloat16):
        return (torch.ones(2, 2, dtype=torch.long) @ torch.ones(2, 2, dtype=torch.long)).dtype


def autocast_double():
    with torch.autocast('cpu', dtype=torch.bfloat16):
        return (torch.ones(2, 2, dtype=torch.double) @ torch.ones(2, 2, dtype=torch.double)).dtype


def autocast_mixed_cat():
    with torch.autocast('cpu', dtype=torch.bfloat16):
        return torch.cat([torch.ones(2, dtype=torch.bfloat16), torch.ones(2)]).dtype


case("autocast int matmul", autocast_int)
case("autocast double matmul", autocast_double)
case("autocast mixed cat", autocast_mixed_cat)
# --- checkpoints
case("save to closed file", lambda: torch.save({}, io.BytesIO().__class__()) or 'ok')


def load_tensor_wrong_sd():
    m = nn.Linear(2, 2)
    m.load_state_dict({'weight': torch.ones(3, 2), 'bias': torch.ones(2)})


def load_sd_not_mapping():
    nn.Linear(2, 2).load_state_dict([torch.ones(2, 2)])


def load_sd_dtype():
    m = nn.Linear(2, 2)
    m.load_state_dict({'weight': torch.ones(2, 2, dtype=torch.double), 'bias': torch.ones(2, dtype=torch.long)})
    return str(m.weight.dtype), str(m.bias.dtype), m.bias.tolist()


def opt_load_wrong_groups():
    o = torch.optim.SGD([p], lr=0.1)
    sd = torch.optim.SGD([{'params': [p]}, {'params': [nn.Parameter(torch.ones(1))]}], lr=0.1).state_dict()
    o.load_state_dict(sd)


def opt_load_wrong_sizes():
    o = torch.optim.SGD([p], lr=0.1)
    sd = torch.optim.SGD([p, nn.Parameter(torch.ones(1))], lr=0.1).state_dict()
    o.load_state_dict(sd)


def load_weights_only_tuple_dtype():
    buf = io.BytesIO()
    torch.save({'a': (torch.ones(1), 'x', 1.5, None, True, torch.int8, torch.Size([2]))}, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)['a'][1:]


case("load_state_dict wrong shape", load_tensor_wrong_sd)
case("load_state_dict not mapping", load_sd_not_mapping)
case("load_state_dict dtype cast", load_sd_dtype)
case("optimizer load wrong groups", opt_load_wrong_groups)
case("optimizer load wrong sizes", opt_load_wrong_sizes)
case("load weights_only builtins", load_weights_only_tuple_dtype)
# --- conv transpose / pooling / batchnorm
ct = nn.ConvTranspose2d(1, 1, 3, stride=2)
case("convT output_padding too big", lambda: nn.ConvTranspose2d(1, 1, 3, stride=2, output_padding=2)(
    torch.ones(1, 1, 3, 3)))
case("convT output_size", lambda: shape(ct(torch.ones(1, 1, 3, 3), output_size=[8, 8])))
case("convT bad output_size", lambda: ct(torch.ones(1, 1, 3, 3), output_size=[12, 12]))
case("convT groups mismatch", lambda: nn.ConvTranspose2d(3, 2, 3, groups=2))
case("convT empty batch", lambda: shape(nn.ConvTranspose2d(1, 2, 3)(torch.ones(0, 1, 3, 3))))
case("adaptive pool zero out", lambda: shape(nn.AdaptiveAvgPool2d((0, 1))(torch.ones(1, 2, 3, 3))))
case("adaptive pool negative", lambda: nn.AdaptiveAvgPool2d(-1)(torch.ones(1, 2, 3, 3)))
case("adaptive pool empty input", lambda: nn.AdaptiveAvgPool2d(1)(torch.ones(1, 2, 0, 3)))
case("adaptive pool None", lambda: shape(nn.AdaptiveAvgPool2d((None, 2))(torch.ones(1, 2, 5, 4))))
case("batchnorm2d 3d input", lambda: nn.BatchNorm2d(2)(torch.ones(2, 3, 3)))
case("batchnorm empty batch train", lambda: shape(nn.BatchNorm2d(2)(torch.ones(0, 2, 3, 3))))
case("batchnorm wrong channels", lambda: nn.BatchNorm2d(3)(torch.ones(2, 2, 3, 3)))
case("batchnorm nan", lambda: nn.BatchNorm1d(2)(torch.tensor([[float('nan'), 1.0], [0.0, 2.0]])).isnan().sum().item())
case("groupnorm not divisible", lambda: nn.GroupNorm(3, 4))
case("layernorm wrong shape", lambda: nn.LayerNorm(5)(torch.ones(2, 4)))
case("unflatten bad sizes", lambda: nn.Unflatten(1, (3, 3))(torch.ones(2, 8)))
case("flatten bad dims", lambda: nn.Flatten(2, 1)(torch.ones(2, 3, 4)))
case("multinomial negative", lambda: torch.multinomial(torch.tensor([0.5, -0.1]), 1))
case("multinomial all zero", lambda: torch.multinomial(torch.zeros(3), 1))
case("multinomial nan", lambda: torch.multinomial(torch.tensor([float('nan'), 1.0]), 1))
case("multinomial too many", lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 3))
case("multinomial inf", lambda: torch.multinomial(torch.tensor([float('inf'), 1.0]), 1))
case("topk too big", lambda: torch.ones(3).topk(4))
case("huge randn", lambda: torch.empty(2 ** 62, 4))
case("huge linear", lambda: nn.Linear(2 ** 40, 2 ** 40))
# --- more tensors and functions met in training loops
case("one_hot negative", lambda: F.one_hot(torch.tensor([0, -1]), 3))
case("one_hot too small", lambda: F.one_hot(torch.tensor([0, 3]), 3))
case("one_hot float", lambda: F.one_hot(torch.tensor([0.0, 1.0]), 3))
case("one_hot empty infer", lambda: F.one_hot(torch.tensor([], dtype=torch.long)))
case("one_hot empty given", lambda: F.one_hot(torch.tensor([], dtype=torch.long), 4))
case("bincount negative", lambda: torch.bincount(torch.tensor([1, -1])))
case("bincount float", lambda: torch.bincount(torch.tensor([1.0])))
case("bincount weights mismatch", lambda: torch.bincount(torch.tensor([1, 2]), weights=torch.ones(3)))
case("bincount empty minlength", lambda: torch.bincount(torch.tensor([], dtype=torch.long), minlength=3))
case("index_add_ wrong source", lambda: torch.zeros(3, 2).index_add_(0, torch.tensor([0, 1]), torch.ones(3, 2)))
case("index_add_ out of range", lambda: torch.zeros(3, 2).index_add_(0, torch.tensor([0, 3]), torch.ones(2, 2)))
case("scatter_ out of range", lambda: torch.zeros(3).scatter_(0, torch.tensor([5]), 1.0))
case("scatter_add_ dtype", lambda: torch.zeros(3).scatter_add_(0, torch.tensor([1]), torch.ones(1, dtype=torch.double)))
case("gather index int32", lambda: torch.arange(4.0).gather(0, torch.tensor([1, 2], dtype=torch.int32)))
case("gather out of range", lambda: torch.arange(4.0).gather(0, torch.tensor([4])))
case("normalize zero", lambda: F.normalize(torch.zeros(2, 3), dim=1))
case("normalize p0", lambda: F.normalize(torch.ones(2, 3), p=0, dim=1))
case("cosine_similarity zero", lambda: F.cosine_similarity(torch.zeros(2, 3), torch.ones(2, 3)))
case("cosine_similarity bad dims", lambda: F.cosine_similarity(torch.zeros(2, 3), torch.ones(4, 3)))
case("pairwise_distance broadcast", lambda: F.pairwise_distance(torch.zeros(2, 3), torch.ones(1, 3)))
case("cdist wrong last dim", lambda: torch.cdist(torch.zeros(2, 3), torch.ones(2, 4)))
case("cdist negative p", lambda: torch.cdist(torch.zeros(2, 3), torch.ones(2, 3), p=-1))
case("cdist empty", lambda: torch.cdist(torch.zeros(0, 3), torch.ones(2, 3)))
case("interpolate bad mode", lambda: F.interpolate(torch.ones(1, 1, 4), scale_factor=2, mode='bilinear'))
case("interpolate both size scale", lambda: F.interpolate(torch.ones(1, 1, 4), size=8, scale_factor=2))
case("interpolate neither", lambda: F.interpolate(torch.ones(1, 1, 4)))
case("interpolate zero size", lambda: F.interpolate(torch.ones(1, 1, 4), size=0))
case("interpolate align nearest", lambda: F.interpolate(torch.ones(1, 1, 4), size=8, align_corners=True))
case("interpolate int input", lambda: F.interpolate(torch.ones(1, 1, 4, dtype=torch.long), size=8))
case("pad reflect too big", lambda: F.pad(torch.ones(1, 1, 3), (3, 3), mode='reflect'))
case("pad odd length", lambda: F.pad(torch.ones(1, 3), (1,)))
case("pad negative crop", lambda: F.pad(torch.arange(5.0).view(1, 5), (-1, -2)))
case("pad bad mode", lambda: F.pad(torch.ones(1, 3), (1, 1), mode='wrap'))
case("pad circular too big", lambda: F.pad(torch.ones(1, 1, 3), (4, 0), mode='circular'))
case("pad_packed total_length small", lambda: torch.nn.utils.rnn.pad_packed_sequence(
    pack_padded_sequence(torch.zeros(5, 2, 1), [5, 3]), total_length=3))
case("pack_sequence empty", lambda: torch.nn.utils.rnn.pack_sequence([]))
case("pack_sequence unsorted", lambda: torch.nn.utils.rnn.pack_sequence([torch.ones(1), torch.ones(3)]))
case("unpad_sequence", lambda: [t.tolist() for t in torch.nn.utils.rnn.unpad_sequence(
    torch.arange(6.0).view(3, 2), torch.tensor([3, 1]))])
case("params to vector", lambda: shape(torch.nn.utils.parameters_to_vector(nn.Linear(2, 3).parameters())))
case("vector to params wrong size", lambda: torch.nn.utils.vector_to_parameters(torch.ones(5),
                                                                                nn.Linear(2, 3).parameters()))
case("vector to params not tensor", lambda: torch.nn.utils.vector_to_parameters([1.0], nn.Linear(2, 3).parameters()))
case("quantile out of range", lambda: torch.quantile(torch.arange(4.0), 1.5))
case("quantile empty", lambda: torch.quantile(torch.tensor([]), 0.5))
case("quantile int", lambda: torch.quantile(torch.arange(4), 0.5))
case("histc min gt max", lambda: torch.histc(torch.arange(4.0), bins=4, min=3, max=1))
case("histc nan", lambda: torch.histc(torch.tensor([float('nan'), 1.0]), bins=2))
case("solve singular", lambda: torch.linalg.solve(torch.zeros(2, 2), torch.ones(2)))
case("cholesky not pd", lambda: torch.linalg.cholesky(-torch.eye(2)))
case("inverse singular", lambda: torch.linalg.inv(torch.zeros(3, 3)))
case("randint low ge high", lambda: torch.randint(3, 3, (2,)))
case("randperm negative", lambda: torch.randperm(-1))
case("arange zero step", lambda: torch.arange(0, 5, 0))
case("arange inf", lambda: torch.arange(0, float('inf')))
case("arange wrong sign", lambda: torch.arange(0, 5, -1))
case("view two minus one", lambda: torch.ones(6).view(-1, -1))
case("expand minus one new dim", lambda: torch.ones(3).expand(-1, 3))
case("expand fewer dims", lambda: torch.ones(2, 3).expand(3))
case("tensor ragged", lambda: torch.tensor([[1, 2], [3]]))
case("tensor int overflow", lambda: torch.tensor([2 ** 63]))
case("tensor mixed types", lambda: torch.tensor([1, 'a']))
case("int div zero", lambda: torch.tensor([1, 2]) // torch.tensor([0, 1]))
case("int remainder zero", lambda: torch.remainder(torch.tensor([3]), 0))
case("int true div zero", lambda: torch.tensor([1]) / 0)
case("item multi", lambda: torch.ones(2).item())
case("bool multi", lambda: bool(torch.ones(2)))
case("len 0d", lambda: len(torch.tensor(1.0)))
case("iter 0d", lambda: list(torch.tensor(1.0)))
case("float of 2 elements", lambda: float(torch.ones(2)))
case("int of nan", lambda: int(torch.tensor(float('nan'))))
case("index with float", lambda: torch.ones(3)[torch.tensor([0.0])])
case("index bool wrong shape", lambda: torch.ones(3)[torch.tensor([True, False])])
case("setitem broadcast fail", lambda: torch.zeros(2, 3).__setitem__(0, torch.ones(2)))
case("masked_fill non-bool", lambda: torch.zeros(3).masked_fill(torch.tensor([1, 0, 1]), 1.0))
case("masked_fill tensor value 1d", lambda: torch.zeros(3).masked_fill(torch.tensor([True, False, True]),
                                                                        torch.tensor([1.0, 2.0])))
case("where dtype mix", lambda: torch.where(torch.tensor([True, False]), torch.tensor([1, 2]),
                                           torch.tensor([0.5, 1.5])))
case("where non-bool cond", lambda: torch.where(torch.tensor([1, 0]), 1.0, 0.0))
case("topk k zero empty", lambda: torch.ones(0).topk(0))
case("topk negative k", lambda: torch.ones(3).topk(-1))
case("sort stable nan", lambda: torch.tensor([2.0, float('nan'), 1.0, float('nan')]).sort(stable=True).indices)
case("argmax empty", lambda: torch.ones(0).argmax())
case("max empty dim", lambda: torch.ones(0, 3).max(dim=0))
case("max empty other dim", lambda: torch.ones(0, 3).max(dim=1).values)
case("softmax int", lambda: torch.softmax(torch.tensor([1, 2]), 0))
case("log_softmax empty", lambda: F.log_softmax(torch.ones(0, 3), dim=1))
case("gumbel tau zero", lambda: F.gumbel_softmax(torch.zeros(2, 3), tau=0.0).isnan().all().item())
case("dropout p>1", lambda: F.dropout(torch.ones(3), p=1.5))
case("dropout p=1 train", lambda: F.dropout(torch.ones(3), p=1.0))
case("alpha_dropout p=1", lambda: F.alpha_dropout(torch.ones(3), p=1.0, training=True))
case("dropout2d 2d input", lambda: shape(F.dropout2d(torch.ones(3, 4), p=0.0)))
case("linear weight 1d", lambda: F.linear(torch.ones(2, 3), torch.ones(3)))
case("linear bias wrong", lambda: F.linear(torch.ones(2, 3), torch.ones(4, 3), torch.ones(3)))
case("bilinear wrong", lambda: nn.Bilinear(2, 3, 4)(torch.ones(5, 2), torch.ones(5, 2)))
case("conv1d padding same stride", lambda: nn.Conv1d(1, 1, 3, stride=2, padding='same'))
case("conv2d padding valid", lambda: shape(nn.Conv2d(1, 1, 3, padding='valid')(torch.ones(1, 1, 5, 5))))
case("conv2d bad padding str", lambda: nn.Conv2d(1, 1, 3, padding='full'))
case("conv2d padding_mode bad", lambda: nn.Conv2d(1, 1, 3, padding_mode='mirror'))
case("conv2d reflect pad too big", lambda: nn.Conv2d(1, 1, 3, padding=3, padding_mode='reflect')(
    torch.ones(1, 1, 3, 3)))
case("conv groups wrong", lambda: nn.Conv2d(4, 6, 3, groups=4))
case("conv zero stride", lambda: nn.Conv2d(1, 1, 3, stride=0)(torch.ones(1, 1, 5, 5)))
case("conv negative padding", lambda: F.conv2d(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), padding=-1))
case("maxpool stride zero", lambda: F.max_pool2d(torch.ones(1, 1, 4, 4), 2, stride=0))
case("maxpool pad too big", lambda: F.max_pool2d(torch.ones(1, 1, 4, 4), 2, padding=2))
case("avgpool ceil", lambda: shape(F.avg_pool2d(torch.ones(1, 1, 5, 5), 2, ceil_mode=True)))
case("maxunpool wrong indices", lambda: F.max_unpool2d(torch.ones(1, 1, 2, 2), torch.tensor([[[[0, 1], [2, 99]]]]), 2))
case("pixel_shuffle not divisible", lambda: F.pixel_shuffle(torch.ones(1, 3, 2, 2), 2))
case("unfold kernel too big", lambda: F.unfold(torch.ones(1, 1, 3, 3), kernel_size=4))
case("fold wrong blocks", lambda: F.fold(torch.ones(1, 4, 5), output_size=(3, 3), kernel_size=2))
case("grid_sample wrong grid", lambda: F.grid_sample(torch.ones(1, 1, 3, 3), torch.zeros(1, 2, 2, 3)))
case("affine_grid wrong theta", lambda: F.affine_grid(torch.zeros(1, 3, 3), [1, 1, 2, 2]))
case("embedding 0 dim weight", lambda: shape(nn.Embedding(3, 0)(torch.tensor([1, 2]))))
case("embedding from_pretrained 1d", lambda: nn.Embedding.from_pretrained(torch.ones(3)))
case("embedding_bag bad offsets", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([1, 2]), torch.tensor([1])))
case("embedding_bag psw with mean", lambda: nn.EmbeddingBag(5, 2, mode='mean')(
    torch.tensor([1, 2]), torch.tensor([0]), per_sample_weights=torch.ones(2)))
case("embedding_bag 2d with offsets", lambda: nn.EmbeddingBag(5, 2)(torch.tensor([[1, 2]]), torch.tensor([0])))
case("ctc target longer than input", lambda: F.ctc_loss(torch.zeros(2, 1, 4).log_softmax(2), torch.tensor([[1, 2, 3]]),
                                                        torch.tensor([2]), torch.tensor([3])))
case("ctc blank out of range", lambda: F.ctc_loss(torch.zeros(5, 1, 4).log_softmax(2), torch.tensor([[1, 2]]),
                                                  torch.tensor([5]), torch.tensor([2]), blank=4))
case("ctc input lengths too long", lambda: F.ctc_loss(torch.zeros(5, 1, 4).log_softmax(2), torch.tensor([[1, 2]]),
                                                      torch.tensor([6]), torch.tensor([2])))
case("nll 2d target out of range", lambda: F.nll_loss(torch.zeros(1, 3, 2, 2), torch.tensor([[[0, 1], [2, 3]]])))
case("nll 2d wrong target shape", lambda: F.nll_loss(torch.zeros(1, 3, 2, 2), torch.zeros(1, 2, 3, dtype=torch.long)))
case("cross_entropy weight wrong size", lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1]),
                                                                weight=torch.ones(4)))
case("cross_entropy all ignored", lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([-100, -100])))
case("cross_entropy smoothing ignored", lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([1, -100]),
                                                                label_smoothing=0.2))
case("kl_div batchmean 1d", lambda: F.kl_div(torch.zeros(3), torch.ones(3) / 3, reduction='batchmean'))
case("poisson_nll log false negative", lambda: F.poisson_nll_loss(torch.tensor([-1.0]), torch.tensor([1.0]),
                                                                  log_input=False))
case("gaussian_nll negative var", lambda: F.gaussian_nll_loss(torch.zeros(2), torch.zeros(2),
                                                              torch.tensor([1.0, -1.0])))
case("gaussian_nll var shape", lambda: F.gaussian_nll_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 2)))
case("smooth_l1 negative beta", lambda: F.smooth_l1_loss(torch.zeros(2), torch.ones(2), beta=-1.0))
case("l1 int", lambda: F.l1_loss(torch.tensor([1, 2]), torch.tensor([0, 0])))
case("mse requires_grad target", lambda: F.mse_loss(torch.zeros(2), torch.ones(2, requires_grad=True)).requires_grad)
# --- module API misuse
case("register_buffer dotted", lambda: nn.Module().register_buffer('a.b', torch.ones(1)))
case("register_buffer empty name", lambda: nn.Module().register_buffer('', torch.ones(1)))
case("register_buffer not tensor", lambda: nn.Module().register_buffer('a', [1.0]))
case("register_buffer existing attr", lambda: nn.Linear(2, 2).register_buffer('weight', torch.ones(1)))
case("register_parameter tensor", lambda: nn.Module().register_parameter('a', torch.ones(1)))
case("register_parameter None", lambda: list(nn.Linear(2, 2).register_parameter('extra', None) or []))
case("add_module dotted", lambda: nn.Module().add_module('a.b', nn.Linear(1, 1)))
case("add_module not module", lambda: nn.Module().add_module('a', 3))
case("setattr param to tensor", lambda: setattr(nn.Linear(2, 2), 'weight', torch.ones(2, 2)))
case("setattr module to int", lambda: setattr(nn.Sequential(nn.Linear(1, 1)), '0', 3))
case("sequential index out", lambda: nn.Sequential(nn.ReLU())[3])
case("sequential negative slice", lambda: len(nn.Sequential(nn.ReLU(), nn.Tanh(), nn.GELU())[-2:]))
case("modulelist insert", lambda: [type(m).__name__ for m in (lambda ml: (ml.insert(0, nn.Tanh()), ml)[1])(
    nn.ModuleList([nn.ReLU()]))])
case("moduledict bad key", lambda: nn.ModuleDict({1: nn.ReLU()}))
case("moduledict missing", lambda: nn.ModuleDict({'a': nn.ReLU()})['b'])
case("parameterlist append tensor", lambda: type((lambda pl: (pl.append(torch.ones(1)), pl)[1])(
    nn.ParameterList())[0]).__name__)
case("parameterdict update", lambda: sorted(nn.ParameterDict({'a': nn.Parameter(torch.ones(1))}).keys()))
case("get_submodule missing", lambda: nn.Sequential(nn.Linear(1, 1)).get_submodule('1'))
case("get_parameter missing", lambda: nn.Linear(1, 1).get_parameter('nope'))
case("get_parameter not param", lambda: nn.BatchNorm1d(2).get_parameter('running_mean'))
case("state_dict strict missing", lambda: nn.Linear(2, 2).load_state_dict({'weight': torch.ones(2, 2)}))
case("load_state_dict bad type", lambda: nn.Linear(2, 2).load_state_dict({'weight': [[1.0, 2.0]], 'bias': [1.0]}))
case("to bad dtype", lambda: nn.Linear(2, 2).to(torch.long))
case("to complex", lambda: str(nn.Linear(2, 2).to(torch.complex64).weight.dtype))
case("half forward double input", lambda: nn.Linear(2, 2).half()(torch.ones(1, 2)))
case("requires_grad_ int param", lambda: nn.Parameter(torch.ones(2, dtype=torch.long)))
case("requires_grad_ int tensor", lambda: torch.ones(2, dtype=torch.long).requires_grad_())
case("zero_grad set_to_none False", lambda: (lambda m: (m(torch.ones(1, 2)).sum().backward(),
                                                        m.zero_grad(set_to_none=False), m.weight.grad)[2])(
    nn.Linear(2, 1)))
case("train not bool", lambda: nn.Linear(1, 1).train('yes'))
case("apply fn error", lambda: nn.Sequential(nn.Linear(1, 1)).apply(lambda m: 1 / 0))
case("named_parameters shared", lambda: (lambda a: len(list(nn.Sequential(a, a).named_parameters())))(nn.Linear(1, 1)))
case("named_parameters no dedup", lambda: (lambda a: len(list(nn.Sequential(a, a).named_parameters(
    remove_duplicate=False))))(nn.Linear(1, 1)))
case("extra_repr", lambda: repr(nn.Sequential(nn.Conv2d(1, 2, 3, bias=False), nn.LSTM(2, 3, batch_first=True))))
# --- optimizers on odd parameters
cp_ = nn.Parameter(torch.tensor([1 + 1j, 2 - 1j]))


def complex_adam():
    opt = torch.optim.Adam([cp_], lr=0.1)
    (cp_.abs() ** 2).sum().backward()
    opt.step()
    return [[round(v.real, 5), round(v.imag, 5)] for v in cp_.detach().tolist()]


def sparse_adam_dense_grad():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.ones(2)
    torch.optim.SparseAdam([q1]).step()


def adam_sparse_grad():
    emb = nn.Embedding(4, 2, sparse=True)
    emb(torch.tensor([1])).sum().backward()
    torch.optim.Adam(emb.parameters()).step()


def sgd_sparse_grad():
    emb = nn.Embedding(4, 2, sparse=True)
    nn.init.constant_(emb.weight, 1.0)
    emb(torch.tensor([1, 1])).sum().backward()
    torch.optim.SGD(emb.parameters(), lr=0.5).step()
    return emb.weight


def step_no_grads():
    q1 = nn.Parameter(torch.ones(2))
    opt = torch.optim.Adam([q1])
    opt.step()
    return opt.state_dict()['state']


def step_closure():
    q1 = nn.Parameter(torch.ones(2))
    opt = torch.optim.LBFGS([q1], lr=0.5, max_iter=5)

    def closure():
        opt.zero_grad()
        loss = ((q1 - 3) ** 2).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    return round(loss.item(), 5), [round(v, 4) for v in q1.tolist()]


def lbfgs_no_closure():
    torch.optim.LBFGS([nn.Parameter(torch.ones(2))]).step()


def adam_nan_grad():
    q1 = nn.Parameter(torch.ones(2))
    q1.grad = torch.tensor([float('nan'), 1.0])
    torch.optim.Adam([q1], lr=0.1).step()
    return q1


def param_in_two_groups():
    q1 = nn.Parameter(torch.ones(2))
    torch.optim.SGD([{'params': [q1]}, {'params': [q1]}], lr=0.1)


def add_group_duplicate():
    q1 = nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([q1], lr=0.1)
    opt.add_param_group({'params': q1})


def group_missing_lr():
    torch.optim.SGD([{'params': [nn.Parameter(torch.ones(2))]}])


def params_set():
    torch.optim.SGD({nn.Parameter(torch.ones(2))}, lr=0.1)


case("complex adam", complex_adam)
case("sparse adam dense grad", sparse_adam_dense_grad)
case("adam sparse grad", adam_sparse_grad)
case("sgd sparse grad", sgd_sparse_grad)
case("step no grads", step_no_grads)
case("lbfgs closure", step_closure)
case("lbfgs no closure", lbfgs_no_closure)
case("adam nan grad", adam_nan_grad)
case("param in two groups", param_in_two_groups)
case("add group duplicate", add_group_duplicate)
case("group missing lr", group_missing_lr)
case("params set", params_set)
case("adam lr tensor", lambda: torch.optim.Adam([nn.Parameter(torch.ones(1))], lr=torch.tensor(0.01)).defaults['lr'])
case("adamw fused cpu", lambda: type(torch.optim.AdamW([nn.Parameter(torch.ones(1))], fused=True)).__name__)
case("adam foreach and fused", lambda: torch.optim.Adam([nn.Parameter(torch.ones(1))], foreach=True, fused=True))
# --- transformer decoder / full transformer
tr = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16,
                    dropout=0.0, batch_first=True)
s8, t8 = torch.zeros(2, 5, 8), torch.zeros(2, 4, 8)
case("transformer ok", lambda: shape(tr(s8, t8, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))))
case("transformer batch mismatch", lambda: tr(s8, torch.zeros(3, 4, 8)))
case("transformer feature mismatch", lambda: tr(s8, torch.zeros(2, 4, 6)))
case("transformer tgt_mask wrong", lambda: tr(s8, t8, tgt_mask=torch.zeros(5, 5)))
case("transformer memory kpm wrong", lambda: tr(s8, t8, memory_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)))
case("transformer kpm mixed types", lambda: shape(tr(s8, t8, src_key_padding_mask=torch.zeros(2, 5, dtype=torch.bool),
                                                     memory_key_padding_mask=torch.zeros(2, 5))))
case("transformer unbatched", lambda: shape(tr(torch.zeros(5, 8), torch.zeros(4, 8))))
case("transformer 2d src batched tgt", lambda: tr(torch.zeros(5, 8), t8))
case("decoder layer tgt_is_causal", lambda: shape(nn.TransformerDecoderLayer(8, 2, batch_first=True)(
    t8, s8, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4), tgt_is_causal=True)))
case("encoder layer eval fast kpm", lambda: shape(nn.TransformerEncoderLayer(8, 2, batch_first=True).eval()(
    s8, src_key_padding_mask=torch.tensor([[False] * 5, [False, False, True, True, True]]))))
enc2 = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, batch_first=True), 2).eval()
case("encoder nested eval", lambda: enc2(torch.ones(2, 5, 8), src_key_padding_mask=torch.tensor(
    [[False] * 5, [False, False, True, True, True]]))[1, 3].abs().sum().item())
case("mha kdim vdim", lambda: shape(nn.MultiheadAttention(8, 2, kdim=3, vdim=5, batch_first=True)(
    s8, torch.zeros(2, 6, 3), torch.zeros(2, 6, 5))[0]))
case("mha kdim wrong", lambda: nn.MultiheadAttention(8, 2, kdim=3, vdim=5, batch_first=True)(
    s8, torch.zeros(2, 6, 4), torch.zeros(2, 6, 5)))
case("mha add_bias_kv zero_attn", lambda: shape(nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True)(
    torch.zeros(5, 2, 8), torch.zeros(5, 2, 8), torch.zeros(5, 2, 8))[1]))
case("mha double input", lambda: nn.MultiheadAttention(8, 2)(torch.zeros(5, 2, 8, dtype=torch.double),
                                                             torch.zeros(5, 2, 8), torch.zeros(5, 2, 8)))
# --- reduced precision layers on CPU
case("linear half", lambda: str(nn.Linear(2, 2).half()(torch.ones(1, 2, dtype=torch.half)).dtype))
case("conv bf16", lambda: str(nn.Conv2d(1, 1, 2).bfloat16()(torch.ones(1, 1, 3, 3, dtype=torch.bfloat16)).dtype))
case("layernorm half", lambda: str(nn.LayerNorm(3).half()(torch.ones(2, 3, dtype=torch.half)).dtype))
case("batchnorm bf16 input float params", lambda: str(nn.BatchNorm1d(3)(torch.ones(2, 3, dtype=torch.bfloat16)).dtype))
case("lstm half", lambda: str(nn.LSTM(2, 3).half()(torch.ones(4, 1, 2, dtype=torch.half))[0].dtype))
case("embedding half", lambda: str(nn.Embedding(3, 2).half()(torch.tensor([1])).dtype))
case("cross_entropy half", lambda: str(F.cross_entropy(torch.zeros(2, 3, dtype=torch.half),
                                                       torch.tensor([0, 1])).dtype))
case("softmax half dtype arg", lambda: str(F.softmax(torch.zeros(3, dtype=torch.half), 0, dtype=torch.float32).dtype))
case("mse mixed dtypes", lambda: F.mse_loss(torch.zeros(3), torch.zeros(3, dtype=torch.double)))
case("l1 mixed dtypes", lambda: str(F.l1_loss(torch.zeros(3), torch.zeros(3, dtype=torch.double)).dtype))
case("nll double target", lambda: F.nll_loss(torch.zeros(2, 3), torch.tensor([0.0, 1.0], dtype=torch.double)))
case("bce half", lambda: str(F.binary_cross_entropy(torch.full((2,), 0.5, dtype=torch.half),
                                                   torch.zeros(2, dtype=torch.half)).dtype))
case("bce mixed", lambda: F.binary_cross_entropy(torch.full((2,), 0.5), torch.zeros(2, dtype=torch.double)))
case("bce logits mixed", lambda: str(F.binary_cross_entropy_with_logits(torch.zeros(2),
                                                                       torch.zeros(2, dtype=torch.double)).dtype))
# --- norm layers
case("layernorm normalized_shape int list", lambda: shape(nn.LayerNorm([2, 3])(torch.ones(4, 2, 3))))
case("layernorm no affine bias", lambda: sorted(nn.LayerNorm(3, bias=False).state_dict()))
case("rmsnorm", lambda: F.rms_norm(torch.tensor([[3.0, 4.0]]), (2,)).tolist())
case("rmsnorm wrong shape", lambda: F.rms_norm(torch.ones(2, 3), (2,)))
case("groupnorm wrong channels", lambda: nn.GroupNorm(2, 4)(torch.ones(2, 6, 3)))
case("instancenorm 2d input", lambda: nn.InstanceNorm1d(3)(torch.ones(3, 4)).shape)
case("instancenorm one spatial", lambda: nn.InstanceNorm1d(3)(torch.ones(2, 3, 1)))
case("batchnorm eval one value", lambda: shape(nn.BatchNorm1d(3).eval()(torch.ones(1, 3))))
case("batchnorm momentum None", lambda: (lambda bn: (bn(torch.arange(6.0).view(2, 3)), bn(torch.zeros(2, 3)),
                                                     bn.running_mean.tolist())[2])(nn.BatchNorm1d(3, momentum=None)))
case("batchnorm no running stats eval", lambda: nn.BatchNorm1d(3, track_running_stats=False).eval()(
    torch.arange(6.0).view(2, 3)).tolist())
case("syncbn cpu", lambda: nn.SyncBatchNorm(3)(torch.ones(2, 3, 4)))
case("localresponsenorm", lambda: shape(nn.LocalResponseNorm(2)(torch.ones(1, 4, 3, 3))))
# --- vmap misuse
case("vmap item full text", lambda: torch.func.vmap(lambda x: x.item())(torch.ones(3)))
case("vmap nonzero", lambda: torch.func.vmap(torch.nonzero)(torch.ones(3, 2)))
case("vmap in_dims None", lambda: torch.func.vmap(lambda x: x, in_dims=None)(torch.ones(3)))
case("vmap in_dims all None", lambda: torch.func.vmap(torch.add, in_dims=(None, None))(torch.ones(3), torch.ones(3)))
case("vmap index_add", lambda: torch.func.vmap(lambda x: torch.zeros(2).index_add(0, torch.tensor([0]), x[:1]))(
    torch.ones(3, 2)))
case("vmap index_fill per-sample", lambda: torch.func.vmap(lambda s, v: s.index_fill_(0, torch.tensor([1]), v))(
    torch.zeros(3, 2), torch.arange(3.0)))
case("vmap data-dependent if", lambda: torch.func.vmap(lambda x: x if x.sum() > 0 else -x)(torch.ones(3, 2)))
