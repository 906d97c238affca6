// Scalar types and the dtype-dispatch macros every kernel uses.
// The integer codes are shared with Python (ember/_src/dtypes.py): keep them in sync.
#pragma once

#include <complex>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ember {

enum class DType : int {
  Bool = 0,
  UInt8 = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Float16 = 6,
  BFloat16 = 7,
  Float32 = 8,
  Float64 = 9,
  Complex64 = 10,
  Complex128 = 11,
};
constexpr int kNumDTypes = 12;

inline int64_t itemsize(DType t) {
  static const int64_t sizes[kNumDTypes] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  return sizes[static_cast<int>(t)];
}

// The dtype-code tests the fast paths make on a tensor's cached `dtype_code` (-1: unknown dtype).
// Real floating: float16, bfloat16, float32, float64 (what autograd records a grad for natively).
constexpr bool is_real_floating_code(int code) {
  return code >= static_cast<int>(DType::Float16) && code <= static_cast<int>(DType::Float64);
}
// Complex: complex64, complex128.
constexpr bool is_complex_code(int code) {
  return code == static_cast<int>(DType::Complex64) || code == static_cast<int>(DType::Complex128);
}
// Floating or complex: the dtypes a tensor may require grad in.
constexpr bool is_inexact_code(int code) { return is_real_floating_code(code) || is_complex_code(code); }

inline DType dtype_from_code(int code) {
  if (code < 0 || code >= kNumDTypes) throw std::invalid_argument("invalid dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

// float16 and bfloat16 are storage types: kernels load them as float, compute, store back.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  // Round to nearest even, with overflow to inf and gradual underflow.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = absx >> 23;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14..24 (mantissa keeps 10 bits after a shift of 13+)
    uint32_t value = mant >> (shift);
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (value & 1u))) value++;
    return static_cast<uint16_t>(sign | value);
  }
  uint32_t rounded = absx + 0xfffu + ((absx >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

// Load any storage type as its compute type, and store back.
template <typename T>
struct Compute {
  using type = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};
template <>
struct Compute<Half> {
  using type = float;
  static float load(Half v) { return half_to_float(v.bits); }
  static Half store(float v) { return Half{float_to_half(v)}; }
};
template <>
struct Compute<BFloat16> {
  using type = float;
  static float load(BFloat16 v) { return bf16_to_float(v.bits); }
  static BFloat16 store(float v) { return BFloat16{float_to_bf16(v)}; }
};

using c64 = std::complex<float>;
using c128 = std::complex<double>;
template <typename T>
struct is_complex : std::false_type {};
template <typename T>
struct is_complex<std::complex<T>> : std::true_type {};
template <typename T>
inline constexpr bool is_complex_v = is_complex<T>::value;

// Integer +, -, * and negation wrap modulo 2^bits as PyTorch's kernels do. They are computed
// in the unsigned form of the promoted type: signed overflow is undefined behaviour in C++ (and
// uint16 * uint16 promotes to int, which overflows too), unsigned wrap-around is not. Other
// types use the plain operators.
template <typename T>
inline constexpr bool wraps_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
using wrap_unsigned_t = std::make_unsigned_t<decltype(+T())>;
template <typename T>
inline T wrapping_add(T x, T y) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_unsigned_t<T>>(x) + static_cast<wrap_unsigned_t<T>>(y));
  else return static_cast<T>(x + y);
}
template <typename T>
inline T wrapping_sub(T x, T y) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_unsigned_t<T>>(x) - static_cast<wrap_unsigned_t<T>>(y));
  else return static_cast<T>(x - y);
}
template <typename T>
inline T wrapping_mul(T x, T y) {
  if constexpr (wraps_v<T>) return static_cast<T>(static_cast<wrap_unsigned_t<T>>(x) * static_cast<wrap_unsigned_t<T>>(y));
  else return static_cast<T>(x * y);
}
template <typename T>
inline T wrapping_neg(T x) {
  if constexpr (wraps_v<T>) return static_cast<T>(wrap_unsigned_t<T>(0) - static_cast<wrap_unsigned_t<T>>(x));
  else return static_cast<T>(-x);
}

// Value conversion with PyTorch's rules (bool is 0/1; float->int truncates; complex->real
// keeps the real part).
template <typename To, typename From>
inline To convert(From v) {
  using CF = typename Compute<From>::type;
  using CT = typename Compute<To>::type;
  CF c = Compute<From>::load(v);
  if constexpr (std::is_same_v<To, bool>) {
    return c != CF(0);
  } else if constexpr (is_complex_v<CT>) {
    if constexpr (is_complex_v<CF>) return CT(c);
    else return CT(static_cast<typename CT::value_type>(c), 0);
  } else if constexpr (is_complex_v<CF>) {
    return convert<To, typename CF::value_type>(c.real());
  } else if constexpr (std::is_floating_point_v<CT> || !std::is_floating_point_v<CF>) {
    return Compute<To>::store(static_cast<CT>(c));
  } else {
    // float -> integer: out-of-range is undefined in C++; go through int64 like PyTorch does.
    if (!(c == c)) return Compute<To>::store(static_cast<CT>(0));
    if (c >= static_cast<CF>(9.2233720368547758e18) || c < static_cast<CF>(-9.2233720368547758e18))
      return Compute<To>::store(static_cast<CT>(INT64_MIN));
    return Compute<To>::store(static_cast<CT>(static_cast<int64_t>(c)));
  }
}

}  // namespace ember

