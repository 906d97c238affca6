// Kernel family "specfns": the special functions of ember.special beyond i0/i1/igamma (mathfns):
// Bessel J0/J1/Y0/Y1, modified Bessel I0/I1/K0/K1 (plain and exponentially scaled), the spherical
// Bessel j0, Airy Ai, erfcx, log_ndtr and the Hurwitz zeta function. Values are computed in double
// from libstdc++'s C++17 special math functions, with asymptotic expansions where those overflow
// or underflow; the Python layer promotes the operands (float16/bfloat16 as float32).
#include <pybind11/pybind11.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "../common/dtype.h"
#include "elementwise.h"

namespace py = pybind11;

namespace ember {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;

// The codes the Python layer passes (ember/_src/ops/pointwise/special_more.py keeps the same list).
enum Code : int {
  kI0e = 0, kI1e, kJ0, kJ1, kY0, kY1, kI0, kI1, kK0, kK1, kK0e, kK1e, kSphJ0, kAiryAi, kErfcx, kLogNdtr,
};

// e^-x I_nu(x) for large x (Abramowitz & Stegun 9.7.1): terms until they stop shrinking.
double scaled_i_asymptotic(double nu, double x) {
  double mu = 4 * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 30; ++k) {
    double next = -term * (mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * x);
    if (std::fabs(next) >= std::fabs(term)) break;
    term = next;
    sum += term;
    if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
  }
  return sum / std::sqrt(2 * kPi * x);
}

// e^x K_nu(x) for large x (A&S 9.7.2).
double scaled_k_asymptotic(double nu, double x) {
  double mu = 4 * nu * nu, term = 1, sum = 1;
  for (int k = 1; k < 30; ++k) {
    double next = term * (mu - (2 * k - 1) * (2 * k - 1)) / (k * 8 * x);
    if (std::fabs(next) >= std::fabs(term)) break;
    term = next;
    sum += term;
    if (std::fabs(term) < 1e-17 * std::fabs(sum)) break;
  }
  return sum * std::sqrt(kPi / (2 * x));
}

double scaled_i(int order, double x) {  // e^-|x| I_order(x); I0 even, I1 odd
  if (std::isnan(x)) return kNaN;
  double ax = std::fabs(x);
  double v = ax > 500 ? scaled_i_asymptotic(order, ax) : std::exp(-ax) * std::cyl_bessel_i(double(order), ax);
  return order == 1 && x < 0 ? -v : v;
}

double plain_i(int order, double x) {
  if (std::isnan(x) || std::isinf(x)) return kNaN;  // as PyTorch's modified_bessel_i0/i1
  double ax = std::fabs(x);
  double v = ax > 713 ? kInf : std::cyl_bessel_i(double(order), ax);
  return order == 1 && x < 0 ? -v : v;
}

double plain_k(int order, double x, bool scaled) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0;
  if (x > 500) return scaled ? scaled_k_asymptotic(order, x) : scaled_k_asymptotic(order, x) * std::exp(-x);
  double v = std::cyl_bessel_k(double(order), x);
  return scaled ? v * std::exp(x) : v;
}

// At +-inf PyTorch's J and Y give NaN (not their limit 0); ember matches it.
double bessel_j(int order, double x) {  // J0 even, J1 odd
  if (std::isnan(x) || std::isinf(x)) return kNaN;
  double v = std::cyl_bessel_j(double(order), std::fabs(x));
  return order == 1 && x < 0 ? -v : v;
}

double bessel_y(int order, double x) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return -kInf;
  if (std::isinf(x)) return kNaN;
  return std::cyl_neumann(double(order), x);
}

double airy_ai(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNaN;  // as PyTorch's airy_ai
  if (x == 0) return 0.35502805388781723926;         // 1 / (3^(2/3) Gamma(2/3))
  double zeta = 2.0 / 3.0 * std::pow(std::fabs(x), 1.5);
  if (x > 0) {
    if (zeta > 700) return 0;
    return std::sqrt(x / 3) / kPi * std::cyl_bessel_k(1.0 / 3.0, zeta);
  }
  // Ai(-t) = sqrt(t) / 2 (J_1/3(zeta) - Y_1/3(zeta) / sqrt(3)), from J_-nu = cos(nu pi) J_nu - sin(nu pi) Y_nu.
  double t = -x;
  return std::sqrt(t) / 2 * (std::cyl_bessel_j(1.0 / 3.0, zeta) - std::cyl_neumann(1.0 / 3.0, zeta) / std::sqrt(3.0));
}

double erfcx(double x) {
  if (std::isnan(x)) return kNaN;
  if (x < 0) {
    if (x < -26.7) return kInf;
    return 2 * std::exp(x * x) - erfcx(-x);
  }
  if (x < 25) return std::exp(x * x) * std::erfc(x);
  // 1 / (x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2 x^2)^k
  double inv = 1 / (2 * x * x), term = 1, sum = 1;
  for (int k = 1; k < 12; ++k) {
    term *= -(2 * k - 1) * inv;
    sum += term;
  }
  return sum / (x * std::sqrt(kPi));
}

