# Fine-tuning and odd-shaped heads: a text classifier on nn.EmbeddingBag (offsets, per_sample_weights,
# mode sum/mean/max, padding_idx), a backbone frozen with requires_grad_(False) then unfrozen through
# optimizer.add_param_group with its own lr, BatchNorm kept in eval while frozen; a small speech model
# (Conv1d -> bidirectional LSTM -> log_softmax) trained with nn.CTCLoss (zero_infinity) on padded
# targets; multi-label BCEWithLogitsLoss with pos_weight; MultiLabelSoftMarginLoss; TripletMarginLoss.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init

# --- EmbeddingBag classifier
V, D, NC = 30, 8, 3
text = integers((40,), V, salt=51)
offsets = torch.tensor([0, 5, 9, 16, 20, 28, 33])
labels = integers((7,), NC, salt=52)
weights = data((40,), salt=53, low=0.5, high=1.5)
for mode in ('sum', 'mean', 'max'):
    bag = seed_free_init(nn.EmbeddingBag(V, D, mode=mode, padding_idx=0), salt=54)
    fc = seed_free_init(nn.Linear(D, NC), salt=55)
    opt = torch.optim.SGD(list(bag.parameters()) + list(fc.parameters()), lr=0.5)
    for step in range(4):
        psw = weights if mode == 'sum' else None
        out = fc(bag(text, offsets, per_sample_weights=psw))
        loss = F.cross_entropy(out, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(mode, f'loss {loss.item():.6f}', f'pad row {bag.weight[0].abs().sum().item():.6f}',
          f'{out.argmax(1).tolist()}')
bag2d = nn.EmbeddingBag.from_pretrained(torch.arange(12.0).view(6, 2), mode='mean', freeze=True)
print('2d bags', bag2d(torch.tensor([[1, 2], [3, 5]])).tolist(), bag2d.weight.requires_grad)
print('empty bag', nn.EmbeddingBag.from_pretrained(torch.ones(4, 2), mode='sum')(
    torch.tensor([1, 2]), torch.tensor([0, 0, 2])).tolist())

# --- freeze / unfreeze
backbone = seed_free_init(nn.Sequential(nn.Linear(6, 12, bias=False), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 12),
                                        nn.ReLU()), salt=56)
head = seed_free_init(nn.Linear(12, 2), salt=57)
backbone.requires_grad_(False)
opt = torch.optim.Adam(head.parameters(), lr=1e-2)
X = data((16, 6), salt=58)
Y = integers((16,), 2, salt=58)
for epoch in range(4):
    if epoch == 2:
        backbone.requires_grad_(True)
        opt.add_param_group({'params': backbone.parameters(), 'lr': 1e-3})
        print('groups', len(opt.param_groups), [g['lr'] for g in opt.param_groups],
              sum(p.requires_grad for p in backbone.parameters()))
    backbone.train(epoch >= 2)
    feats = backbone(X)
    loss = F.cross_entropy(head(feats), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'finetune {epoch} loss {loss.item():.6f}', backbone[0].weight.grad is None,
          f'{backbone[1].running_mean.abs().sum().item():.6f}', backbone.training)

# --- CTC
B, Tn, F_in, K = 3, 14, 5, 6  # K classes including blank 0
speech = data((B, F_in, Tn), salt=60)


class SpeechModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(F_in, 8, 3, padding=1)
        self.rnn = nn.LSTM(8, 6, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(12, K)

    def forward(self, x):
        h = F.relu(self.conv(x)).transpose(1, 2)
        h, _ = self.rnn(h)
        return F.log_softmax(self.fc(h), dim=-1).transpose(0, 1)  # T, B, K


sm = seed_free_init(SpeechModel(), salt=61)
targets = torch.tensor([[1, 2, 2, 3], [4, 5, 0, 0], [3, 1, 4, 0]])
target_lengths = torch.tensor([4, 2, 3])
input_lengths = torch.tensor([14, 10, 12])
ctc = nn.CTCLoss(blank=0, zero_infinity=True)
opt = torch.optim.Adam(sm.parameters(), lr=5e-3)
for step in range(5):
    log_probs = sm(speech)
    loss = ctc(log_probs, targets, input_lengths, target_lengths)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'ctc {step} {loss.item():.6f}')
lp = sm(speech).detach()
print('ctc none', [round(v, 4) for v in F.ctc_loss(lp, targets, input_lengths, target_lengths,
                                                   reduction='none').tolist()])
print('ctc impossible', F.ctc_loss(lp[:2], targets, torch.tensor([2, 2, 2]), target_lengths, reduction='none',
                                   zero_infinity=False).tolist())
concat = torch.cat([targets[0, :4], targets[1, :2], targets[2, :3]])
print('ctc concat targets', round(F.ctc_loss(lp, concat, input_lengths, target_lengths).item(), 5))

# --- multi-label and metric losses
logits = data((4, 5), salt=62) * 3
multi = (data((4, 5), salt=63) > 0).float()
pw = torch.arange(1., 6.)
print('bce pos_weight', round(F.binary_cross_entropy_with_logits(logits, multi, pos_weight=pw).item(), 6))
print('multilabel soft margin', round(nn.MultiLabelSoftMarginLoss(weight=torch.ones(5) * 0.5)(logits, multi).item(), 6))
a, p, n = data((4, 6), salt=64), data((4, 6), salt=65), data((4, 6), salt=66)
print('triplet', round(nn.TripletMarginLoss(margin=0.5, p=2, swap=True)(a, p, n).item(), 6),
      round(F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y: 1 - F.cosine_similarity(x, y),
                                                margin=0.3).item(), 6))
print('cosine embedding', round(F.cosine_embedding_loss(a, p, torch.tensor([1, -1, 1, -1]), margin=0.1).item(), 6))
print('margin ranking', round(F.margin_ranking_loss(a[:, 0], p[:, 0], torch.tensor([1., -1., 1., -1.])).item(), 6))
print('multi margin', round(F.multi_margin_loss(logits, torch.tensor([0, 2, 4, 1]), p=1, margin=0.5).item(), 6))
