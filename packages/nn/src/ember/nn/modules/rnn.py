"""Recurrent layers ``RNN``, ``LSTM``, ``GRU`` and the single-step cells ``RNNCell``,
``LSTMCell``, ``GRUCell``, with PyTorch's parameter names, gate order, shapes and errors.

A layer runs each (layer, direction) as: the input projection of all time steps in one
matmul, then the time loop (``_recurrence.recurrence``: one autograd node per layer and
direction; for LSTM the native ``_lstm_layer`` op runs the whole loop in C++). Dropout is
applied to each layer's output but the last, in training mode only. ``LSTMCell`` and
``GRUCell`` call the fused step ops, differentiated through their formulas (formulas/rnn.py).
"""

from __future__ import annotations

import math
import numbers
import warnings

import ember
from ember import Tensor

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from ._recurrence import recurrence
from .module import Module

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _apply_permutation(tensor: Tensor, permutation: Tensor, dim: int = 1) -> Tensor:
    return tensor.index_select(dim, permutation)


class RNNBase(Module):
    """The parameters, checks and layer loop shared by ``RNN``, ``LSTM`` and ``GRU``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        factory = {"device": device, "dtype": dtype}
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [("weight_ih", (gate_size, layer_input_size)), ("weight_hh", (gate_size, real_hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, Parameter(ember.empty(shape, **factory)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self._init_flat_weights()
        self.reset_parameters()

    def _init_flat_weights(self) -> None:
        self._flat_weights = [getattr(self, name, None) for name in self._flat_weights_names]
        self.flatten_parameters()

    def __setattr__(self, attr, value) -> None:
        names = self.__dict__.get("_flat_weights_names")
        if names is not None and attr in names:
            # keep _flat_weights current when a weight is reassigned
            self._flat_weights[names.index(attr)] = value
        super().__setattr__(attr, value)

    def flatten_parameters(self) -> None:
        """A no-op: there is no fused weight buffer to compact on the CPU."""

    def _apply(self, fn, *args, **kwargs):
        ret = super()._apply(fn, *args, **kwargs)
        self._init_flat_weights()
        return ret

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def all_weights(self) -> list:
        return [[getattr(self, weight) for weight in weights] for weights in self._all_weights]

    def _weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def check_input(self, input: Tensor, batch_sizes) -> None:
        weight_dtype = self._flat_weights[0].dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                             f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size, msg: str = "Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx: Tensor, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _unpack_input(self, input):
        """(data, batch_sizes, sorted_indices, unsorted_indices, is_batched, max_batch)."""
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            return data, batch_sizes, sorted_indices, unsorted_indices, True, int(batch_sizes[0])
        if input.dim() not in (2, 3):
            name = "LSTM" if self.mode == "LSTM" else ("GRU" if self.mode == "GRU" else "RNN")
            suffix = " tensor" if self.mode.startswith("RNN") else ""
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D{suffix} instead")
        is_batched = input.dim() == 3
        if not is_batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
        max_batch = input.size(0) if self.batch_first else input.size(1)
        return input, None, None, None, is_batched, max_batch

    def _run(self, input: Tensor, batch_sizes, h0: Tensor, c0):
        """The stacked layers over time-major or packed input; returns (output, h_n, c_n)."""
        mode = self.mode
        num_directions = 2 if self.bidirectional else 1
        if batch_sizes is None:
            if self.batch_first:
                input = input.transpose(0, 1)
            steps_count, batch = input.size(0), input.size(1)
            if steps_count == 0:
                raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
            layer_input = input.reshape(steps_count * batch, input.size(2))
            sizes = [batch] * steps_count
        else:
            layer_input = input
            sizes = [int(s) for s in batch_sizes.tolist()]
        weights = self._weights()
        per_direction = len(weights) // (self.num_layers * num_directions)
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                index = layer * num_directions + direction
                w = weights[index * per_direction:(index + 1) * per_direction]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                w_hr = w[-1] if self.proj_size > 0 else None
                if mode == "GRU" or b_ih is None:
                    xp_bias, step_bias = b_ih, b_hh
                else:
                    xp_bias, step_bias = b_ih + b_hh, None
                xp = F.linear(layer_input, w_ih, xp_bias)
                out, h, c = recurrence(mode, xp, h0[index], None if c0 is None else c0[index], w_hh, step_bias,
                                       w_hr, sizes, direction == 1, uniform=batch_sizes is None)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = outs[0] if num_directions == 1 else ember.cat(outs, 1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        if batch_sizes is None:
            output = output.reshape(steps_count, batch, output.size(1))
            if self.batch_first:
                output = output.transpose(0, 1)
        return output, ember.stack(h_n), (ember.stack(c_n) if c0 is not None else None)

    def _zeros_state(self, input: Tensor, max_batch: int, size: int) -> Tensor:
        num_directions = 2 if self.bidirectional else 1
        return ember.zeros((self.num_layers * num_directions, max_batch, size), dtype=input.dtype,
                           device=input.device)

    def _forward_single_state(self, input, hx):
        """RNN and GRU: one state tensor."""
        orig_input = input
        input, batch_sizes, sorted_indices, unsorted_indices, is_batched, max_batch = self._unpack_input(input)
        if batch_sizes is None and hx is not None:
            if not is_batched and hx.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
            if is_batched and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
            if not is_batched:
                hx = hx.unsqueeze(1)
        if hx is None:
            hx = self._zeros_state(input, max_batch, self.hidden_size)
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(input, hx, batch_sizes)
        output, hidden, _ = self._run(input, batch_sizes, hx, None)
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(hidden, unsorted_indices)
        if not is_batched:
            output = output.squeeze(0 if self.batch_first else 1)
            hidden = hidden.squeeze(1)
        return output, self.permute_hidden(hidden, unsorted_indices)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_single_state(input, hx)


class GRU(RNNBase):
    """Gated recurrent unit, gates (r, z, n); n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_single_state(input, hx)


