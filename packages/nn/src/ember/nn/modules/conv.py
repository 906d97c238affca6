"""Convolutions: ``Conv1d/2d/3d``, ``ConvTranspose1d/2d/3d`` and their lazy forms."""

from __future__ import annotations

import math

import ember
from ember import Tensor

from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedParameter
from ._utils import _pair, _reverse_repeat_tuple, _single, _triple
from .lazy import LazyModuleMixin
from .module import Module

__all__ = [
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
    "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    """Shared state of every convolution: geometry, weight/bias and PyTorch's default init."""

    __constants__ = ["stride", "padding", "dilation", "groups", "padding_mode", "output_padding", "in_channels",
                     "out_channels", "kernel_size"]

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's order (last dim first, before/after) for the non-zero padding modes.
        if isinstance(padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    self._reversed_padding_repeated_twice[2 * i] = total // 2
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        else:
            self._reversed_padding_repeated_twice = _reverse_repeat_tuple(padding, 2)
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = Parameter(ember.empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's default.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def __setstate__(self, state) -> None:
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class _ConvForward(_ConvNd):
    """Conv1d/2d/3d: non-zero padding modes pad explicitly, then convolve without padding."""

    _conv = None  # the functional form, set per subclass
    _n = 0

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = type(self)._conv
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, (0,) * self._n, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


def _conv_init(self, tup, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
               padding_mode, device, dtype) -> None:
    padding = padding if isinstance(padding, str) else tup(padding)
    _ConvNd.__init__(self, in_channels, out_channels, tup(kernel_size), tup(stride), padding, tup(dilation), False,
                     tup(0), groups, bias, padding_mode, device=device, dtype=dtype)


class Conv1d(_ConvForward):
    """1-d convolution over (N, C_in, L) or (C_in, L) inputs."""

    _conv = staticmethod(F.conv1d)
    _n = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        _conv_init(self, _single, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                   padding_mode, device, dtype)


class Conv2d(_ConvForward):
    """2-d convolution over (N, C_in, H, W) or (C_in, H, W) inputs."""

    _conv = staticmethod(F.conv2d)
    _n = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        _conv_init(self, _pair, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                   padding_mode, device, dtype)


class Conv3d(_ConvForward):
    """3-d convolution over (N, C_in, D, H, W) or (C_in, D, H, W) inputs."""

    _conv = staticmethod(F.conv3d)
    _n = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        _conv_init(self, _triple, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                   padding_mode, device, dtype)


class _ConvTransposeNd(_ConvNd):
    """Transposed convolutions (the adjoint of a conv); ``forward`` may pick the output size."""

    _conv = None
    _n = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, transposed,
                         output_padding, groups, bias, padding_mode, device=device, dtype=dtype)

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims,
                        dilation=None) -> list:
        """The output_padding that makes the result ``output_size`` (PyTorch's rule and messages)."""
        if output_size is None:
            return list(_single(self.output_padding))
        has_batch_dim = input.dim() == num_spatial_dims + 2
        num_non_spatial = 2 if has_batch_dim else 1
        if not isinstance(output_size, (list, tuple)):  # a list or tuple stays as given (the message prints it)
            output_size = list(output_size)
        if len(output_size) == num_non_spatial + num_spatial_dims:
            output_size = output_size[num_non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                             f"{num_spatial_dims} or {num_non_spatial + num_spatial_dims} elements (got "
                             f"{len(output_size)})")
        min_sizes, max_sizes = [], []
        for d in range(num_spatial_dims):
            dil = dilation[d] if dilation is not None else 1
            size = (input.size(d + num_non_spatial) - 1) * stride[d] - 2 * padding[d] + dil * (kernel_size[d] - 1) + 1
            min_sizes.append(size)
            max_sizes.append(size + stride[d] - 1)
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {min_sizes} "
                                 f"to {max_sizes} (for an input of {input.size()[2:]})")
        return [output_size[d] - min_sizes[d] for d in range(num_spatial_dims)]

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for {type(self).__name__}")
        output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                              self._n, self.dilation)
        return type(self)._conv(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                self.groups, self.dilation)


def _conv_t_init(self, tup, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                 dilation, padding_mode, device, dtype) -> None:
    _ConvTransposeNd.__init__(self, in_channels, out_channels, tup(kernel_size), tup(stride), tup(padding),
                              tup(dilation), True, tup(output_padding), groups, bias, padding_mode, device=device,
                              dtype=dtype)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution ("deconvolution")."""

    _conv = staticmethod(F.conv_transpose1d)
    _n = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        _conv_t_init(self, _single, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups,
                     bias, dilation, padding_mode, device, dtype)


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution ("deconvolution")."""

    _conv = staticmethod(F.conv_transpose2d)
    _n = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        _conv_t_init(self, _pair, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups,
                     bias, dilation, padding_mode, device, dtype)


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution ("deconvolution")."""

    _conv = staticmethod(F.conv_transpose3d)
    _n = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        _conv_t_init(self, _triple, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups,
                     bias, dilation, padding_mode, device, dtype)


# -- lazy forms: in_channels comes from the first input ----------------------------------------

class _LazyConvXdMixin(LazyModuleMixin):
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with ember.no_grad():
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        no_batch = self._n + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise RuntimeError(f"Expected {no_batch}D (unbatched) or {no_batch + 1}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == no_batch + 1 else input.shape[0]


def _make_lazy(base, transposed: bool):
    """The lazy twin of ``base``: built with in_channels=0 and uninitialized weight/bias."""

    if transposed:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                     dilation=1, padding_mode="zeros", device=None, dtype=None) -> None:
            LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False,
                                     dilation, padding_mode, device, dtype)
            _lazy_params(self, out_channels, bias, device, dtype)
    else:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                     padding_mode="zeros", device=None, dtype=None) -> None:
            LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False,
                                     padding_mode, device, dtype)
            _lazy_params(self, out_channels, bias, device, dtype)

    name = "Lazy" + base.__name__
    doc = f"A ``{base.__name__}`` whose ``in_channels`` is taken from the first input it sees."
    cls = type(name, (_LazyConvXdMixin, base), {"__init__": __init__, "cls_to_become": base, "__doc__": doc,
                                                "__module__": __name__})
    __init__.__qualname__ = f"{name}.__init__"
    return cls


def _lazy_params(self, out_channels, bias, device, dtype) -> None:
    self.weight = UninitializedParameter(device=device, dtype=dtype)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(device=device, dtype=dtype)


LazyConv1d = _make_lazy(Conv1d, False)
LazyConv2d = _make_lazy(Conv2d, False)
LazyConv3d = _make_lazy(Conv3d, False)
LazyConvTranspose1d = _make_lazy(ConvTranspose1d, True)
LazyConvTranspose2d = _make_lazy(ConvTranspose2d, True)
LazyConvTranspose3d = _make_lazy(ConvTranspose3d, True)