double log_ndtr(double x) {
  if (std::isnan(x)) return kNaN;
  double t = x / std::sqrt(2.0);
  if (x < -1) return std::log(erfcx(-t) / 2) - t * t;  // no underflow of erfc in the far left tail
  return std::log1p(-std::erfc(t) / 2);
}

double spherical_j0(double x) {
  if (std::isnan(x)) return kNaN;
  if (std::isinf(x)) return 0;
  if (std::fabs(x) < 0.5) {  // the series: sin(x)/x loses nothing here, but keeps x = 0 exact
    double x2 = x * x;
    return 1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72 * (1 - x2 / 110))));
  }
  return std::sin(x) / x;
}

double special_unary(int code, double x) {
  try {
    switch (code) {
      case kI0e: return scaled_i(0, x);
      case kI1e: return scaled_i(1, x);
      case kJ0: return bessel_j(0, x);
      case kJ1: return bessel_j(1, x);
      case kY0: return bessel_y(0, x);
      case kY1: return bessel_y(1, x);
      case kI0: return plain_i(0, x);
      case kI1: return plain_i(1, x);
      case kK0: return plain_k(0, x, false);
      case kK1: return plain_k(1, x, false);
      case kK0e: return plain_k(0, x, true);
      case kK1e: return plain_k(1, x, true);
      case kSphJ0: return spherical_j0(x);
      case kAiryAi: return airy_ai(x);
      case kErfcx: return erfcx(x);
      case kLogNdtr: return log_ndtr(x);
      default: return kNaN;
    }
  } catch (const std::exception&) {  // libstdc++ reports domain/overflow errors by throwing
    return kNaN;
  }
}

// Hurwitz zeta(x, q) = sum_k (k + q)^-x by Euler-Maclaurin summation: a direct sum of the first
// terms, then the integral and the Bernoulli-number corrections (coefficients (2k)! / B_2k).
double hurwitz_zeta(double x, double q) {
  static const double kA[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                              7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                              -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  const double eps = std::numeric_limits<double>::epsilon();
  if (std::isnan(x) || std::isnan(q)) return kNaN;
  if (x == 1) return kInf;
  if (x < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (x != std::floor(x)) return kNaN;  // a negative base to a non-integer power
  }
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9) {
    i += 1;
    a += 1;
    b = std::pow(a, -x);
    s += b;
    if (std::fabs(b / s) < eps) return s;
  }
  double w = a;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  double fac = 1, k = 0;
  for (int j = 0; j < 12; ++j) {
    fac *= x + k;
    b /= w;
    double t = fac * b / kA[j];
    s += t;
    if (std::fabs(t / s) < eps) return s;
    k += 1;
    fac *= x + k;
    b /= w;
    k += 1;
  }
  return s;
}

void check_same(const TensorArg& out, const TensorArg& x) {
  if (out.dtype != x.dtype) throw std::invalid_argument("special: operand dtypes differ");
}

void unary_impl(py::handle out_obj, py::handle x_obj, int code) {
  if (code < kI0e || code > kLogNdtr) throw std::invalid_argument("special_unary_: unknown function code");
  TensorArg out = unpack(out_obj), x = unpack(x_obj);
  check_same(out, x);
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(out.dtype, "special", [&] {
    unary_loop<scalar_t, scalar_t>(out, x, [code](scalar_t v) {
      return static_cast<scalar_t>(special_unary(code, static_cast<double>(v)));
    });
  });
}

void zeta_impl(py::handle out_obj, py::handle x_obj, py::handle q_obj) {
  TensorArg out = unpack(out_obj), x = unpack(x_obj), q = unpack(q_obj);
  check_same(out, x);
  check_same(out, q);
  py::gil_scoped_release release;
  EMBER_DISPATCH_FLOATING(out.dtype, "zeta", [&] {
    binary_loop<scalar_t, scalar_t, scalar_t>(out, x, q, [](scalar_t a, scalar_t b) {
      return static_cast<scalar_t>(hurwitz_zeta(static_cast<double>(a), static_cast<double>(b)));
    });
  });
}

}  // namespace

void bind_specfns(py::module_& m) {
  m.def("special_unary_", &unary_impl, py::arg("out"), py::arg("x"), py::arg("code"),
        "out = f_code(x) for the special functions of ember.special (codes: special_more.py).");
  m.def("zeta_", &zeta_impl, py::arg("out"), py::arg("x"), py::arg("q"),
        "out = the Hurwitz zeta function zeta(x, q) (broadcast).");
}

}  // namespace ember
