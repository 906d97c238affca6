# seq2seq translation tutorial, from memory, batched: a bidirectional GRU encoder over
# pack_padded_sequence(enforce_sorted=False) / pad_packed_sequence, a Bahdanau (additive) attention
# decoder with a masked softmax over padded source positions, teacher forcing chosen by Python's
# random, NLLLoss(ignore_index=PAD), greedy decoding until EOS, gradient clipping, two optimizers.
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

PAD, SOS, EOS = 0, 1, 2
V_IN, V_OUT, H = 15, 13, 12


class EncoderRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(V_IN, H, padding_idx=PAD)
        self.gru = nn.GRU(H, H, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * H, H)

    def forward(self, src, lengths):
        packed = pack_padded_sequence(self.embedding(src), lengths, batch_first=True, enforce_sorted=False)
        out, hidden = self.gru(packed)
        out, out_lengths = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2], hidden[-1]), dim=1))).unsqueeze(0)
        return out, hidden, out_lengths


class BahdanauAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.Wa = nn.Linear(H, H)
        self.Ua = nn.Linear(2 * H, H)
        self.Va = nn.Linear(H, 1)

    def forward(self, query, keys, mask):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys))).squeeze(2).unsqueeze(1)
        scores = scores.masked_fill(~mask.unsqueeze(1), float('-inf'))
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(weights, keys), weights


class AttnDecoderRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(V_OUT, H)
        self.attention = BahdanauAttention()
        self.gru = nn.GRU(3 * H, H, batch_first=True)
        self.out = nn.Linear(H, V_OUT)
        self.dropout = nn.Dropout(0.0)

    def step(self, input, hidden, enc_out, mask):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn = self.attention(query, enc_out, mask)
        output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
        return F.log_softmax(self.out(output), dim=-1), hidden, attn


src_lengths = torch.tensor([5, 3, 6, 2])
src = pad_sequence([integers((int(n),), V_IN - 3, salt=int(n)) + 3 for n in src_lengths], batch_first=True,
                   padding_value=PAD)
tgt_lengths = [4, 3, 5, 2]
tgt = pad_sequence([torch.cat([integers((n - 1,), V_OUT - 3, salt=10 + n) + 3, torch.tensor([EOS])])
                    for n in tgt_lengths], batch_first=True, padding_value=PAD)
print('src', src.tolist())
print('tgt', tgt.tolist())
encoder = seed_free_init(EncoderRNN(), salt=1)
decoder = seed_free_init(AttnDecoderRNN(), salt=2)
enc_opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
dec_opt = torch.optim.RMSprop(decoder.parameters(), lr=0.005, alpha=0.9, centered=True)
criterion = nn.NLLLoss(ignore_index=PAD)
random.seed(4)
mask = src != PAD
for it in range(8):
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    enc_out, hidden, out_lengths = encoder(src, src_lengths)
    teacher = random.random() < 0.5
    dec_input = torch.full((src.size(0), 1), SOS, dtype=torch.long)
    outputs = []
    for t in range(tgt.size(1)):
        out, hidden, attn = decoder.step(dec_input, hidden, enc_out, mask)
        outputs.append(out)
        if teacher:
            dec_input = tgt[:, t].unsqueeze(1)
        else:
            _, topi = out.topk(1)
            dec_input = topi.squeeze(-1).detach()
    outputs = torch.cat(outputs, dim=1)
    loss = criterion(outputs.reshape(-1, V_OUT), tgt.reshape(-1))
    loss.backward()
    gn = nn.utils.clip_grad_norm_(list(encoder.parameters()) + list(decoder.parameters()), 1.0)
    enc_opt.step()
    dec_opt.step()
    print(f'iter {it} teacher {teacher} loss {loss.item():.6f} grad_norm {gn.item():.6f}',
          out_lengths.tolist(), f'{attn.sum().item():.4f}')
print('embedding pad row', encoder.embedding.weight[PAD].abs().sum().item(),
      encoder.embedding.weight.grad[PAD].abs().sum().item())
with torch.no_grad():
    enc_out, hidden, _ = encoder(src[:1, :5], src_lengths[:1])
    dec_input = torch.tensor([[SOS]])
    decoded = []
    for _ in range(6):
        out, hidden, attn = decoder.step(dec_input, hidden, enc_out, mask[:1, :5])
        topi = out.argmax(-1)
        if topi.item() == EOS:
            decoded.append('<EOS>')
            break
        decoded.append(topi.item())
        dec_input = topi
print('greedy', decoded, [round(w, 4) for w in attn.squeeze().tolist()])
