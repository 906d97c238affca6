// Kernel family "random": PyTorch's CPU generator and samplers.
//
// CpuRng is PyTorch's CPU generator (a 32-bit Mersenne Twister seeded as PyTorch seeds it,
// with its cached normals and its 5056-byte state layout), and every mt_* sampler draws from
// it serially in the order PyTorch's kernels do, with the same transforms and roundings, so
// a seeded program draws PyTorch's exact numbers whatever the thread count. Samplers write a
// contiguous output: the Python side passes other layouts through a temporary laid out in
// the order PyTorch visits them. philox4x32 is a raw Philox4x32-10 block (known-answer tests
// of the counter-based generator the CUDA plugin uses).
#include <pybind11/pybind11.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../common/dtype.h"
#include "../common/loop.h"
#include "../common/tensor_arg.h"

namespace py = pybind11;

namespace ember {

namespace {

using Block = std::array<uint32_t, 4>;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

inline Block philox_raw(Block c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
  }
  return c;
}

TensorArg contiguous_out(py::handle obj, const char* what) {
  TensorArg out = unpack(obj);
  if (!out.is_contiguous()) throw std::invalid_argument(std::string(what) + ": output must be contiguous");
  return out;
}

// Distribution codes of mt_dist_ (kNormal is drawn by mt_normal_).
enum Dist : int {
  kNormal = 0, kBernoulli = 1, kExponential = 2, kGeometric = 3, kCauchy = 4, kLogNormal = 5
};

TensorArg float64_out(py::handle obj, const char* what) {
  TensorArg out = contiguous_out(obj, what);
  if (out.dtype != DType::Float64) throw std::invalid_argument(std::string(what) + ": output must be float64");
  return out;
}

// A product rounded on its own: keeps the compiler from fusing it into a following add,
// so these formulas round as PyTorch's (unfused) build of the same algorithm does.
inline double rd(double x) {
  volatile double v = x;
  return v;
}

// Poisson: Knuth's product of uniforms below a mean of 10, Hormann's PTRS (1993) transformed
// rejection above (PyTorch's choice of algorithms and constants).
template <typename S>
double poisson_draw(S& s, double lam) {
  if (!(lam > 0)) return lam == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(lam)) return lam;
  if (lam < 10) {
    double limit = std::exp(-lam), prod = s.next();
    double k = 0;
    while (prod > limit) {
      prod *= s.next();
      k += 1;
    }
    return k;
  }
  double slam = std::sqrt(lam), loglam = std::log(lam);
  double b = 0.931 + rd(2.53 * slam), a = -0.059 + rd(0.02483 * b);
  double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    double u = s.next() - 0.5, v = s.next();
    double us = 0.5 - std::fabs(u);
    double k = std::floor(rd((2 * a / us + b) * u) + lam + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <= -lam + rd(k * loglam) - std::lgamma(k + 1))
      return k;
  }
}

// ---------------------------------------------------------------------------------------
// PyTorch-compatible CPU generator: a 32-bit Mersenne Twister (MT19937, Matsumoto and
// Nishimura 1998) seeded with init_genrand on the low 32 bits of the seed, plus the cached
// second Box-Muller normal PyTorch keeps (one float, one double). Every sampler below draws
// serially, element by element in the order given, so results never depend on threads.
// ---------------------------------------------------------------------------------------
constexpr int kMtN = 624, kMtM = 397;

class CpuRng {
 public:
  explicit CpuRng(uint64_t seed = 67280421310721ull) { reseed(seed); }

  void reseed(uint64_t seed) {
    seed_ = seed;
    seeded_ = true;
    mt_[0] = static_cast<uint32_t>(seed);
    for (int j = 1; j < kMtN; ++j) mt_[j] = 1812433253u * (mt_[j - 1] ^ (mt_[j - 1] >> 30)) + static_cast<uint32_t>(j);
    left_ = 1;
    next_ = 0;
    has_float_ = has_double_ = false;
  }

