// Direct float32 2-d convolution for layers with few input taps (C_in * kh * kw small) and few
// output channels: LeNet's 1->6 and 6->16 5x5, an MNIST stem's 1->32 3x3. There im2col + gemm
// loses half its time to building and re-packing a column matrix for a gemm only 6-16 rows
// tall; these kernels read the (zero-padded) image in place instead (conv_direct.cpp). Wider
// layers up to 1024 taps and 128 output channels (ResNet's 64->64 3x3) take them too, where the
// gemm path runs at half the FMA peak (direct_conv_fits says when).
#pragma once

#include <cstdint>

namespace ember {

// One 2-d convolution (groups 1): x (n, cx, h, w), y (n, cy, oh, ow), weight (cy, cx, kh, kw).
struct DirectConv {
  int64_t n, cx, cy, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

// Whether the direct kernels pay off for this geometry (see conv_direct.cpp for the bounds).
bool direct_conv_fits(const DirectConv& c);

// y = conv(x, weight) + bias (bias may be null).
void direct_conv_forward(float* y, const float* x, const float* weight, const float* bias, const DirectConv& c);

// x = the input gradient for output gradient y (+ bias per input channel, may be null): the
// forward kernel on y padded by dil * (k - 1) - pad with the flipped, transposed weight; at a
// stride above 1 (undilated) the same per output phase. Only for pad <= dil * (k - 1);
// direct_conv_input_fits says so.
bool direct_conv_input_fits(const DirectConv& c);
void direct_conv_backward_input(float* x, const float* y, const float* weight, const float* bias,
                                const DirectConv& c);

// grad_weight = sum over images and output pixels of y[co, pixel] * x[tap at pixel] (overwritten).
void direct_conv_backward_weight(float* grad_weight, const float* x, const float* y, const DirectConv& c);

}  // namespace ember
