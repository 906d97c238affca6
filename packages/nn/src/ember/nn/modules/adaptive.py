"""``nn.AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (2017). Frequent
classes (below the first cutoff) are scored by the head directly; every later cutoff range is a
cluster with one head logit, whose members are scored by a low-rank tail projection, so the log
probability of a rare class is head(cluster) + tail(class within cluster)."""

from __future__ import annotations

from collections import namedtuple

import ember
from ember import Tensor

from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        # Cluster i projects to in_features / div_value^(i+1) dims, then to its classes.
        self.tail = ModuleList(
            Sequential(Linear(in_features, int(in_features // (div_value ** (i + 1))), bias=False, **kw),
                       Linear(int(in_features // (div_value ** (i + 1))), self.cutoffs[i + 1] - self.cutoffs[i],
                              bias=False, **kw))
            for i in range(self.n_clusters))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{int(target.min())}, {int(target.max())}] were found. ")
        # The head's column for each row: the class itself in the shortlist, else its cluster's.
        cluster = ember.bucketize(target, ember.tensor(self.cutoffs[:-1], dtype=target.dtype), right=True)
        head_col = ember.where(cluster == 0, target, self.shortlist_size + cluster - 1)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = head_logprob.gather(1, head_col.unsqueeze(1)).squeeze(1)
        for i in range(self.n_clusters):
            rows = (cluster == i + 1).nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            local = target.index_select(0, rows) - self.cutoffs[i]
            tail_logprob = F.log_softmax(self.tail[i](input.index_select(0, rows)), dim=1)
            output = output.index_add(0, rows, tail_logprob.gather(1, local.unsqueeze(1)).squeeze(1))
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            tail_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(tail_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ember.cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log probabilities of every class, (N, n_classes) (or (n_classes,) for one input)."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each input: the head's argmax where it is a shortlist class,
        else the argmax of the full distribution."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        head_output = self.head(x)
        output = head_output.argmax(1)
        rare = output >= self.shortlist_size
        if bool(rare.any()):
            full = self._full_log_prob(x[rare], head_output[rare]).argmax(1)
            output = output.masked_scatter(rare, full)
        return output if batched else output.squeeze(0)