  uint32_t random() {
    if (--left_ == 0) regenerate();
    uint32_t y = mt_[next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // Two draws: the first is the high word.
  uint64_t random64() {
    uint64_t hi = random();
    return (hi << 32) | random();
  }

  // Uniforms as PyTorch's uniform_real_distribution: the low 24 (float) / 53 (double) bits.
  float uniform_float() { return static_cast<float>(random() & 0xFFFFFFu) * 0x1.0p-24f; }
  double uniform_double() { return static_cast<double>(random64() & ((1ull << 53) - 1)) * 0x1.0p-53; }

  // A standard normal in double: Box-Muller on two uniforms, the sine half cached for the
  // next call.
  double normal_double() {
    if (has_double_) {
      has_double_ = false;
      return cached_double_;
    }
    double u1 = uniform_double(), u2 = uniform_double();
    double r = std::sqrt(-2.0 * std::log1p(-u2));
    double theta = 2.0 * 3.14159265358979323846 * u1;
    cached_double_ = r * std::sin(theta);
    has_double_ = true;
    return r * std::cos(theta);
  }

  uint64_t initial_seed() const { return seed_; }

  // PyTorch's 5056-byte state: seed u64, left i32, seeded i32, next u64, 624 x u64 words,
  // normal_x/normal_y/normal_rho f64, normal_is_valid i32 (pad 4), float sample f32,
  // float-valid u8 (pad 3). Little-endian, zero padding.
  static constexpr size_t kStateBytes = 5056;
  py::bytes get_state() const {
    std::string s(kStateBytes, '\0');
    char* p = s.data();
    put(p, 0, seed_);
    put(p, 8, static_cast<int32_t>(left_));
    put(p, 12, static_cast<int32_t>(seeded_ ? 1 : 0));
    put(p, 16, static_cast<uint64_t>(next_));
    for (int j = 0; j < kMtN; ++j) put(p, 24 + 8 * j, static_cast<uint64_t>(mt_[j]));
    constexpr size_t tail = 24 + 8 * kMtN;  // 5016
    put(p, tail + 8, has_double_ ? cached_double_ : 0.0);
    put(p, tail + 24, static_cast<int32_t>(has_double_ ? 1 : 0));
    put(p, tail + 32, has_float_ ? cached_float_ : 0.0f);
    p[tail + 36] = has_float_ ? 1 : 0;
    return py::bytes(s);
  }

  void set_state(const std::string& s) {
    if (s.size() != kStateBytes)
      throw std::runtime_error("Expected a CPUGeneratorImplState of size " + std::to_string(kStateBytes) +
                               " but found the input RNG state size to be " + std::to_string(s.size()));
    const char* p = s.data();
    auto left = get<int32_t>(p, 8);
    auto seeded = get<int32_t>(p, 12);
    auto next = static_cast<uint32_t>(get<uint64_t>(p, 16));
    if (!(static_cast<bool>(seeded) && left > 0 && left <= kMtN && next <= static_cast<uint32_t>(kMtN)))
      throw std::runtime_error("Invalid mt19937 state");
    seed_ = get<uint64_t>(p, 0);
    left_ = left;
    seeded_ = true;
    next_ = next;
    for (int j = 0; j < kMtN; ++j) mt_[j] = static_cast<uint32_t>(get<uint64_t>(p, 24 + 8 * j));
    constexpr size_t tail = 24 + 8 * kMtN;
    has_double_ = get<int32_t>(p, tail + 24) != 0;
    cached_double_ = get<double>(p, tail + 8);
    has_float_ = p[tail + 36] != 0;
    cached_float_ = get<float>(p, tail + 32);
  }

  void copy_from(const CpuRng& o) {
    seed_ = o.seed_;
    left_ = o.left_;
    seeded_ = o.seeded_;
    next_ = o.next_;
    mt_ = o.mt_;
    has_float_ = o.has_float_;
    has_double_ = o.has_double_;
    cached_float_ = o.cached_float_;
    cached_double_ = o.cached_double_;
  }

  std::mutex mutex;

 private:
  template <typename V>
  static void put(char* p, size_t at, V v) { std::memcpy(p + at, &v, sizeof(V)); }
  template <typename V>
  static V get(const char* p, size_t at) {
    V v;
    std::memcpy(&v, p + at, sizeof(V));
    return v;
  }

  void regenerate() {
    auto mix = [](uint32_t u, uint32_t v) {
      uint32_t y = (u & 0x80000000u) | (v & 0x7fffffffu);
      return (y >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
    };
    int k = 0;
    for (; k < kMtN - kMtM; ++k) mt_[k] = mt_[k + kMtM] ^ mix(mt_[k], mt_[k + 1]);
    for (; k < kMtN - 1; ++k) mt_[k] = mt_[k + kMtM - kMtN] ^ mix(mt_[k], mt_[k + 1]);
    mt_[kMtN - 1] = mt_[kMtM - 1] ^ mix(mt_[kMtN - 1], mt_[0]);
    left_ = kMtN;
    next_ = 0;
  }

  uint64_t seed_ = 0;
  int left_ = 1;
  bool seeded_ = false;
  uint32_t next_ = 0;
  std::array<uint32_t, kMtN> mt_{};
  bool has_float_ = false, has_double_ = false;
  float cached_float_ = 0.0f;
  double cached_double_ = 0.0;
};

// Storage type <- float/double with PyTorch's cast (half types via float).
template <typename T, typename C>
inline T store_as(C v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16(static_cast<float>(v))};
  else return static_cast<T>(v);
}

template <typename T>
inline bool same_bits(T a, T b) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return a.bits == b.bits;
  else return a == b;
}

// uniform_(from, to): u * (to - from) + from in the dtype's compute type with one rounding
// (PyTorch's kernels are built with FMA contraction); float16/bfloat16 compute in float and
// map a value that rounds up to `to` back to `from`.
template <typename T>
void mt_uniform_typed(CpuRng& g, T* p, int64_t n, double from_d, double to_d) {
  if constexpr (std::is_same_v<T, double>) {
    const double span = to_d - from_d;
    for (int64_t i = 0; i < n; ++i) p[i] = std::fma(g.uniform_double(), span, from_d);
  } else {
    const float from = static_cast<float>(from_d), to = static_cast<float>(to_d), span = to - from;
    const T to_s = store_as<T>(to_d), from_s = store_as<T>(from_d);
    for (int64_t i = 0; i < n; ++i) {
      T v = store_as<T>(std::fmaf(g.uniform_float(), span, from));
      if constexpr (!std::is_same_v<T, float>) {
        if (same_bits(v, to_s)) v = from_s;
      }
      p[i] = v;
    }
  }
}

void mt_uniform(py::handle out_obj, CpuRng& g, double from, double to) {
  TensorArg out = contiguous_out(out_obj, "uniform_");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  const int64_t n = out.numel();
  switch (out.dtype) {
    case DType::Float64: mt_uniform_typed(g, reinterpret_cast<double*>(out.data), n, from, to); break;
    case DType::Float32: mt_uniform_typed(g, reinterpret_cast<float*>(out.data), n, from, to); break;
    case DType::Float16: mt_uniform_typed(g, reinterpret_cast<Half*>(out.data), n, from, to); break;
    case DType::BFloat16: mt_uniform_typed(g, reinterpret_cast<BFloat16*>(out.data), n, from, to); break;
    default: throw std::invalid_argument("uniform_: expected a floating dtype");
  }
}

// Cephes-style single-precision log, sin and cos evaluated as PyTorch's AVX2 normal fill
// does (range reduction and polynomials in float, multiply-adds fused).
inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

template <bool Fused>
inline float madd(float a, float b, float c) {
  if constexpr (Fused) return std::fmaf(a, b, c);
  else {
    volatile float t = a * b;
    return t + c;
  }
}

template <bool Fused>
float cephes_logf(float x) {
  const bool invalid = x <= 0.0f;
  x = std::max(x, bits_to_float(0x00800000u));
  int32_t expo = static_cast<int32_t>(float_to_bits(x) >> 23) - 0x7f;
  x = bits_to_float((float_to_bits(x) & ~0x7f800000u) | float_to_bits(0.5f));
  float e = static_cast<float>(expo) + 1.0f;
  const bool low = x < 0.707106781186547524f;
  float tmp = low ? x : 0.0f;
  x = x - 1.0f;
  e = e - (low ? 1.0f : 0.0f);
  x = x + tmp;
  float z = x * x;
  float y = 7.0376836292E-2f;
  y = madd<Fused>(y, x, -1.1514610310E-1f);
  y = madd<Fused>(y, x, 1.1676998740E-1f);
  y = madd<Fused>(y, x, -1.2420140846E-1f);
  y = madd<Fused>(y, x, 1.4249322787E-1f);
  y = madd<Fused>(y, x, -1.6668057665E-1f);
  y = madd<Fused>(y, x, 2.0000714765E-1f);
  y = madd<Fused>(y, x, -2.4999993993E-1f);
  y = madd<Fused>(y, x, 3.3333331174E-1f);
  y = y * x;
  y = madd<Fused>(y, z, e * -2.12194440e-4f);
  y = madd<Fused>(-z, 0.5f, y);
  x = x + y;
  x = madd<Fused>(e, 0.693359375f, x);
  if (invalid) x = bits_to_float(float_to_bits(x) | 0xffffffffu);
  return x;
}

template <bool Fused>
void cephes_sincosf(float x, float& s, float& c) {
  uint32_t sign_sin = float_to_bits(x) & 0x80000000u;
  x = std::fabs(x);
  float y = x * 1.27323954473516f;
  int32_t j = static_cast<int32_t>(y);
  j = (j + 1) & ~1;
  y = static_cast<float>(j);
  uint32_t swap_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool poly_sin = (j & 2) == 0;  // cephes: use the cosine polynomial for sin when false
  x = madd<Fused>(y, -0.78515625f, x);
  x = madd<Fused>(y, -2.4187564849853515625e-4f, x);
  x = madd<Fused>(y, -3.77489497744594108e-8f, x);
  uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sin;
  float z = x * x;
  float yc = 2.443315711809948E-005f;
  yc = madd<Fused>(yc, z, -1.388731625493765E-003f);
  yc = madd<Fused>(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  yc = madd<Fused>(yc, z, -(z * 0.5f));  // y * z^2 - z / 2, the product fused
  yc = yc + 1.0f;
  float ys = -1.9515295891E-4f;
  ys = madd<Fused>(ys, z, 8.3321608736E-3f);
  ys = madd<Fused>(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = madd<Fused>(ys, x, x);
  float sin_v = poly_sin ? ys : yc, cos_v = poly_sin ? yc : ys;
  s = bits_to_float(float_to_bits(sin_v) ^ sign_sin);
  c = bits_to_float(float_to_bits(cos_v) ^ sign_cos);
}

// Box-Muller on 16 uniforms in place: pairs (j, j + 8), j < 8.
template <typename C>
void box_muller16_libm(C* d, C mean, C stdv) {
  for (int j = 0; j < 8; ++j) {
    const C u1 = 1 - d[j], u2 = d[j + 8];
    const C radius = std::sqrt(-2 * std::log(u1));
    const C theta = static_cast<C>(2.0f * 3.14159265358979323846 * u2);
    d[j] = std::fma(radius * std::cos(theta), stdv, mean);
    d[j + 8] = std::fma(radius * std::sin(theta), stdv, mean);
  }
}

template <bool Fused>
void box_muller16_cephes(float* d, float mean, float stdv) {
  const float two_pi = static_cast<float>(2.0f * 3.14159265358979323846);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j], u2 = d[j + 8];
    const float radius = std::sqrt(-2.0f * cephes_logf<Fused>(u1));
    const float theta = two_pi * u2;
    float s, c;
    cephes_sincosf<Fused>(theta, s, c);
    d[j] = std::fmaf(radius * c, stdv, mean);
    d[j + 8] = std::fmaf(radius * s, stdv, mean);
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The same 16-wide Box-Muller as box_muller16_cephes<true>, eight lanes at a time: each
// vector step is the scalar step above (same operations, same fusions), so results are
// identical; only the speed differs.
__attribute__((target("avx2,fma"))) void box_muller16_avx2(float* d, float mean, float stdv) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 u1 = _mm256_sub_ps(one, _mm256_loadu_ps(d));
  const __m256 u2 = _mm256_loadu_ps(d + 8);
  // log(u1)
  __m256 x = _mm256_max_ps(u1, _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)));
  const __m256 invalid = _mm256_cmp_ps(u1, _mm256_setzero_ps(), _CMP_LE_OS);
  __m256i ex = _mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(x), 23), _mm256_set1_epi32(0x7f));
  x = _mm256_or_ps(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(~0x7f800000))), half);
  __m256 e = _mm256_add_ps(_mm256_cvtepi32_ps(ex), one);
  const __m256 low = _mm256_cmp_ps(x, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OS);
  const __m256 tmp = _mm256_and_ps(x, low);
  x = _mm256_sub_ps(x, one);
  e = _mm256_sub_ps(e, _mm256_and_ps(one, low));
  x = _mm256_add_ps(x, tmp);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = _mm256_set1_ps(7.0376836292E-2f);
  for (float c : {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f})
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(c));
  y = _mm256_mul_ps(y, x);
  y = _mm256_fmadd_ps(y, z, _mm256_mul_ps(e, _mm256_set1_ps(-2.12194440e-4f)));
  y = _mm256_fnmadd_ps(z, half, y);
  x = _mm256_add_ps(x, y);
  x = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), x);
  const __m256 lg = _mm256_or_ps(x, invalid);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), lg));
  // sincos(theta)
  const __m256 theta = _mm256_mul_ps(_mm256_set1_ps(static_cast<float>(2.0f * 3.14159265358979323846)), u2);
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256 sign_sin = _mm256_and_ps(theta, sign_mask);
  __m256 t = _mm256_andnot_ps(sign_mask, theta);
  __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(t, _mm256_set1_ps(1.27323954473516f)));
  j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
  const __m256 yj = _mm256_cvtepi32_ps(j);
  const __m256 swap_sin = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(j, _mm256_set1_epi32(4)), 29));
  const __m256 poly_sin =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(j, _mm256_set1_epi32(2)), _mm256_setzero_si256()));
  t = _mm256_fmadd_ps(yj, _mm256_set1_ps(-0.78515625f), t);
  t = _mm256_fmadd_ps(yj, _mm256_set1_ps(-2.4187564849853515625e-4f), t);
  t = _mm256_fmadd_ps(yj, _mm256_set1_ps(-3.77489497744594108e-8f), t);
  const __m256 sign_cos = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_andnot_si256(_mm256_sub_epi32(j, _mm256_set1_epi32(2)), _mm256_set1_epi32(4)), 29));
  sign_sin = _mm256_xor_ps(sign_sin, swap_sin);
  const __m256 zz = _mm256_mul_ps(t, t);
  __m256 yc = _mm256_fmadd_ps(_mm256_set1_ps(2.443315711809948E-005f), zz, _mm256_set1_ps(-1.388731625493765E-003f));
  yc = _mm256_fmadd_ps(yc, zz, _mm256_set1_ps(4.166664568298827E-002f));
  yc = _mm256_mul_ps(yc, zz);
  yc = _mm256_fmsub_ps(yc, zz, _mm256_mul_ps(zz, half));
  yc = _mm256_add_ps(yc, one);
  __m256 ys = _mm256_fmadd_ps(_mm256_set1_ps(-1.9515295891E-4f), zz, _mm256_set1_ps(8.3321608736E-3f));
  ys = _mm256_fmadd_ps(ys, zz, _mm256_set1_ps(-1.6666654611E-1f));
  ys = _mm256_mul_ps(ys, zz);
  ys = _mm256_fmadd_ps(ys, t, t);
  const __m256 sin_v = _mm256_xor_ps(_mm256_blendv_ps(yc, ys, poly_sin), sign_sin);
  const __m256 cos_v = _mm256_xor_ps(_mm256_blendv_ps(ys, yc, poly_sin), sign_cos);
  const __m256 m = _mm256_set1_ps(mean), sd = _mm256_set1_ps(stdv);
  _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_mul_ps(radius, cos_v), sd, m));
  _mm256_storeu_ps(d + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sin_v), sd, m));
}

