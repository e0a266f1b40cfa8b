// Per-sample losses in the linear predictor eta: value and derivatives up to the fourth
// (the third and fourth enter the exact hypergradient and its second derivatives).
//
// Adding a loss: write one struct like those below (name, domain, constant_curvature,
// valid, value, d1, d2, d3, d4, mean, init_intercept; every function takes the runtime
// LossParams, which parameter-free losses ignore) and add one line to
// ALOOCV_FOR_EACH_LOSS. A static_assert checks that the struct provides them all;
// everything else (enum, dispatch, Python names) follows. A loss whose value, l' and l''
// share costly terms (an exp) may also provide
//   static LossEval eval(double y, double eta, const LossParams&, bool with_value)
// that computes them from one evaluation of those terms, bitwise equal to value, d1 and
// d2 (the value only when with_value; 0 otherwise); detail::loss_eval falls back to the
// three calls. A loss whose value has a costly term in y alone (a log, a pow or an lgamma
// of y) may also provide
//   static double y_part(double y, const LossParams&)
//   static LossEval eval_y(double y, double y_part, double eta, const LossParams&, bool)
// eval with that term given (bitwise equal to eval, whose value takes y_part(y)): the
// in-memory fits compute it once per sample and read it back at every later evaluation
// (detail::YPartCache, newton.hpp).
#pragma once

#include <math.h>  // lgamma_r (log_gamma)
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace aloocv {

// The value (when asked for), l' and l'' of a loss at one eta (Loss::eval, loss_eval).
struct LossEval {
  double value = 0.0, d1 = 0.0, d2 = 0.0;
};

// Runtime parameters of the parametrized losses (stored in Problem; the parameter-free
// losses ignore them).
struct LossParams {
  double power = 1.5;    // Tweedie variance power (>= 1)
  double delta = 1.345;  // Huber threshold (> 0)
};

namespace detail {
// log(1 + exp(t)) without overflow.
inline double softplus(double t) { return (t > 0 ? t : 0.0) + std::log1p(std::exp(-std::abs(t))); }
// 1 / (1 + exp(-t)) without overflow.
inline double sigmoid(double t) {
  if (t >= 0) return 1.0 / (1.0 + std::exp(-t));
  const double e = std::exp(t);
  return e / (1.0 + e);
}
// Floor of the weighted mean of y before a log link.
constexpr double kMinLogMean = 1e-10;
// log Gamma(x) without a write to the C library's global `signgam` (std::lgamma sets it;
// called from OpenMP loops, that is a data race): lgamma_r where the C library has it
// (glibc, musl, macOS; the same values as lgamma, whose implementation it is), lgamma
// elsewhere (MSVC's keeps no global sign).
inline double log_gamma(double x) {
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__linux__)
  int sign = 0;
  return ::lgamma_r(x, &sign);
#else
  return std::lgamma(x);
#endif
}
// log(y!) = lgamma(y + 1) of the Poisson loss, read from a table for the integers below
// kLogFactorialTable (counts, the usual y): lgamma costs several times the rest of an O(n)
// loss evaluation, which every Newton step and line-search trial makes. The table holds
// lgamma's own values, so the result is the same bit for bit.
constexpr int kLogFactorialTable = 256;
inline const std::array<double, kLogFactorialTable> kLogFactorial = [] {
  std::array<double, kLogFactorialTable> t{};
  for (int k = 0; k < kLogFactorialTable; ++k) t[k] = log_gamma(double(k) + 1.0);
  return t;
}();
inline double log_factorial(double y) {
  if (y >= 0.0 && y < double(kLogFactorialTable)) {
    const int k = static_cast<int>(y);
    if (double(k) == y) return kLogFactorial[k];
  }
  return log_gamma(y + 1.0);
}
}  // namespace detail

// 1/2 (y - eta)^2
struct Squared {
  static constexpr const char* name = "squared";
  static constexpr const char* domain = "finite real y";
  static constexpr bool constant_curvature = true;
  static bool valid(double y, const LossParams&) { return std::isfinite(y); }
  static double value(double y, double eta, const LossParams&) {
    return 0.5 * (y - eta) * (y - eta);
  }
  static double d1(double y, double eta, const LossParams&) { return eta - y; }
  static double d2(double, double, const LossParams&) { return 1.0; }
  static double d3(double, double, const LossParams&) { return 0.0; }
  static double d4(double, double, const LossParams&) { return 0.0; }
  static double mean(double eta, const LossParams&) { return eta; }
  static double init_intercept(double ybar, const LossParams&) { return ybar; }
};

