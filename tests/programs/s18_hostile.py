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