const bool kHaveAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
constexpr bool kHaveAvx2Fma = false;
#endif

// float32 blocks use the vector-library formulas above, float64 blocks the C library's.
void box_muller16(float* d, float mean, float stdv) {
#if defined(__x86_64__) || defined(__i386__)
  if (kHaveAvx2Fma) return box_muller16_avx2(d, mean, stdv);
#endif
  box_muller16_cephes<true>(d, mean, stdv);
}
void box_muller16(double* d, double mean, double stdv) { box_muller16_libm<double>(d, mean, stdv); }

// PyTorch's normal fill for contiguous tensors of >= 16 elements: all uniforms first, then
// Box-Muller over blocks of 16; a ragged tail redraws 16 fresh uniforms for the last 16.
template <typename T>
void mt_normal_fill(CpuRng& g, T* p, int64_t n, double mean, double stdv) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  auto uni = [&]() -> C {
    if constexpr (std::is_same_v<C, double>) return g.uniform_double();
    else return g.uniform_float();
  };
  const C m = static_cast<C>(mean), s = static_cast<C>(stdv);
  if constexpr (std::is_same_v<T, C>) {
    for (int64_t i = 0; i < n; ++i) p[i] = uni();
    for (int64_t i = 0; i + 16 <= n; i += 16) box_muller16(p + i, m, s);
    if (n % 16 != 0) {
      C* tail = p + n - 16;
      for (int j = 0; j < 16; ++j) tail[j] = uni();
      box_muller16(tail, m, s);
    }
  } else {
    C buf[16];
    for (int64_t i = 0; i + 16 <= n; i += 16) {
      for (int j = 0; j < 16; ++j) buf[j] = uni();
      box_muller16(buf, m, s);
      for (int j = 0; j < 16; ++j) p[i + j] = store_as<T>(buf[j]);
    }
    if (n % 16 != 0) {
      for (int j = 0; j < 16; ++j) buf[j] = uni();
      box_muller16(buf, m, s);
      for (int j = 0; j < 16; ++j) p[n - 16 + j] = store_as<T>(buf[j]);
    }
  }
}