// Log-loss of a Bernoulli y in {0, 1} with logit link: log(1 + e^eta) - y eta.
struct Logistic {
  static constexpr const char* name = "logistic";
  static constexpr const char* domain = "y in {0, 1}";
  static constexpr bool constant_curvature = false;
  static bool valid(double y, const LossParams&) { return y == 0.0 || y == 1.0; }
  static double value(double y, double eta, const LossParams&) {
    return detail::softplus(eta) - y * eta;
  }
  static double d1(double y, double eta, const LossParams&) { return detail::sigmoid(eta) - y; }
  static double d2(double, double eta, const LossParams&) {
    const double e = std::exp(-std::abs(eta));  // s (1 - s) = e / (1 + e)^2, no overflow
    return e / ((1.0 + e) * (1.0 + e));
  }
  static double d3(double y, double eta, const LossParams& lp) {  // s (1 - s) (1 - 2 s)
    const double s = detail::sigmoid(eta);
    return d2(y, eta, lp) * (1.0 - 2.0 * s);
  }
  static double d4(double y, double eta, const LossParams& lp) {  // s (1 - s) (1 - 6 s + 6 s^2)
    const double s = detail::sigmoid(eta);
    return d2(y, eta, lp) * (1.0 - 6.0 * s * (1.0 - s));
  }
  // e = exp(-|eta|) with l' and l'' from it (the value is max(eta, 0) - y eta + log1p(e):
  // eval below, and the fused Newton rows, newton.hpp, which take the log1p in blocks)
  struct Parts {
    double e, d1, d2;
  };
  static Parts parts(double y, double eta) { return parts(y, eta, std::exp(-std::abs(eta))); }
  // the same from a given e = exp(-|eta|) (the fused rows take the exp in blocks)
  static Parts parts(double y, double eta, double e) {
    return {e, (eta >= 0 ? 1.0 : e) / (1.0 + e) - y, e / ((1.0 + e) * (1.0 + e))};
  }
  // one exp(-|eta|) for softplus, sigmoid and s (1 - s)
  static LossEval eval(double y, double eta, const LossParams&, bool with_value) {
    const Parts q = parts(y, eta);
    LossEval r;
    if (with_value) r.value = (eta > 0 ? eta : 0.0) + std::log1p(q.e) - y * eta;
    r.d1 = q.d1;
    r.d2 = q.d2;
    return r;
  }
  static double mean(double eta, const LossParams&) { return detail::sigmoid(eta); }
  static double init_intercept(double ybar, const LossParams&) {
    const double q = std::min(std::max(ybar, 1e-6), 1.0 - 1e-6);
    return std::log(q / (1.0 - q));
  }
};

// Binomial proportions y in [0, 1] with the numbers of trials as sample weights, logit
// link: the logistic formulas on a fractional y.
struct Binomial : Logistic {
  static constexpr const char* name = "binomial";
  static constexpr const char* domain = "y in [0, 1] (proportions; trials as sample weights)";
  static bool valid(double y, const LossParams&) { return y >= 0.0 && y <= 1.0; }
};

// Poisson negative log-likelihood with log link: e^eta - y eta + log(y!).
struct Poisson {
  static constexpr const char* name = "poisson";
  static constexpr const char* domain = "finite y >= 0";
  static constexpr bool constant_curvature = false;
  static bool valid(double y, const LossParams&) { return std::isfinite(y) && y >= 0.0; }
  // log(y!): a table lookup for counts, lgamma for rates (non-integer y)
  static double y_part(double y, const LossParams&) { return detail::log_factorial(y); }
  static double value(double y, double eta, const LossParams& lp) {
    return std::exp(eta) - y * eta + y_part(y, lp);
  }
  static double d1(double y, double eta, const LossParams&) { return std::exp(eta) - y; }
  static double d2(double, double eta, const LossParams&) { return std::exp(eta); }
  static double d3(double, double eta, const LossParams&) { return std::exp(eta); }
  static double d4(double, double eta, const LossParams&) { return std::exp(eta); }
  static LossEval eval_y(double y, double log_fact, double eta, const LossParams&,
                         bool with_value) {
    const double m = std::exp(eta);
    LossEval r;
    if (with_value) r.value = m - y * eta + log_fact;
    r.d1 = m - y;
    r.d2 = m;
    return r;
  }
  static LossEval eval(double y, double eta, const LossParams& lp, bool with_value) {
    return eval_y(y, with_value ? y_part(y, lp) : 0.0, eta, lp, with_value);
  }
  static double mean(double eta, const LossParams&) { return std::exp(eta); }
  static double init_intercept(double ybar, const LossParams&) {
    return std::log(std::max(ybar, detail::kMinLogMean));
  }
};

