# The seq2seq translation tutorial's model, from memory: EncoderRNN (Embedding + GRU batch_first),
# BahdanauAttention, AttnDecoderRNN with teacher forcing, NLLLoss over log_softmax outputs, one
# optimizer per module, random teacher forcing from Python's random, and greedy decoding with topk.
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SOS_token, EOS_token, MAX_LENGTH = 0, 1, 6


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super(EncoderRNN, self).__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super(BahdanauAttention, self).__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super(AttnDecoderRNN, self).__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        attentions = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(decoder_input, decoder_hidden,
                                                                             encoder_outputs)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        decoder_outputs = F.log_softmax(decoder_outputs, dim=-1)
        attentions = torch.cat(attentions, dim=1)
        return decoder_outputs, decoder_hidden, attentions

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        output = self.out(output)
        return output, hidden, attn_weights


random.seed(0)
torch.manual_seed(0)
vocab_in, vocab_out, hidden = 12, 10, 16
src = torch.randint(2, vocab_in, (8, MAX_LENGTH))
tgt = torch.cat([(src[:, :-1] % (vocab_out - 2)) + 2, torch.full((8, 1), EOS_token)], dim=1)
encoder = EncoderRNN(vocab_in, hidden)
decoder = AttnDecoderRNN(hidden, vocab_out)
encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss()
for epoch in range(1, 7):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    encoder_outputs, encoder_hidden = encoder(src)
    use_teacher = random.random() < 0.5
    decoder_outputs, _, attn = decoder(encoder_outputs, encoder_hidden, tgt if use_teacher else None)
    loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), tgt.view(-1))
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    print(f"epoch {epoch} teacher {use_teacher} loss {loss.item():.5f} attn {attn.sum().item():.4f}")
encoder.eval()
decoder.eval()
with torch.no_grad():
    enc_out, enc_hid = encoder(src[:2])
    dec_out, _, attn = decoder(enc_out, enc_hid)
    _, topi = dec_out.topk(1)
    print("decoded", topi.squeeze(-1).tolist(), "attn row sums", attn.sum(-1).numpy().round(5).tolist()[0])