// normal_(mean, std): `fill` selects the 16-wide path (PyTorch: >= 16 elements and a
// contiguous tensor); otherwise one double normal per element (with the cached sine half).
void mt_normal(py::handle out_obj, CpuRng& g, double mean, double stdv, bool fill) {
  TensorArg out = contiguous_out(out_obj, "normal_");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  const int64_t n = out.numel();
  auto run = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    if (fill && n >= 16) {
      mt_normal_fill<T>(g, p, n, mean, stdv);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = store_as<T>(std::fma(g.normal_double(), stdv, mean));
    }
  };
  switch (out.dtype) {
    case DType::Float64: run(reinterpret_cast<double*>(out.data)); break;
    case DType::Float32: run(reinterpret_cast<float*>(out.data)); break;
    case DType::Float16: run(reinterpret_cast<Half*>(out.data)); break;
    case DType::BFloat16: run(reinterpret_cast<BFloat16*>(out.data)); break;
    default: throw std::invalid_argument("normal_: expected a floating dtype");
  }
}

// random_ family. mode 0: (val % range) + base with a 32-bit draw below 2^28, else 64-bit;
// mode 1: the full int64 range from one 64-bit draw; mode 2: random_() with no bounds,
// [0, 2^digits] for floating types and [0, max] for integers.
template <typename T>
T from_int64(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return store_as<T>(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <typename T>
void mt_random_typed(CpuRng& g, T* p, int64_t n, int mode, uint64_t range, int64_t base) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    if (mode == 0) {
      uint64_t r = range >= (1ull << 28) ? g.random64() : static_cast<uint64_t>(g.random());
      v = static_cast<int64_t>(r % range + static_cast<uint64_t>(base));
    } else if (mode == 1) {
      v = static_cast<int64_t>(g.random64());
    } else {
      if constexpr (std::is_same_v<T, bool>) v = g.random() & 1u;
      else if constexpr (std::is_same_v<T, int64_t>) v = static_cast<int64_t>(g.random64() % (1ull << 63));
      else if constexpr (std::is_same_v<T, double>) v = static_cast<int64_t>(g.random64() % ((1ull << 53) + 1));
      else if constexpr (std::is_same_v<T, float>) v = static_cast<int64_t>(g.random() % ((1ull << 24) + 1));
      else if constexpr (std::is_same_v<T, Half>) v = static_cast<int64_t>(g.random() % ((1ull << 11) + 1));
      else if constexpr (std::is_same_v<T, BFloat16>) v = static_cast<int64_t>(g.random() % ((1ull << 8) + 1));
      else v = static_cast<int64_t>(g.random() % (static_cast<uint64_t>(std::numeric_limits<T>::max()) + 1));
    }
    p[i] = from_int64<T>(v);
  }
}