// Gamma half unit deviance with log link: y e^-eta + eta - log(y) - 1 (0 at mu = y).
struct Gamma {
  static constexpr const char* name = "gamma";
  static constexpr const char* domain = "finite y > 0";
  static constexpr bool constant_curvature = false;
  static bool valid(double y, const LossParams&) { return std::isfinite(y) && y > 0.0; }
  static double y_part(double y, const LossParams&) { return std::log(y); }
  static double value(double y, double eta, const LossParams& lp) {
    return y * std::exp(-eta) + eta - y_part(y, lp) - 1.0;
  }
  static double d1(double y, double eta, const LossParams&) { return 1.0 - y * std::exp(-eta); }
  static double d2(double y, double eta, const LossParams&) { return y * std::exp(-eta); }
  static double d3(double y, double eta, const LossParams&) { return -y * std::exp(-eta); }
  static double d4(double y, double eta, const LossParams&) { return y * std::exp(-eta); }
  static LossEval eval_y(double y, double log_y, double eta, const LossParams&, bool with_value) {
    const double e = std::exp(-eta);
    LossEval r;
    if (with_value) r.value = y * e + eta - log_y - 1.0;
    r.d1 = 1.0 - y * e;
    r.d2 = y * e;
    return r;
  }
  static LossEval eval(double y, double eta, const LossParams& lp, bool with_value) {
    return eval_y(y, with_value ? y_part(y, lp) : 0.0, eta, lp, with_value);
  }
  static double mean(double eta, const LossParams&) { return std::exp(eta); }
  static double init_intercept(double ybar, const LossParams&) {
    return std::log(std::max(ybar, detail::kMinLogMean));
  }
};

// Tweedie half unit deviance with log link, variance power p = lp.power >= 1:
//   y^(2-p) / ((1-p)(2-p)) - y mu^(1-p) / (1-p) + mu^(2-p) / (2-p),   mu = e^eta,
// with its limits at p = 1 (Poisson: y log(y/mu) - y + mu) and p = 2 (gamma:
// log(mu/y) + y/mu - 1). The k-th derivative in eta (k >= 1) is
//   -(1-p)^(k-1) y mu^(1-p) + (2-p)^(k-1) mu^(2-p).
// For p > 2 the curvature l'' of a sample can be negative (the log link is not the
// canonical one); the objective's Hessian stays positive definite near the optimum.
struct Tweedie {
  static constexpr const char* name = "tweedie";
  static constexpr const char* domain = "finite y >= 0 (y > 0 when power >= 2)";
  static constexpr bool constant_curvature = false;
  static bool valid(double y, const LossParams& lp) {
    return std::isfinite(y) && (lp.power < 2.0 ? y >= 0.0 : y > 0.0);
  }
  // log(y) at p = 1 and p = 2, else y^(2-p) / ((1-p)(2-p)); 0 at y = 0 (not used there)
  static double y_part(double y, const LossParams& lp) {
    const double p = lp.power;
    if (!(y > 0.0)) return 0.0;
    if (p == 1.0 || p == 2.0) return std::log(y);
    return std::pow(y, 2.0 - p) / ((1.0 - p) * (2.0 - p));
  }
  static double value(double y, double eta, const LossParams& lp) {
    const double p = lp.power, yp = y_part(y, lp);
    if (p == 1.0) return (y > 0.0 ? y * (yp - eta) : 0.0) - y + std::exp(eta);
    if (p == 2.0) return eta - yp + y * std::exp(-eta) - 1.0;
    const double a = 1.0 - p, b = 2.0 - p;
    return yp - y * std::exp(a * eta) / a + std::exp(b * eta) / b;
  }
  static double dk(double y, double eta, double p, int k) {
    const double a = 1.0 - p, b = 2.0 - p;
    const double ya = y == 0.0 ? 0.0 : y * std::exp(a * eta);
    return -std::pow(a, k - 1) * ya + std::pow(b, k - 1) * std::exp(b * eta);
  }
  static double d1(double y, double eta, const LossParams& lp) { return dk(y, eta, lp.power, 1); }
  static double d2(double y, double eta, const LossParams& lp) { return dk(y, eta, lp.power, 2); }
  static double d3(double y, double eta, const LossParams& lp) { return dk(y, eta, lp.power, 3); }
  static double d4(double y, double eta, const LossParams& lp) { return dk(y, eta, lp.power, 4); }
  // exp(a eta) and exp(b eta) once (dk with k = 1, 2: pow(a, 0) = 1, pow(a, 1) = a exactly)
  static LossEval eval_y(double y, double yp, double eta, const LossParams& lp, bool with_value) {
    const double p = lp.power, a = 1.0 - p, b = 2.0 - p;
    const double ea = std::exp(a * eta), eb = std::exp(b * eta);
    const double ya = y == 0.0 ? 0.0 : y * ea;
    LossEval r;
    if (with_value) {
      if (p == 1.0) {
        r.value = (y > 0.0 ? y * (yp - eta) : 0.0) - y + eb;
      } else if (p == 2.0) {
        r.value = eta - yp + y * ea - 1.0;
      } else {
        r.value = yp - y * ea / a + eb / b;
      }
    }
    r.d1 = -ya + eb;
    r.d2 = -a * ya + b * eb;
    return r;
  }
  static LossEval eval(double y, double eta, const LossParams& lp, bool with_value) {
    return eval_y(y, with_value ? y_part(y, lp) : 0.0, eta, lp, with_value);
  }
  static double mean(double eta, const LossParams&) { return std::exp(eta); }
  static double init_intercept(double ybar, const LossParams&) {
    return std::log(std::max(ybar, detail::kMinLogMean));
  }
};

