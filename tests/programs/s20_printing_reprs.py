# What the session-20 programs print about their objects: the reprs of the modules they build (RMSNorm,
# GroupNorm, nn.Transformer, MultiheadAttention with kdim/vdim, LSTMCell, grouped Conv1d, KLDivLoss, ...), of
# their optimizers (AdamW, LBFGS, RMSprop, SGD with two groups), scheduler state_dict keys, Beta, Generator,
# DataLoader attributes, GradScaler state, the RNG state's head, and complex tensors from polar / view_as_complex.
import torch
import torch.nn as nn
from torch.distributions import Beta

mods = [nn.RMSNorm(4), nn.RMSNorm([2, 3], eps=1e-5, elementwise_affine=False), nn.GroupNorm(2, 4, affine=False),
        nn.Transformer(8, 2, 1, 1, 16, batch_first=True),
        nn.MultiheadAttention(8, 2, kdim=4, vdim=6, batch_first=True), nn.LSTMCell(3, 4),
        nn.Conv1d(4, 4, 3, groups=4, padding=2), nn.KLDivLoss(reduction="batchmean", log_target=True),
        nn.CosineEmbeddingLoss(margin=0.1), nn.GLU(dim=-2), nn.SiLU(inplace=True),
        nn.Upsample(scale_factor=2, mode="nearest"), nn.Softplus(beta=2), nn.Dropout2d(0.1),
        nn.ConvTranspose2d(3, 1, 4, 2, 1), nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Softmax(dim=-1),
        nn.Identity(), nn.Embedding(5, 3, padding_idx=0, max_norm=1.0),
        nn.TransformerDecoderLayer(8, 2, 16, norm_first=True, bias=False), nn.LayerNorm(4, bias=False)]
for m in mods:
    print(m)
p = [nn.Parameter(torch.ones(2))]
print(torch.optim.AdamW(p, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1))
print(torch.optim.LBFGS(p, line_search_fn="strong_wolfe"))
print(torch.optim.RMSprop(p))
opt = torch.optim.SGD([{"params": p}, {"params": [nn.Parameter(torch.ones(1))], "lr": 0.5}], lr=0.1, momentum=0.9,
                      nesterov=True)
print(opt)
s = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[0.1, 0.5], total_steps=5)
print(sorted(s.state_dict()), s.state_dict()["total_steps"], s.state_dict()["_schedule_phases"])
s2 = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 3, 2)
print(sorted(s2.state_dict()))
print(Beta(torch.tensor([0.5]), torch.tensor([0.5])), Beta(0.5, 0.5).batch_shape, Beta(0.5, 0.5).event_shape)
print(torch.Generator().manual_seed(3).initial_seed(), torch.Generator().device)
dl = torch.utils.data.DataLoader(range(5), batch_size=2)
print(dl.batch_size, dl.drop_last, dl.num_workers, type(dl.sampler).__name__, type(dl.batch_sampler).__name__,
      dl.prefetch_factor, dl.persistent_workers, dl.timeout, dl.pin_memory, dl.collate_fn.__name__)
print(torch.utils.data.random_split(range(4), [2, 2])[0].__class__.__mro__[1].__name__)
sc = torch.amp.GradScaler("cpu")
print(sc.state_dict(), sc.is_enabled(), sc.get_scale())
print(torch.get_rng_state()[:8], torch.initial_seed())
print(nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float16))
x = torch.polar(torch.ones(2), torch.tensor([0.0, 1.0]))
print(x, torch.view_as_real(x))
print(torch.view_as_complex(torch.ones(2, 2, dtype=torch.float64)))
print(torch.fft.rfft(torch.arange(4.0)))