void mt_random(py::handle out_obj, CpuRng& g, int mode, uint64_t range, int64_t base) {
  TensorArg out = contiguous_out(out_obj, "random_");
  if (mode == 0 && range == 0) throw std::invalid_argument("random_: empty range");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  EMBER_DISPATCH_ALL(out.dtype, "random_", [&] {
    mt_random_typed<scalar_t>(g, reinterpret_cast<scalar_t*>(out.data), out.numel(), mode, range, base);
  });
}

// randperm: below 2^32 / 20 elements, swaps of i with i + random() % (n - i); above, the
// inside-out shuffle with 64-bit draws.
void mt_randperm(py::handle out_obj, CpuRng& g) {
  TensorArg out = contiguous_out(out_obj, "randperm");
  if (out.dtype != DType::Int64 || out.ndim() != 1) throw std::invalid_argument("randperm: out must be an int64 vector");
  const int64_t n = out.numel();
  auto* r = reinterpret_cast<int64_t*>(out.data);
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  if (n < static_cast<int64_t>(std::numeric_limits<uint32_t>::max() / 20)) {
    for (int64_t i = 0; i < n; ++i) r[i] = i;
    for (int64_t i = 0; i < n - 1; ++i) {
      int64_t z = static_cast<int64_t>(g.random()) % (n - i);
      std::swap(r[i], r[z + i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      auto z = static_cast<int64_t>(g.random64() % static_cast<uint64_t>(i + 1));
      r[i] = r[z];
      r[z] = i;
    }
  }
}

// Per-element distributions from one uniform each (PyTorch draws them in double:
// bernoulli(p) = u < p, exponential = -log1p(-u) / lambda, geometric = ceil(log(u) / log1p(-p)),
// cauchy = median + sigma * tan(pi * (u - 0.5)); log-normal = exp(normal)).
void mt_dist(py::handle out_obj, CpuRng& g, int kind, double a, double b) {
  TensorArg out = contiguous_out(out_obj, "random distribution");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  EMBER_DISPATCH_ALL(out.dtype, "random distribution", [&] {
    auto* p = reinterpret_cast<scalar_t*>(out.data);
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      double v;
      switch (kind) {
        case kBernoulli: v = g.uniform_double() < a ? 1.0 : 0.0; break;
        case kExponential: v = -1.0 / a * std::log1p(-g.uniform_double()); break;
        case kGeometric: v = std::ceil(std::log(g.uniform_double()) / std::log1p(-a)); break;
        case kCauchy: v = std::fma(b, std::tan(3.14159265358979323846 * (g.uniform_double() - 0.5)), a); break;
        case kLogNormal: v = std::exp(std::fma(g.normal_double(), b, a)); break;
        default: throw std::invalid_argument("random distribution: unknown kind");
      }
      p[i] = convert<scalar_t, double>(v);
    }
  });
}

// bernoulli_(p tensor): p already broadcast to out's shape, contiguous, float64 (p_double)
// or float32: a float32 p draws a 24-bit float uniform, a float64 p a 53-bit one.
void mt_bernoulli_tensor(py::handle out_obj, py::handle p_obj, CpuRng& g) {
  TensorArg out = contiguous_out(out_obj, "bernoulli_");
  TensorArg p = contiguous_out(p_obj, "bernoulli_");
  if (p.numel() != out.numel() || (p.dtype != DType::Float64 && p.dtype != DType::Float32))
    throw std::invalid_argument("bernoulli_: p must be float32/float64 of out's size");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  bool bad = false;
  EMBER_DISPATCH_ALL(out.dtype, "bernoulli_", [&] {
    auto* o = reinterpret_cast<scalar_t*>(out.data);
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      bool hit;
      if (p.dtype == DType::Float64) {
        double pv = reinterpret_cast<const double*>(p.data)[i];
        if (!(pv >= 0.0 && pv <= 1.0)) bad = true;
        hit = g.uniform_double() < pv;
      } else {
        float pv = reinterpret_cast<const float*>(p.data)[i];
        if (!(pv >= 0.0f && pv <= 1.0f)) bad = true;
        hit = g.uniform_float() < pv;
      }
      o[i] = convert<scalar_t, double>(hit ? 1.0 : 0.0);
    }
  });
  if (bad) throw std::runtime_error("bernoulli_: expected all probabilities p to be in [0, 1]");
}