// Huber loss of r = y - eta (identity link): r^2 / 2 for |r| <= delta, else
// delta (|r| - delta / 2). l'' is piecewise constant (1 inside, 0 outside); the LOO
// formulas use it as is, and l''' = l'''' = 0.
struct Huber {
  static constexpr const char* name = "huber";
  static constexpr const char* domain = "finite real y";
  static constexpr bool constant_curvature = false;
  static bool valid(double y, const LossParams&) { return std::isfinite(y); }
  static double value(double y, double eta, const LossParams& lp) {
    const double r = std::abs(y - eta);
    return r <= lp.delta ? 0.5 * r * r : lp.delta * (r - 0.5 * lp.delta);
  }
  static double d1(double y, double eta, const LossParams& lp) {
    const double r = y - eta;
    return r > lp.delta ? -lp.delta : (r < -lp.delta ? lp.delta : -r);
  }
  static double d2(double y, double eta, const LossParams& lp) {
    return std::abs(y - eta) <= lp.delta ? 1.0 : 0.0;
  }
  static double d3(double, double, const LossParams&) { return 0.0; }
  static double d4(double, double, const LossParams&) { return 0.0; }
  static double mean(double eta, const LossParams&) { return eta; }
  static double init_intercept(double ybar, const LossParams&) { return ybar; }
};

namespace detail {
// Whether Loss provides eval (see the file comment).
template <class L, class = void>
struct has_eval : std::false_type {};
template <class L>
struct has_eval<L, std::void_t<std::enable_if_t<
                       std::is_same_v<decltype(L::eval(0.0, 0.0, LossParams{}, true)), LossEval>>>>
    : std::true_type {};

// Whether Loss provides y_part and eval_y (see the file comment).
template <class L, class = void>
struct has_y_part : std::false_type {};
template <class L>
struct has_y_part<
    L, std::void_t<std::enable_if_t<
           std::is_same_v<decltype(L::y_part(0.0, LossParams{})), double> &&
           std::is_same_v<decltype(L::eval_y(0.0, 0.0, 0.0, LossParams{}, true)), LossEval>>>>
    : std::true_type {};

// value (when with_value), l' and l'' at eta: Loss::eval where the loss has one, else the
// three functions.
template <class Loss>
inline LossEval loss_eval(double y, double eta, const LossParams& lp, bool with_value) {
  if constexpr (has_eval<Loss>::value) {
    return Loss::eval(y, eta, lp, with_value);
  } else {
    LossEval r;
    if (with_value) r.value = Loss::value(y, eta, lp);
    r.d1 = Loss::d1(y, eta, lp);
    r.d2 = Loss::d2(y, eta, lp);
    return r;
  }
}
}  // namespace detail