class LSTM(RNNBase):
    """Long short-term memory, gates (i, f, g, o); with ``proj_size`` h_t = W_hr (o * tanh(c_t))."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input: Tensor, hidden, batch_sizes) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation)

    def forward(self, input, hx=None):
        orig_input = input
        input, batch_sizes, sorted_indices, unsorted_indices, is_batched, max_batch = self._unpack_input(input)
        real_hidden_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            hx = (self._zeros_state(input, max_batch, real_hidden_size),
                  self._zeros_state(input, max_batch, self.hidden_size))
            self.check_forward_args(input, hx, batch_sizes)
        else:
            if batch_sizes is None:
                if is_batched and (hx[0].dim() != 3 or hx[1].dim() != 3):
                    raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                if not is_batched:
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
            else:
                hx = self.permute_hidden(hx, sorted_indices)
            self.check_forward_args(input, hx, batch_sizes)
        output, h_n, c_n = self._run(input, batch_sizes, hx[0], hx[1])
        hidden = (h_n, c_n)
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(hidden, unsorted_indices)
        if not is_batched:
            output = output.squeeze(0 if self.batch_first else 1)
            hidden = (h_n.squeeze(1), c_n.squeeze(1))
        return output, self.permute_hidden(hidden, unsorted_indices)


class RNNCellBase(Module):
    """Weights ``weight_ih`` (chunks*hidden, input), ``weight_hh``, optional biases."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(ember.empty((num_chunks * hidden_size, input_size), **factory))
        self.weight_hh = Parameter(ember.empty((num_chunks * hidden_size, hidden_size), **factory))
        if bias:
            self.bias_ih = Parameter(ember.empty(num_chunks * hidden_size, **factory))
            self.bias_hh = Parameter(ember.empty(num_chunks * hidden_size, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = self.__dict__.get("nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check(self, name: str, input: Tensor, states) -> bool:
        """PyTorch's cell checks; returns whether the input is batched."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.size(-1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(-1)} expected {self.input_size}")
        batch = input.size(0) if input.dim() == 2 else None
        for i, state in enumerate(states):
            if state is None:
                continue
            if batch is not None and (state.dim() != 2 or state.size(0) != batch):
                size = state.size(0) if state.dim() else 1
                raise RuntimeError(f"Input batch size {batch} doesn't match hidden{i} batch size {size}")
            if state.size(-1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {state.size(-1)}, "
                                   f"expected {self.hidden_size}")
        return input.dim() == 2

    def _gates(self, input: Tensor, hx: Tensor) -> tuple[Tensor, Tensor]:
        return F.linear(input, self.weight_ih, self.bias_ih), F.linear(hx, self.weight_hh, self.bias_hh)


class RNNCell(RNNCellBase):
    """One Elman step: h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"RNNCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = self._check("RNNCell", input, [hx])
        if not is_batched:
            input = input.unsqueeze(0)
            hx = None if hx is None else hx.unsqueeze(0)
        if hx is None:
            hx = ember.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
        gi, gh = self._gates(input, hx)
        if self.nonlinearity == "tanh":
            ret = ember.tanh(gi + gh)
        elif self.nonlinearity == "relu":
            ret = ember.relu(gi + gh)
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step, gates (i, f, g, o): c' = f c + i g, h' = o tanh(c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None) -> tuple[Tensor, Tensor]:
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = self._check("LSTMCell", input, [] if hx is None else list(hx))
        if not is_batched:
            input = input.unsqueeze(0)
            hx = None if hx is None else (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        if hx is None:
            zeros = ember.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
            hx = (zeros, zeros)
        gi, gh = self._gates(input, hx[0])
        _, c, _, h = ember.ops["_lstm_cell_fused"](gi, gh, hx[1])
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step, gates (r, z, n): h' = (1 - z) n + z h."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"GRUCell: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = self._check("GRUCell", input, [hx])
        if not is_batched:
            input = input.unsqueeze(0)
            hx = None if hx is None else hx.unsqueeze(0)
        if hx is None:
            hx = ember.zeros((input.size(0), self.hidden_size), dtype=input.dtype, device=input.device)
        gi, gh = self._gates(input, hx)
        h, _ = ember.ops["_gru_cell_fused"](gi, gh, hx)
        return h if is_batched else h.squeeze(0)