// multinomial with replacement, as PyTorch's CPU kernel: per row, the running sums in the
// probabilities' type C (float for float32/16-bit inputs, double for float64) divided by the
// total, the last forced to 1; each sample is the first category whose normalized sum is not
// below a 53-bit uniform.
template <typename C>
void mt_multinomial_rows(CpuRng& g, const C* P, int64_t* O, int64_t rows, int64_t n, int64_t k) {
  std::vector<C> cum(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const C* p = P + r * n;
    C sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      C v = p[j];
      if (!(v >= 0)) throw std::runtime_error("invalid multinomial distribution (encountering probability entry < 0)");
      if (!std::isfinite(v))
        throw std::runtime_error("invalid multinomial distribution (encountering probability entry = infinity or NaN)");
      sum += v;
      cum[static_cast<size_t>(j)] = sum;
    }
    if (!(sum > 0)) throw std::runtime_error("invalid multinomial distribution (sum of probabilities <= 0)");
    for (auto& c : cum) c /= sum;
    cum[static_cast<size_t>(n - 1)] = 1;
    for (int64_t s = 0; s < k; ++s) {
      const double u = g.uniform_double();
      int64_t lo = 0, hi = n;
      while (hi > lo) {
        int64_t mid = lo + (hi - lo) / 2;
        if (static_cast<double>(cum[static_cast<size_t>(mid)]) < u) lo = mid + 1;
        else hi = mid;
      }
      O[r * k + s] = lo;
    }
  }
}

void mt_multinomial(py::handle out_obj, py::handle probs_obj, CpuRng& g) {
  TensorArg out = contiguous_out(out_obj, "multinomial");
  TensorArg probs = contiguous_out(probs_obj, "multinomial");
  if (out.dtype != DType::Int64 || probs.ndim() != 2 || out.ndim() != 2 || out.shape[0] != probs.shape[0] ||
      (probs.dtype != DType::Float32 && probs.dtype != DType::Float64) || probs.shape[1] < 1)
    throw std::invalid_argument("multinomial: expected float32/float64 [rows, n] probs and int64 [rows, k] out");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  auto* O = reinterpret_cast<int64_t*>(out.data);
  if (probs.dtype == DType::Float64)
    mt_multinomial_rows(g, reinterpret_cast<const double*>(probs.data), O, probs.shape[0], probs.shape[1], out.shape[1]);
  else
    mt_multinomial_rows(g, reinterpret_cast<const float*>(probs.data), O, probs.shape[0], probs.shape[1], out.shape[1]);
}


// poisson with PyTorch's CPU stream: one rate per element (contiguous float64, out's size),
// drawn in order with 53-bit uniforms.
struct MtUniforms {
  CpuRng& g;
  double next() { return g.uniform_double(); }
};

void mt_poisson(py::handle out_obj, py::handle rate_obj, CpuRng& g) {
  TensorArg out = float64_out(out_obj, "poisson");
  TensorArg rate = contiguous_out(rate_obj, "poisson");
  if (rate.dtype != DType::Float64 || rate.numel() != out.numel())
    throw std::invalid_argument("poisson: rates must be float64 of out's size");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  MtUniforms u{g};
  auto* o = reinterpret_cast<double*>(out.data);
  const auto* r = reinterpret_cast<const double*>(rate.data);
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = poisson_draw(u, r[i]);
}


// binomial with PyTorch's CPU stream: the inversion (sum of geometric waiting times) below
// count * p = 10 and Hormann's BTRS above, with p > 1/2 drawing count - Binomial(count, 1 - p).
// T is the tensors' dtype: PyTorch evaluates some terms in T and the rest in double, and its
// build does not fuse multiply-adds, so neither do these (rd).
inline double binomial_tail(double k) {
  // log(k!) - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2] for k = 0..9.
  static const double kTail[] = {0.0810614667953272,  0.0413406959554092,  0.0276779256849983, 0.02079067210376509,
                                 0.0166446911898211,  0.0138761288230707,  0.0118967099458917, 0.0104112652619720,
                                 0.00925546218271273, 0.00833056343336287};
  if (k < 10) return kTail[static_cast<size_t>(k)];
  double kp1sq = (k + 1) * (k + 1);
  return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1);
}

template <typename T>
T binomial_by_inversion(CpuRng& g, T count, T prob) {
  const double logq = static_cast<double>(static_cast<T>(std::log1p(static_cast<T>(-prob))));
  double waited = 0;
  T successes = 0;
  for (;;) {
    waited += std::ceil(std::log(g.uniform_double()) / logq);
    if (waited > static_cast<double>(count)) return successes;
    successes = successes + 1;
  }
}