#define EMBER_CASE(code, T, ...) \
  case ::ember::DType::code: {   \
    using scalar_t = T;          \
    __VA_ARGS__();               \
    break;                       \
  }

#define EMBER_THROW_DTYPE(dtype, what) \
  throw std::invalid_argument(std::string(what) + ": unsupported dtype code " + std::to_string(static_cast<int>(dtype)))

// Every dtype.
#define EMBER_DISPATCH_ALL(dtype, what, ...)         \
  switch (dtype) {                                  \
    EMBER_CASE(Bool, bool, __VA_ARGS__)             \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)         \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)           \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)         \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)         \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)         \
    EMBER_CASE(Float16, ::ember::Half, __VA_ARGS__) \
    EMBER_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__) \
    EMBER_CASE(Float32, float, __VA_ARGS__)         \
    EMBER_CASE(Float64, double, __VA_ARGS__)        \
    default:                                        \
      EMBER_THROW_DTYPE(dtype, what);               \
  }

// Integer dtypes (not bool).
#define EMBER_DISPATCH_INTEGRAL(dtype, what, ...) \
  switch (dtype) {                               \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)      \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)        \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)      \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)      \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)      \
    default:                                     \
      EMBER_THROW_DTYPE(dtype, what);            \
  }

// Types that kernels compute in directly (half types are converted to float32 by the caller).
#define EMBER_DISPATCH_COMPUTE(dtype, what, ...) \
  switch (dtype) {                              \
    EMBER_CASE(Bool, bool, __VA_ARGS__)         \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)     \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)       \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)     \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)     \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)     \
    EMBER_CASE(Float32, float, __VA_ARGS__)     \
    EMBER_CASE(Float64, double, __VA_ARGS__)    \
    default:                                    \
      EMBER_THROW_DTYPE(dtype, what);           \
  }

// Every dtype, complex included (data movement and conversions).
#define EMBER_DISPATCH_ALL_AND_COMPLEX(dtype, what, ...)    \
  switch (dtype) {                                         \
    EMBER_CASE(Bool, bool, __VA_ARGS__)                    \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)                \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)                  \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)                \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)                \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)                \
    EMBER_CASE(Float16, ::ember::Half, __VA_ARGS__)        \
    EMBER_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__)   \
    EMBER_CASE(Float32, float, __VA_ARGS__)                \
    EMBER_CASE(Float64, double, __VA_ARGS__)               \
    EMBER_CASE(Complex64, ::ember::c64, __VA_ARGS__)       \
    EMBER_CASE(Complex128, ::ember::c128, __VA_ARGS__)     \
    default:                                               \
      EMBER_THROW_DTYPE(dtype, what);                      \
  }

#define EMBER_DISPATCH_COMPLEX(dtype, what, ...)      \
  switch (dtype) {                                   \
    EMBER_CASE(Complex64, ::ember::c64, __VA_ARGS__)   \
    EMBER_CASE(Complex128, ::ember::c128, __VA_ARGS__) \
    default:                                         \
      EMBER_THROW_DTYPE(dtype, what);                \
  }

// Every dtype but bool, with float16/bfloat16 stored as themselves (kernels that compute them
// in float32 element by element).
#define EMBER_DISPATCH_NUMERIC(dtype, what, ...)           \
  switch (dtype) {                                         \
    EMBER_CASE(UInt8, uint8_t, __VA_ARGS__)                \
    EMBER_CASE(Int8, int8_t, __VA_ARGS__)                  \
    EMBER_CASE(Int16, int16_t, __VA_ARGS__)                \
    EMBER_CASE(Int32, int32_t, __VA_ARGS__)                \
    EMBER_CASE(Int64, int64_t, __VA_ARGS__)                \
    EMBER_CASE(Float16, ::ember::Half, __VA_ARGS__)        \
    EMBER_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__)   \
    EMBER_CASE(Float32, float, __VA_ARGS__)                \
    EMBER_CASE(Float64, double, __VA_ARGS__)               \
    default:                                               \
      EMBER_THROW_DTYPE(dtype, what);                      \
  }

#define EMBER_DISPATCH_FLOATING_ALL(dtype, what, ...)      \
  switch (dtype) {                                         \
    EMBER_CASE(Float16, ::ember::Half, __VA_ARGS__)        \
    EMBER_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__)   \
    EMBER_CASE(Float32, float, __VA_ARGS__)                \
    EMBER_CASE(Float64, double, __VA_ARGS__)               \
    default:                                               \
      EMBER_THROW_DTYPE(dtype, what);                      \
  }

// float32, float64 and the complex types (BLAS/LAPACK-backed kernels).
#define EMBER_DISPATCH_FLOATING_AND_COMPLEX(dtype, what, ...) \
  switch (dtype) {                                           \
    EMBER_CASE(Float32, float, __VA_ARGS__)                  \
    EMBER_CASE(Float64, double, __VA_ARGS__)                 \
    EMBER_CASE(Complex64, ::ember::c64, __VA_ARGS__)         \
    EMBER_CASE(Complex128, ::ember::c128, __VA_ARGS__)       \
    default:                                                 \
      EMBER_THROW_DTYPE(dtype, what);                        \
  }

// float32 and float64 only.
#define EMBER_DISPATCH_FLOATING(dtype, what, ...) \
  switch (dtype) {                               \
    EMBER_CASE(Float32, float, __VA_ARGS__)      \
    EMBER_CASE(Float64, double, __VA_ARGS__)     \
    default:                                     \
      EMBER_THROW_DTYPE(dtype, what);            \
  }