// Compile-time check (detection idiom) that a loss provides the whole concept.
template <class R, class T>
using exactly = std::enable_if_t<std::is_same_v<R, T>>;
template <class L, class = void>
struct is_loss : std::false_type {};
template <class L>
struct is_loss<L, std::void_t<exactly<decltype(L::name), const char* const>,
                              exactly<decltype(L::domain), const char* const>,
                              exactly<decltype(L::constant_curvature), const bool>,
                              exactly<decltype(L::valid(0.0, LossParams{})), bool>,
                              exactly<decltype(L::value(0.0, 0.0, LossParams{})), double>,
                              exactly<decltype(L::d1(0.0, 0.0, LossParams{})), double>,
                              exactly<decltype(L::d2(0.0, 0.0, LossParams{})), double>,
                              exactly<decltype(L::d3(0.0, 0.0, LossParams{})), double>,
                              exactly<decltype(L::d4(0.0, 0.0, LossParams{})), double>,
                              exactly<decltype(L::mean(0.0, LossParams{})), double>,
                              exactly<decltype(L::init_intercept(0.0, LossParams{})), double>>>
    : std::true_type {};

// The registry: one line per loss.
#define ALOOCV_FOR_EACH_LOSS(X) \
  X(Squared)                    \
  X(Logistic)                   \
  X(Poisson)                    \
  X(Gamma)                      \
  X(Tweedie)                    \
  X(Binomial)                   \
  X(Huber)

#define ALOOCV_LOSS_CHECK(T)                                              \
  static_assert(is_loss<T>::value, #T                                     \
                " must provide name, domain, constant_curvature, valid, " \
                "value, d1, d2, d3, d4, mean and init_intercept");
ALOOCV_FOR_EACH_LOSS(ALOOCV_LOSS_CHECK)
#undef ALOOCV_LOSS_CHECK

enum class LossKind : int {
#define ALOOCV_LOSS_ENUM(T) T,
  ALOOCV_FOR_EACH_LOSS(ALOOCV_LOSS_ENUM)
#undef ALOOCV_LOSS_ENUM
};

inline std::vector<std::string> loss_names() {
  std::vector<std::string> out;
#define ALOOCV_LOSS_NAME(T) out.emplace_back(T::name);
  ALOOCV_FOR_EACH_LOSS(ALOOCV_LOSS_NAME)
#undef ALOOCV_LOSS_NAME
  return out;
}

inline LossKind loss_from_name(const std::string& name) {
#define ALOOCV_LOSS_MATCH(T) \
  if (name == T::name) return LossKind::T;
  ALOOCV_FOR_EACH_LOSS(ALOOCV_LOSS_MATCH)
#undef ALOOCV_LOSS_MATCH
  std::ostringstream msg;
  msg << "unknown loss '" << name << "'; expected one of:";
  for (const auto& n : loss_names()) msg << " '" << n << "'";
  throw InvalidInput(msg.str());
}

// Throws InvalidInput when the loss parameters are outside their ranges.
inline void check_loss_params(const LossParams& lp) {
  if (!(std::isfinite(lp.power) && lp.power >= 1.0))
    throw InvalidInput("Tweedie power must be finite and >= 1");
  if (!(std::isfinite(lp.delta) && lp.delta > 0.0))
    throw InvalidInput("Huber delta must be finite and > 0");
}

// Calls f(LossStruct{}) for the loss `kind`.
template <class F>
decltype(auto) dispatch_loss(LossKind kind, F&& f) {
  switch (kind) {
#define ALOOCV_LOSS_CASE(T) \
  case LossKind::T:         \
    return f(T{});
    ALOOCV_FOR_EACH_LOSS(ALOOCV_LOSS_CASE)
#undef ALOOCV_LOSS_CASE
  }
  throw InvalidInput("unknown loss kind");
}

// Throws InvalidInput naming the first y outside the loss's domain; index0: the index of
// y[0] in the whole response (a chunk of it), for the index that the message names.
template <class Loss>
void check_response(const double* y, Index n, const LossParams& lp, Index index0 = 0) {
  for (Index i = 0; i < n; ++i) {
    if (!Loss::valid(y[i], lp)) {
      std::ostringstream msg;
      msg << "y is outside the domain of the " << Loss::name << " loss (" << Loss::domain << "): y["
          << index0 + i << "] = " << y[i];
      throw InvalidInput(msg.str());
    }
  }
}

}  // namespace aloocv