template <typename T>
T binomial_by_btrs(CpuRng& g, T count, T prob) {
  const double stddev = static_cast<double>(std::sqrt(static_cast<T>(count * prob * (1 - prob))));
  const double b = 1.15 + rd(2.53 * stddev);
  const double a = (-0.0873 + rd(0.0248 * b)) + rd(0.01 * static_cast<double>(prob));
  const double c = static_cast<double>(rd(static_cast<T>(count * prob))) + 0.5;
  const double v_r = 0.92 - 4.2 / b;
  const double r = static_cast<double>(static_cast<T>(prob / (1 - prob)));
  const double alpha = (2.83 + 5.1 / b) * stddev;
  const double m = static_cast<double>(std::floor(static_cast<T>((count + 1) * prob)));
  const double n = static_cast<double>(count);
  for (;;) {
    const double u = g.uniform_double() - 0.5;
    double v = g.uniform_double();
    const double us = 0.5 - std::fabs(u);
    const T k = static_cast<T>(std::floor(rd((2 * a / us + b) * u) + c));
    if (k < 0 || k > count) continue;
    if (us >= 0.07 && v <= v_r) return k;
    v = std::log(v * alpha / (a / (us * us) + b));
    const double kd = static_cast<double>(k);
    const double n_minus_k_plus_1 = static_cast<double>(static_cast<T>(count - k + 1));
    double bound = rd((m + 0.5) * std::log((m + 1) / (r * (n - m + 1))));
    bound += rd(static_cast<double>(static_cast<T>(count + 1)) * std::log((n - m + 1) / n_minus_k_plus_1));
    bound += rd((kd + 0.5) * std::log(r * n_minus_k_plus_1 / static_cast<double>(static_cast<T>(k + 1))));
    bound += binomial_tail(m);
    bound += binomial_tail(n - m);
    bound -= binomial_tail(kd);
    bound -= binomial_tail(static_cast<double>(static_cast<T>(count - k)));
    if (v <= bound) return k;
  }
}

template <typename T>
T binomial_sample(CpuRng& g, T count, T prob) {
  if (count <= 0.0 || prob <= 0.0) return 0;
  // A NaN count would keep the inversion's loop waiting forever (PyTorch 2.13's CPU sampler hangs there): NaN.
  if (std::isnan(count)) return std::numeric_limits<T>::quiet_NaN();
  if (prob >= 1.0) return count;
  if (prob <= 0.5) {
    return static_cast<T>(count * prob) >= 10.0 ? binomial_by_btrs(g, count, prob)
                                                : binomial_by_inversion(g, count, prob);
  }
  if (prob > 0.5) {
    const T q = static_cast<T>(1.0 - prob);
    return static_cast<T>(count - (static_cast<T>(count * q) >= 10.0 ? binomial_by_btrs(g, count, q)
                                                                     : binomial_by_inversion(g, count, q)));
  }
  return std::numeric_limits<T>::quiet_NaN();
}

void mt_binomial(py::handle out_obj, py::handle count_obj, py::handle prob_obj, CpuRng& g) {
  TensorArg out = contiguous_out(out_obj, "binomial");
  TensorArg count = contiguous_out(count_obj, "binomial"), prob = contiguous_out(prob_obj, "binomial");
  if ((out.dtype != DType::Float32 && out.dtype != DType::Float64) || count.dtype != out.dtype ||
      prob.dtype != out.dtype || count.numel() != out.numel() || prob.numel() != out.numel())
    throw std::invalid_argument("binomial: out, count and prob must share a float32/float64 dtype and size");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  auto run = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    const T* c = reinterpret_cast<const T*>(count.data);
    const T* p = reinterpret_cast<const T*>(prob.data);
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = binomial_sample<T>(g, c[i], p[i]);
  };
  if (out.dtype == DType::Float64) run(reinterpret_cast<double*>(out.data));
  else run(reinterpret_cast<float*>(out.data));
}


// Standard gamma with PyTorch's CPU stream: Marsaglia and Tsang's (2000) rejection on double
// normals (the generator's cached-normal path) and 53-bit uniforms, alpha < 1 boosted to
// alpha + 1 and scaled by U^(1/alpha). T is the tensors' dtype (PyTorch forms d = alpha - 1/3
// and 1/alpha in it); products are rounded before adds (rd) as PyTorch's build rounds them.
template <typename T>
T gamma_sample(CpuRng& g, T alpha) {
  double scale = 1.0;
  if (alpha < 1.0f) {
    if (alpha == 0.f) return 0;
    scale *= std::pow(1 - g.uniform_double(), static_cast<double>(static_cast<T>(1.0f / alpha)));
    alpha += 1.0f;
  }
  const double d = static_cast<double>(static_cast<T>(alpha - 1.0f / 3.0f));
  const double c = 1.0f / std::sqrt(9.0f * d);
  for (;;) {
    double x, y;
    do {
      x = g.normal_double();
      y = 1.0f + rd(c * x);
    } while (y <= 0);
    const double v = y * y * y;
    const double u = 1 - g.uniform_double();
    const double xx = x * x;
    if (u < 1.0f - rd(static_cast<double>(0.0331f) * xx * xx)) return static_cast<T>(scale * d * v);
    if (std::log(u) < rd(0.5f * xx) + rd(d * (1.0f - v + std::log(v)))) return static_cast<T>(scale * d * v);
  }
}

void mt_gamma(py::handle out_obj, py::handle alpha_obj, CpuRng& g) {
  TensorArg out = contiguous_out(out_obj, "_standard_gamma");
  TensorArg alpha = contiguous_out(alpha_obj, "_standard_gamma");
  if ((out.dtype != DType::Float32 && out.dtype != DType::Float64) || alpha.dtype != out.dtype ||
      alpha.numel() != out.numel())
    throw std::invalid_argument("_standard_gamma: out and alpha must share a float32/float64 dtype and size");
  py::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(g.mutex);
  auto run = [&](auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    const T* a = reinterpret_cast<const T*>(alpha.data);
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = std::max(std::numeric_limits<T>::min(), gamma_sample<T>(g, a[i]));
  };
  if (out.dtype == DType::Float64) run(reinterpret_cast<double*>(out.data));
  else run(reinterpret_cast<float*>(out.data));
}

}  // namespace

