// Direct float32 convolution kernels for small C_in * kh * kw (conv_direct.h says when).
//
// The image is copied once into a zero-padded buffer, so every tap of every output pixel is a
// plain load at pixel_base + tap_offset with no bounds test. The forward is then a gemm whose
// B operand is read straight from the image (an implicit im2col): a register tile of P output
// pixels x NV vectors of output channels accumulates over all taps, each step one load of NV
// weight vectors (tap-major, transposed once per call) and P broadcasts of image values.
// The weight gradient is the same product with the roles turned: a tile of taps x output
// channels accumulates over every output pixel, reading the output gradient transposed to
// (pixel, channel). The input gradient at stride 1 is the forward kernel itself on the padded
// output gradient with the flipped, transposed weight.
#include "conv_direct.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../common/parallel.h"
#include "../common/vecmath.h"

namespace ember {

namespace {

constexpr int64_t kLanes = kVecFloats;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// v in every lane: one broadcast load (VecF{} + v would add +0.0 first, an extra instruction
// on the critical path: -0.0 + 0.0 is not -0.0).
// (A lane-by-lane initializer compiles to a chain of inserts: the intrinsic, then.)
__attribute__((always_inline)) inline VecF splat(const float* p) {
#if defined(__AVX512F__)
  return (VecF)_mm512_set1_ps(*p);
#elif defined(__AVX__)
  return (VecF)_mm256_broadcast_ss(p);
#else
  return VecF{} + *p;
#endif
}

struct Padded {
  int64_t hp, wp, plane;
};

Padded padded_dims(const DirectConv& c) {
  Padded p{c.h + 2 * c.ph, c.w + 2 * c.pw, 0};
  p.plane = p.hp * p.wp;
  return p;
}

// xp (cx planes of hp x wp) <- x with ph / pw zeros around each plane. Only the border is
// zeroed (a fill of the whole buffer first was a third pass over it, ~7% of a stride-2 3x3
// layer's forward).
void pad_image(float* xp, const float* x, const DirectConv& c, const Padded& p) {
  for (int64_t ch = 0; ch < c.cx; ++ch) {
    float* plane = xp + ch * p.plane;
    std::fill(plane, plane + c.ph * p.wp, 0.0f);
    for (int64_t r = 0; r < c.h; ++r) {
      float* row = plane + (r + c.ph) * p.wp;
      std::fill(row, row + c.pw, 0.0f);
      std::memcpy(row + c.pw, x + (ch * c.h + r) * c.w, sizeof(float) * c.w);
      std::fill(row + c.pw + c.w, row + p.wp, 0.0f);
    }
    std::fill(plane + (c.ph + c.h) * p.wp, plane + p.plane, 0.0f);
  }
}

// Offsets in the padded image of each tap (ci, a, b), in the weight's flattening order.
std::vector<int64_t> tap_offsets(const DirectConv& c, const Padded& p) {
  std::vector<int64_t> off(static_cast<size_t>(c.cx * c.kh * c.kw));
  size_t t = 0;
  for (int64_t ci = 0; ci < c.cx; ++ci)
    for (int64_t a = 0; a < c.kh; ++a)
      for (int64_t b = 0; b < c.kw; ++b) off[t++] = ci * p.plane + a * c.dh * p.wp + b * c.dw;
  return off;
}

inline int64_t pixel_base(const DirectConv& c, const Padded& p, int64_t pix) {
  return (pix / c.ow) * c.sh * p.wp + (pix % c.ow) * c.sw;
}

// out[p][v] = sum over taps t of img[p][off[t]] * wt[t][v], for P pixel pointers img and NV
// weight vectors per tap (row stride wld floats).
template <int P, int NV>
__attribute__((always_inline)) inline void pixel_tile(const float* const* img, const int64_t* off, int64_t K,
                                                      const float* wt, int64_t wld, float* out) {
  VecF acc[P][NV];
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < NV; ++v) acc[p][v] = VecF{};
  for (int64_t t = 0; t < K; ++t) {
    VecF w[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&w[v], wt + t * wld + v * kLanes, sizeof(VecF));
    const int64_t o = off[t];
    for (int p = 0; p < P; ++p) {
      const VecF xb = splat(img[p] + o);
      for (int v = 0; v < NV; ++v) acc[p][v] += xb * w[v];
    }
  }
  std::memcpy(out, acc, sizeof(acc));
}

// One image: yi (cy, L) = conv of the padded image xp, for the channel block [cb, cb + NV * lanes).
template <int P, int NV>
void forward_block(float* yi, const float* xp, const std::vector<int64_t>& off, const float* wt, int64_t copad,
                   int64_t cb, const float* bias, const DirectConv& c, const Padded& pd) {
  const int64_t L = c.oh * c.ow, K = static_cast<int64_t>(off.size());
  alignas(64) float out[P * NV * kLanes];
  const float* img[P];
  for (int64_t p0 = 0; p0 < L; p0 += P) {
    const int64_t np = std::min<int64_t>(P, L - p0);
    for (int p = 0; p < P; ++p) img[p] = xp + pixel_base(c, pd, p0 + std::min<int64_t>(p, np - 1));
    pixel_tile<P, NV>(img, off.data(), K, wt + cb, copad, out);
    const int64_t nco = std::min<int64_t>(NV * kLanes, c.cy - cb);
    for (int64_t j = 0; j < nco; ++j) {
      float* yrow = yi + (cb + j) * L + p0;
      const float bj = bias ? bias[cb + j] : 0.0f;
      for (int64_t p = 0; p < np; ++p) yrow[p] = out[p * NV * kLanes + j] + bj;
    }
  }
}

// Few output channels at stride 1 (cy <= 8: LeNet's 1->6, its 16->6 input gradient; or at most
// 16, one vector, where a channel tile would spend a broadcast on every multiply-add): the lanes
// run along output rows instead, CO channels x two vectors of pixels per tile, each tap two row
// loads and CO weight broadcasts feeding two multiply-adds each. The two vectors are 32 pixels of
// one row, or, for rows of at most 16 (LeNet's 14x14 and 10x10), the same pixels of two rows. xp
// has kRowSlack readable floats past its end (a tile's last lanes may run past the row; they are
// computed and dropped).
constexpr int64_t kRowSlack = 2 * kLanes;

template <int CO>
void forward_rows(float* yi, const float* xp, const std::vector<int64_t>& off, const float* wt, int64_t copad,
                  int64_t cb, const float* bias, const DirectConv& c, const Padded& pd) {
  const int64_t L = c.oh * c.ow, K = static_cast<int64_t>(off.size());
  const bool two_rows = c.ow <= kLanes;
  const int64_t width = two_rows ? kLanes : 2 * kLanes;
  alignas(64) float out[CO * 2 * kLanes];
  for (int64_t r = 0; r < c.oh; r += two_rows ? 2 : 1) {
    // The second vector: the next row (the row itself again past the last one), or lanes 16-31.
    const bool pair = two_rows && r + 1 < c.oh;
    for (int64_t q0 = 0; q0 < c.ow; q0 += width) {
      const int64_t nq = std::min<int64_t>(width, c.ow - q0);
      const float* src = xp + r * c.sh * pd.wp + q0;
      const float* src1 = two_rows ? (pair ? src + c.sh * pd.wp : src) : src + kLanes;
      VecF acc[CO][2];
      for (int j = 0; j < CO; ++j) acc[j][0] = acc[j][1] = VecF{};
      for (int64_t t = 0; t < K; ++t) {
        VecF x0, x1;
        std::memcpy(&x0, src + off[t], sizeof(VecF));
        std::memcpy(&x1, src1 + off[t], sizeof(VecF));
        const float* w = wt + t * copad + cb;
        for (int j = 0; j < CO; ++j) {
          const VecF wb = splat(w + j);
          acc[j][0] += wb * x0;
          acc[j][1] += wb * x1;
        }
      }
      std::memcpy(out, acc, sizeof(acc));
      for (int j = 0; j < CO; ++j) {
        float* yrow = yi + (cb + j) * L + r * c.ow + q0;
        const float bj = bias ? bias[cb + j] : 0.0f;
        const float* oj = out + j * 2 * kLanes;
        for (int64_t q = 0; q < nq; ++q) yrow[q] = oj[q] + bj;
        if (pair)
          for (int64_t q = 0; q < nq; ++q) yrow[c.ow + q] = oj[kLanes + q] + bj;
      }
    }
  }
}

// Writes a row tile (acc[p]: the channels of pixel p, P <= kLanes pixels) to the output rows
// yi[j * L + r * P + p] (+ bias[j]) for the cy channels. With AVX-512 the 16 x 16 tile is
// transposed in registers (64 shuffles) and each channel's P pixels go out as one masked store;
// the scalar form was cy * P loads and stores through a stack copy (224 of each on LeNet's
// 16-channel 14-pixel rows, for ~900 multiply-adds). Same values either way (x + bias, bias 0
// where there is none). LeNet's 6->16 5x5 forward, A/B in one process (load 11-16, session 18):
// padding 2 622 -> 545 us, unpadded 376 -> 329 us (PyTorch 640 / 418).
template <int P>
__attribute__((always_inline)) inline void store_row_tile(const VecF* acc, float* yi, int64_t L, int64_t r,
                                                          int64_t cy, const float* bias) {
#if defined(__AVX512F__)
  if constexpr (kLanes == 16) {
    __m512 a[16], b[16];
    for (int p = 0; p < 16; ++p) a[p] = p < P ? (__m512)acc[p] : _mm512_setzero_ps();
    // In each 128-bit lane: rows 2i and 2i + 1 interleaved.
    for (int i = 0; i < 8; ++i) {
      b[2 * i] = _mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]);
      b[2 * i + 1] = _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]);
    }
    // a[4i + c], 128-bit lane l: rows 4i..4i+3 of channel 4l + c.
    for (int i = 0; i < 4; ++i) {
      a[4 * i] = _mm512_shuffle_ps(b[4 * i], b[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      a[4 * i + 1] = _mm512_shuffle_ps(b[4 * i], b[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      a[4 * i + 2] = _mm512_shuffle_ps(b[4 * i + 1], b[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      a[4 * i + 3] = _mm512_shuffle_ps(b[4 * i + 1], b[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    // b[j]: channel j, pixels 0..15.
    for (int c = 0; c < 4; ++c) {
      const __m512 x0 = _mm512_shuffle_f32x4(a[c], a[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 x1 = _mm512_shuffle_f32x4(a[c], a[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
      const __m512 y0 = _mm512_shuffle_f32x4(a[8 + c], a[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 y1 = _mm512_shuffle_f32x4(a[8 + c], a[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
      b[c] = _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0));
      b[8 + c] = _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1));
      b[4 + c] = _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0));
      b[12 + c] = _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1));
    }
    const __mmask16 m = static_cast<__mmask16>((1u << P) - 1u);
    for (int64_t j = 0; j < cy; ++j) {
      const __m512 v = _mm512_add_ps(b[j], _mm512_set1_ps(bias ? bias[j] : 0.0f));
      _mm512_mask_storeu_ps(yi + j * L + r * P, m, v);
    }
    return;
  }
#endif
  alignas(64) float out[P * kLanes];
  std::memcpy(out, acc, sizeof(VecF) * P);
  for (int64_t j = 0; j < cy; ++j) {
    float* yrow = yi + j * L + r * P;
    const float bj = bias ? bias[j] : 0.0f;
    for (int p = 0; p < P; ++p) yrow[p] = out[p * kLanes + j] + bj;
  }
}

// One vector of output channels (8 < cy <= 16) at stride 1 on rows of P = ow pixels (8-16):
// tiles of one whole output row, the lanes along the channels. Each tap is one weight-vector load
// and P multiply-adds taking their image value as a broadcast memory operand at a fixed
// displacement from one pointer (a row's pixels are consecutive in the padded image), and every
// lane computes a wanted result: forward_rows' two-row vectors use 10 of 16 lanes on LeNet's
// 10-pixel rows. LeNet's 6->16 5x5 forward, A/B in one process (load 16): 514 -> 334 us unpadded
// (PyTorch 363), 733 -> 639 us with padding 2 (14-pixel rows; PyTorch 544).
template <int P>
void forward_row_tiles(float* yi, const float* xp, const std::vector<int64_t>& off, const float* wt, int64_t copad,
                       const float* bias, const DirectConv& c, const Padded& pd) {
  const int64_t L = c.oh * c.ow, K = static_cast<int64_t>(off.size());
  for (int64_t r = 0; r < c.oh; ++r) {
    const float* src = xp + r * c.sh * pd.wp;
    VecF acc[P];
    for (int p = 0; p < P; ++p) acc[p] = VecF{};
    for (int64_t t = 0; t < K; ++t) {
      VecF w;
      std::memcpy(&w, wt + t * copad, sizeof(VecF));
      const float* s = src + off[t];
      for (int p = 0; p < P; ++p) acc[p] += splat(s + p) * w;
    }
    store_row_tile<P>(acc, yi, L, r, c.cy, bias);
  }
}

// forward_row_tiles for a "same" padding of KW = 2 PW + 1 columns (LeNet's padded 5x5, a 3x3
// with padding 1), dilation 1 across: the multiply-adds that would read the zero border are left
// out instead of computed. Taps whose image row is padding are skipped per output row (the rows
// valid for output row r are a contiguous range of each channel's taps), and for the tap column b
// only the pixels p whose column p + b lies in the image run (P, KW and PW are compile-time
// constants, so each range is fixed and the accumulators stay in registers). For LeNet's 6->16
// 5x5 on 14x14 with padding 2 that is 64 of 70 tap rows and 64 of 70 row pixels: 16% fewer
// multiply-adds. The terms left out are 0 * w, so a sum differs from forward_row_tiles' at most in
// the sign of a zero, except for an infinite or NaN weight: times a padded zero it gave NaN there,
// while here (and in PyTorch) the border contributes nothing.
template <int P, int KW, int PW>
void forward_row_tiles_same(float* yi, const float* xp, const float* wt, int64_t copad, const float* bias,
                            const DirectConv& c, const Padded& pd) {
  static_assert(KW == 2 * PW + 1, "a 'same' padding");
  const int64_t L = c.oh * c.ow;
  const int64_t kh = c.kh;
  for (int64_t r = 0; r < c.oh; ++r) {
    // Taps a with padded row r * sh + a * dh in [ph, ph + h).
    const int64_t top = r * c.sh;
    int64_t a0 = 0, a1 = kh;
    while (a0 < kh && top + a0 * c.dh < c.ph) ++a0;
    while (a1 > a0 && top + (a1 - 1) * c.dh >= c.ph + c.h) --a1;
    VecF acc[P];
    for (int p = 0; p < P; ++p) acc[p] = VecF{};
    for (int64_t ci = 0; ci < c.cx; ++ci) {
      for (int64_t a = a0; a < a1; ++a) {
        const float* s = xp + ci * pd.plane + (top + a * c.dh) * pd.wp;
        const float* w = wt + ((ci * kh + a) * KW) * copad;
#pragma GCC unroll 16
        for (int b = 0; b < KW; ++b) {
          VecF wv;
          std::memcpy(&wv, w + b * copad, sizeof(VecF));
          // Pixels whose column p + b is in the image: PW <= p + b < PW + w, w = P + KW - 1 - 2 PW.
          const int lo = PW - b > 0 ? PW - b : 0;
          const int hi = P + KW - 1 - PW - b < P ? P + KW - 1 - PW - b : P;
#pragma GCC unroll 32
          for (int p = lo; p < hi; ++p) acc[p] += splat(s + b + p) * wv;
        }
      }
    }
    store_row_tile<P>(acc, yi, L, r, c.cy, bias);
  }
}

template <int KW, int PW>
bool forward_row_tiles_same_any(float* yi, const float* xp, const float* wt, int64_t copad, const float* bias,
                                const DirectConv& c, const Padded& pd) {
  switch (c.ow) {
    case 8: forward_row_tiles_same<8, KW, PW>(yi, xp, wt, copad, bias, c, pd); return true;
    case 10: forward_row_tiles_same<10, KW, PW>(yi, xp, wt, copad, bias, c, pd); return true;
    case 12: forward_row_tiles_same<12, KW, PW>(yi, xp, wt, copad, bias, c, pd); return true;
    case 14: forward_row_tiles_same<14, KW, PW>(yi, xp, wt, copad, bias, c, pd); return true;
    case 16: forward_row_tiles_same<16, KW, PW>(yi, xp, wt, copad, bias, c, pd); return true;
    default: return false;
  }
}

// forward_row_tiles for this geometry; false where it does not apply.
bool forward_row_tiles_any(float* yi, const float* xp, const std::vector<int64_t>& off, const float* wt,
                           int64_t copad, const float* bias, const DirectConv& c, const Padded& pd) {
  if (c.sw != 1 || c.cy <= 8 || c.cy > kLanes) return false;
  // ow == w: a "same" padding at stride 1 across (ow = w + 2 pw - kw + 1).
  if (c.dw == 1 && c.ow == c.w && (c.ph > 0 || c.pw > 0)) {
    if (c.kw == 5 && c.pw == 2 && forward_row_tiles_same_any<5, 2>(yi, xp, wt, copad, bias, c, pd)) return true;
    if (c.kw == 3 && c.pw == 1 && forward_row_tiles_same_any<3, 1>(yi, xp, wt, copad, bias, c, pd)) return true;
  }
  switch (c.ow) {
    case 8: forward_row_tiles<8>(yi, xp, off, wt, copad, bias, c, pd); return true;
    case 10: forward_row_tiles<10>(yi, xp, off, wt, copad, bias, c, pd); return true;
    case 12: forward_row_tiles<12>(yi, xp, off, wt, copad, bias, c, pd); return true;
    case 14: forward_row_tiles<14>(yi, xp, off, wt, copad, bias, c, pd); return true;
    case 16: forward_row_tiles<16>(yi, xp, off, wt, copad, bias, c, pd); return true;
    default: return false;
  }
}

void forward_rows_any(int64_t co, float* yi, const float* xp, const std::vector<int64_t>& off, const float* wt,
                      int64_t copad, int64_t cb, const float* bias, const DirectConv& c, const Padded& pd) {
  switch (co) {
    case 1: forward_rows<1>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 2: forward_rows<2>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 3: forward_rows<3>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 4: forward_rows<4>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 5: forward_rows<5>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 6: forward_rows<6>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    case 7: forward_rows<7>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
    default: forward_rows<8>(yi, xp, off, wt, copad, cb, bias, c, pd); break;
  }
}

// Also for very few taps (a 1-channel 3x3 stem), where the channel tiles' scattered stores of
// P x 16 results would outweigh their K x 12 multiply-adds. Rows of 8 to 16 pixels go two at a
// time (forward_rows): LeNet's 6->16 5x5 forward went 1.8x -> 1.0-1.2x PyTorch, its input
// gradient (16->6 on 14x14) with it.
bool by_rows(const DirectConv& c) {
  return c.sw == 1 && c.ow >= kLanes / 2 && (c.cy <= 16 || c.cx * c.kh * c.kw <= 32);
}

// The weight (cy, K) transposed to tap-major (K, copad), channels beyond cy zero.
std::vector<float> tap_major(const float* weight, int64_t cy, int64_t K, int64_t copad) {
  std::vector<float> wt(static_cast<size_t>(K * copad), 0.0f);
  for (int64_t co = 0; co < cy; ++co)
    for (int64_t t = 0; t < K; ++t) wt[static_cast<size_t>(t * copad + co)] = weight[co * K + t];
  return wt;
}

}  // namespace

bool direct_conv_fits(const DirectConv& c) {
  // Few taps (the transposed weight block, K x 16 floats, stays in L1) and few output channels
  // (beyond 32 the gemm's own tiles are tall enough to run near its peak), or see below.
  const int64_t K = c.cx * c.kh * c.kw;
  if (K < 1 || K > 1024 || c.cy < 1 || c.cy > 128 || c.oh < 1 || c.ow < 1) return false;
  if (K <= 512 && c.cy <= 32) return true;
  // Wider layers (32->64 3x3 on 28x28: 1.28x -> 1.0x torch) while the padded image stays in L2;
  // 1x1 kernels are plain gemms already.
  if (c.kh * c.kw == 1) return false;
  const int64_t wp = c.w + 2 * c.pw;
  if (c.cx * (c.h + 2 * c.ph) * wp * int64_t(sizeof(float)) <= (int64_t(384) << 10)) return true;
  // A larger image (ResNet's 64->64 3x3 on 56x56, 860 KiB padded: 1.9x -> 0.97x torch, forward
  // and backward alike, where the gemm path runs at half the FMA peak) while the rows that one
  // output row's taps read, over all cx planes, stay in L2, and every thread has an image of its
  // own (these kernels split the batch; the gemm path threads one image's product).
  const int64_t band = c.cx * ((c.kh - 1) * c.dh + 1) * wp * int64_t(sizeof(float));
  return band <= (int64_t(384) << 10) && c.n >= get_num_threads();
}

bool direct_conv_input_fits(const DirectConv& c) {
  if (c.ph > c.dh * (c.kh - 1) || c.pw > c.dw * (c.kw - 1)) return false;
  // Strided: by output phases (backward_input_phases), undilated only.
  if ((c.sh != 1 || c.sw != 1) && (c.dh != 1 || c.dw != 1 || c.sh < 1 || c.sw < 1)) return false;
  // The input gradient's "output channels" are cx: one channel would use 1 lane of 8.
  DirectConv t = c;
  t.cx = c.cy;
  t.cy = c.cx;
  return c.cx >= 4 && direct_conv_fits(t);
}

void direct_conv_forward(float* y, const float* x, const float* weight, const float* bias, const DirectConv& c) {
  const Padded pd = padded_dims(c);
  const std::vector<int64_t> off = tap_offsets(c, pd);
  const int64_t K = static_cast<int64_t>(off.size()), L = c.oh * c.ow;
  const int64_t copad = round_up(c.cy, kLanes);
  const std::vector<float> wt = tap_major(weight, c.cy, K, copad);
  parallel_for(c.n, 1, [&](int64_t b, int64_t e) {
    std::vector<float> xp(static_cast<size_t>(c.cx * pd.plane + kRowSlack), 0.0f);
    for (int64_t i = b; i < e; ++i) {
      pad_image(xp.data(), x + i * c.cx * c.h * c.w, c, pd);
      float* yi = y + i * c.cy * L;
      if (forward_row_tiles_any(yi, xp.data(), off, wt.data(), copad, bias, c, pd)) continue;
      if (by_rows(c)) {
        // Blocks of 8 channels (16 accumulators), split evenly: 16 -> 8 + 8, 12 -> 6 + 6.
        const int64_t blocks = (c.cy + 7) / 8, per = (c.cy + blocks - 1) / blocks;
        for (int64_t cb = 0; cb < c.cy; cb += per)
          forward_rows_any(std::min<int64_t>(per, c.cy - cb), yi, xp.data(), off, wt.data(), copad, cb, bias, c, pd);
        continue;
      }
      int64_t cb = 0;
      // 6 pixels x 4 channel vectors where the channels allow: per tap 4 weight loads and 6
      // broadcasts feed 24 multiply-adds (6 x 2: 8 for 12). ResNet's 64->64 3x3 on 56x56 in one
      // process: 160 -> 198 GFLOP/s at stride 1, 135 -> 166 at stride 2 (PyTorch 183 / 141).
      // AVX-512 only: its 32 vector registers hold the 24 accumulators; AVX2's 16 would spill.
      if constexpr (kVecBytes == 64)
        for (; cb + 4 * kLanes <= copad; cb += 4 * kLanes)
          forward_block<6, 4>(yi, xp.data(), off, wt.data(), copad, cb, bias, c, pd);
      for (; cb + 2 * kLanes <= copad; cb += 2 * kLanes)
        forward_block<6, 2>(yi, xp.data(), off, wt.data(), copad, cb, bias, c, pd);
      if (cb < copad) forward_block<12, 1>(yi, xp.data(), off, wt.data(), copad, cb, bias, c, pd);
    }
  });
}

namespace {

// The input gradient at stride (sh, sw), undilated, by output phases: the input pixels
// (py + sh i, px + sw j) of one phase receive only the taps a = a0 + sh m, b = b0 + sw n with
// a0 = (py + ph) mod sh (b0 likewise), from the output pixel (dy + i - m, dx + j - n),
// dy = (py + ph - a0) / sh. With m = KA - 1 - a' that is a stride-1 correlation of the output
// gradient with the flipped sub-kernel (KA x KB taps, KA = ceil((kh - a0) / sh)), which the
// forward kernel computes; the rows it reads (dy - KA + 1 on) are copied once per phase with the
// zeros around them. The gemm path (a KxL column product then col2im) ran ResNet's 64->64 3x3
// stride-2 input gradient at 70 GFLOP/s; phases of 1-4 taps a channel keep the forward's rate.
void backward_input_phases(float* x, const float* y, const float* weight, const float* bias, const DirectConv& c) {
  std::vector<float> g, wf, part;
  for (int64_t py = 0; py < c.sh; ++py)
    for (int64_t px = 0; px < c.sw; ++px) {
      const int64_t ni = py < c.h ? (c.h - py + c.sh - 1) / c.sh : 0;
      const int64_t nj = px < c.w ? (c.w - px + c.sw - 1) / c.sw : 0;
      if (ni == 0 || nj == 0) continue;
      const int64_t a0 = (py + c.ph) % c.sh, b0 = (px + c.pw) % c.sw;
      const int64_t ka = a0 < c.kh ? (c.kh - a0 + c.sh - 1) / c.sh : 0;
      const int64_t kb = b0 < c.kw ? (c.kw - b0 + c.sw - 1) / c.sw : 0;
      const int64_t cxn = c.n * c.cx;
      if (ka == 0 || kb == 0) {  // no tap reaches this phase: the bias alone
        for (int64_t q = 0; q < cxn; ++q)
          for (int64_t i = 0; i < ni; ++i)
            for (int64_t j = 0; j < nj; ++j)
              x[(q * c.h + py + c.sh * i) * c.w + px + c.sw * j] = bias ? bias[q % c.cx] : 0.0f;
        continue;
      }
      const int64_t r0 = (py + c.ph - a0) / c.sh - (ka - 1), q0 = (px + c.pw - b0) / c.sw - (kb - 1);
      const int64_t hg = ni + ka - 1, wg = nj + kb - 1;
      // g (n, cy, hg, wg): output-gradient rows r0.. and columns q0.., zero outside it.
      g.assign(static_cast<size_t>(c.n * c.cy * hg * wg), 0.0f);
      const int64_t jlo = std::max<int64_t>(0, -q0), jhi = std::min<int64_t>(wg, c.ow - q0);
      for (int64_t p = 0; p < c.n * c.cy; ++p)
        for (int64_t rr = 0; rr < hg; ++rr) {
          const int64_t gr = r0 + rr;
          if (gr < 0 || gr >= c.oh || jlo >= jhi) continue;
          std::memcpy(g.data() + (p * hg + rr) * wg + jlo, y + (p * c.oh + gr) * c.ow + q0 + jlo,
                      sizeof(float) * (jhi - jlo));
        }
      wf.resize(static_cast<size_t>(c.cx * c.cy * ka * kb));
      for (int64_t ci = 0; ci < c.cx; ++ci)
        for (int64_t co = 0; co < c.cy; ++co)
          for (int64_t a = 0; a < ka; ++a)
            for (int64_t b = 0; b < kb; ++b)
              wf[static_cast<size_t>(((ci * c.cy + co) * ka + a) * kb + b)] =
                  weight[((co * c.cx + ci) * c.kh + a0 + c.sh * (ka - 1 - a)) * c.kw + b0 + c.sw * (kb - 1 - b)];
      const DirectConv t{c.n, c.cy, c.cx, hg, wg, ni, nj, ka, kb, 1, 1, 0, 0, 1, 1};
      part.resize(static_cast<size_t>(cxn * ni * nj));
      direct_conv_forward(part.data(), g.data(), wf.data(), bias, t);
      for (int64_t q = 0; q < cxn; ++q)
        for (int64_t i = 0; i < ni; ++i) {
          float* dst = x + (q * c.h + py + c.sh * i) * c.w + px;
          const float* src = part.data() + (q * ni + i) * nj;
          for (int64_t j = 0; j < nj; ++j) dst[c.sw * j] = src[j];
        }
    }
}

}  // namespace

void direct_conv_backward_input(float* x, const float* y, const float* weight, const float* bias,
                                const DirectConv& c) {
  if (c.sh != 1 || c.sw != 1) {
    backward_input_phases(x, y, weight, bias, c);
    return;
  }
  // gx = conv(gy padded by d (k - 1) - p, w') with w'[ci][co][a][b] = w[co][ci][kh-1-a][kw-1-b].
  DirectConv t{c.n, c.cy, c.cx, c.oh, c.ow, c.h, c.w, c.kh, c.kw, 1, 1,
               c.dh * (c.kh - 1) - c.ph, c.dw * (c.kw - 1) - c.pw, c.dh, c.dw};
  const int64_t kk = c.kh * c.kw;
  std::vector<float> wf(static_cast<size_t>(c.cx * c.cy * kk));
  for (int64_t co = 0; co < c.cy; ++co)
    for (int64_t ci = 0; ci < c.cx; ++ci)
      for (int64_t a = 0; a < c.kh; ++a)
        for (int64_t b = 0; b < c.kw; ++b)
          wf[static_cast<size_t>(((ci * c.cy + co) * c.kh + a) * c.kw + b)] =
              weight[((co * c.cx + ci) * c.kh + (c.kh - 1 - a)) * c.kw + (c.kw - 1 - b)];
  direct_conv_forward(x, y, wf.data(), bias, t);
}

namespace {

// acc (K, copad) += over the output pixels of one image: tiles of TT taps x NV channel vectors,
// each pixel one load of NV gradient vectors and TT broadcasts of image values.
template <int TT, int NV>
void weight_block(float* acc, const float* xp, const float* gyt, const std::vector<int64_t>& off, int64_t copad,
                  int64_t cb, const DirectConv& c, const Padded& pd) {
  const int64_t K = static_cast<int64_t>(off.size());
  for (int64_t t0 = 0; t0 < K; t0 += TT) {
    const int64_t nt = std::min<int64_t>(TT, K - t0);
    int64_t o[TT];
    for (int j = 0; j < TT; ++j) o[j] = off[static_cast<size_t>(t0 + std::min<int64_t>(j, nt - 1))];
    VecF a[TT][NV];
    for (int j = 0; j < TT; ++j)
      for (int v = 0; v < NV; ++v) a[j][v] = VecF{};
    int64_t pix = 0;
    for (int64_t r = 0; r < c.oh; ++r) {
      const float* row = xp + r * c.sh * pd.wp;
      for (int64_t q = 0; q < c.ow; ++q, ++pix) {
        const float* px = row + q * c.sw;
        VecF g[NV];
        for (int v = 0; v < NV; ++v) std::memcpy(&g[v], gyt + pix * copad + cb + v * kLanes, sizeof(VecF));
        for (int j = 0; j < TT; ++j) {
          const VecF xb = splat(px + o[j]);
          for (int v = 0; v < NV; ++v) a[j][v] += xb * g[v];
        }
      }
    }
    // Through a buffer: indexing a[][] with the runtime nt would keep the tile in memory.
    alignas(64) float sums[TT * NV * kLanes];
    std::memcpy(sums, a, sizeof(a));
    for (int64_t j = 0; j < nt; ++j) {
      float* dst = acc + (t0 + j) * copad + cb;
      for (int64_t l = 0; l < NV * kLanes; ++l) dst[l] += sums[j * NV * kLanes + l];
    }
  }
}

}  // namespace

void direct_conv_backward_weight(float* grad_weight, const float* x, const float* y, const DirectConv& c) {
  const Padded pd = padded_dims(c);
  const std::vector<int64_t> off = tap_offsets(c, pd);
  const int64_t K = static_cast<int64_t>(off.size()), L = c.oh * c.ow;
  const int64_t copad = round_up(c.cy, kLanes);
  const int threads = std::max(1, std::min<int>(get_num_threads(), static_cast<int>(c.n)));
  std::vector<std::vector<float>> partial(static_cast<size_t>(threads),
                                          std::vector<float>(static_cast<size_t>(K * copad), 0.0f));
  const int64_t chunk = (c.n + threads - 1) / threads;
  parallel_for(threads, 1, [&](int64_t first, int64_t last) {
    std::vector<float> xp(static_cast<size_t>(c.cx * pd.plane));
    std::vector<float> gyt(static_cast<size_t>(L * copad), 0.0f);
    for (int64_t part = first; part < last; ++part) {
      float* acc = partial[static_cast<size_t>(part)].data();
      for (int64_t i = part * chunk; i < std::min(c.n, (part + 1) * chunk); ++i) {
        pad_image(xp.data(), x + i * c.cx * c.h * c.w, c, pd);
        const float* yi = y + i * c.cy * L;
        for (int64_t co = 0; co < c.cy; ++co)
          for (int64_t p = 0; p < L; ++p) gyt[static_cast<size_t>(p * copad + co)] = yi[co * L + p];
        int64_t cb = 0;
        for (; cb + 2 * kLanes <= copad; cb += 2 * kLanes) weight_block<6, 2>(acc, xp.data(), gyt.data(), off, copad, cb, c, pd);
        if (cb < copad) weight_block<12, 1>(acc, xp.data(), gyt.data(), off, copad, cb, c, pd);
      }
    }
  });
  for (int64_t co = 0; co < c.cy; ++co)
    for (int64_t t = 0; t < K; ++t) {
      float s = 0.0f;
      for (const auto& part : partial) s += part[static_cast<size_t>(t * copad + co)];
      grad_weight[co * K + t] = s;
    }
}

}  // namespace ember