void bind_random(py::module_& m) {
  py::class_<CpuRng, std::shared_ptr<CpuRng>>(m, "CpuRng",
      "PyTorch's CPU generator: MT19937 with PyTorch's seeding, 64-bit composition and cached normals.")
      .def(py::init<uint64_t>(), py::arg("seed") = 67280421310721ull)
      .def("manual_seed", [](CpuRng& g, uint64_t s) { std::lock_guard<std::mutex> l(g.mutex); g.reseed(s); })
      .def("initial_seed", &CpuRng::initial_seed)
      .def("random", [](CpuRng& g) { std::lock_guard<std::mutex> l(g.mutex); return g.random(); })
      .def("random64", [](CpuRng& g) { std::lock_guard<std::mutex> l(g.mutex); return g.random64(); })
      .def("get_state", [](CpuRng& g) { std::lock_guard<std::mutex> l(g.mutex); return g.get_state(); })
      .def("set_state", [](CpuRng& g, const std::string& s) { std::lock_guard<std::mutex> l(g.mutex); g.set_state(s); })
      .def("clone", [](CpuRng& g) {
        std::lock_guard<std::mutex> l(g.mutex);
        auto c = std::make_shared<CpuRng>();
        c->copy_from(g);
        return c;
      })
      .def(py::pickle([](CpuRng& g) { return g.get_state(); },
                      [](const py::bytes& b) {
                        std::string s = b;
                        auto c = std::make_shared<CpuRng>();
                        c->set_state(s);
                        return c;
                      }));
  m.attr("cpu_rng_state_bytes") = static_cast<int>(CpuRng::kStateBytes);
  m.def("mt_uniform_", &mt_uniform, py::arg("out"), py::arg("gen"), py::arg("low"), py::arg("high"),
        "uniform_ with PyTorch's CPU stream into a contiguous floating tensor.");
  m.def("mt_normal_", &mt_normal, py::arg("out"), py::arg("gen"), py::arg("mean"), py::arg("std"), py::arg("fill"),
        "normal_ with PyTorch's CPU stream (fill: the 16-wide path for contiguous tensors of >= 16 elements).");
  m.def("mt_random_", &mt_random, py::arg("out"), py::arg("gen"), py::arg("mode"), py::arg("range"), py::arg("base"),
        "random_ with PyTorch's CPU stream (mode 0: [base, base + range); 1: all int64; 2: random_()).");
  m.def("mt_randperm_", &mt_randperm, py::arg("out"), py::arg("gen"), "randperm with PyTorch's CPU stream.");
  m.def("mt_dist_", &mt_dist, py::arg("out"), py::arg("gen"), py::arg("kind"), py::arg("a"), py::arg("b"),
        "bernoulli/exponential/geometric/cauchy/log-normal with PyTorch's CPU stream.");
  m.def(
      "box_muller16_",
      [](py::handle out_obj, bool vector) {
        TensorArg out = contiguous_out(out_obj, "box_muller16_");
        if (out.dtype != DType::Float32 || out.numel() != 16) throw std::invalid_argument("box_muller16_: 16 float32");
        auto* d = reinterpret_cast<float*>(out.data);
        if (vector) box_muller16(d, 0.0f, 1.0f);
        else box_muller16_cephes<true>(d, 0.0f, 1.0f);
      },
      py::arg("out"), py::arg("vector"),
      "The float32 Box-Muller block in place on 16 uniforms: the dispatched (vector) or the scalar form (tests).");
  m.def("mt_multinomial_", &mt_multinomial, py::arg("out"), py::arg("probs"), py::arg("gen"),
        "multinomial with replacement with PyTorch's CPU stream and search.");
  m.def("mt_poisson_", &mt_poisson, py::arg("out"), py::arg("rate"), py::arg("gen"),
        "poisson with PyTorch's CPU stream (rates: contiguous float64 of out's size).");
  m.def("mt_binomial_", &mt_binomial, py::arg("out"), py::arg("count"), py::arg("prob"), py::arg("gen"),
        "binomial with PyTorch's CPU stream (out, count, prob: contiguous, one float dtype, one size).");
  m.def("mt_gamma_", &mt_gamma, py::arg("out"), py::arg("alpha"), py::arg("gen"),
        "Standard gamma draws with PyTorch's CPU stream (out, alpha: contiguous, one float dtype, one size).");
  m.def("mt_bernoulli_tensor_", &mt_bernoulli_tensor, py::arg("out"), py::arg("p"), py::arg("gen"),
        "bernoulli_ with a per-element probability tensor (same size, contiguous).");

  m.def(
      "philox4x32",
      [](uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
        Block b = philox_raw({c0, c1, c2, c3}, k0, k1);
        return py::make_tuple(b[0], b[1], b[2], b[3]);
      },
      "One raw Philox4x32-10 block for counter words c0..c3 and key words k0, k1 (known-answer tests).");
  py::dict kinds;
  kinds["normal"] = static_cast<int>(kNormal);
  kinds["bernoulli"] = static_cast<int>(kBernoulli);
  kinds["exponential"] = static_cast<int>(kExponential);
  kinds["geometric"] = static_cast<int>(kGeometric);
  kinds["cauchy"] = static_cast<int>(kCauchy);
  kinds["log_normal"] = static_cast<int>(kLogNormal);
  m.attr("random_kinds") = kinds;
}

}  // namespace ember
