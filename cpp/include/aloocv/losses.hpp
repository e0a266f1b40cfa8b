// Per-sample losses in the linear predictor eta: value and derivatives up to the fourth
// (the third and fourth enter the exact hypergradient and its second derivatives).
//
// Adding a loss: write one struct like those below (name, domain, value, d1, d2, d3, d4,
// valid, init_intercept, constant_curvature) and add one line to
// ALOOCV_FOR_EACH_LOSS. Everything else (enum, dispatch, Python names) follows.
#pragma once

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"

namespace aloocv {

namespace detail {
// log(1 + exp(t)) without overflow.
inline double softplus(double t) { return (t > 0 ? t : 0.0) + std::log1p(std::exp(-std::abs(t))); }
// 1 / (1 + exp(-t)) without overflow.
inline double sigmoid(double t) {
  if (t >= 0) return 1.0 / (1.0 + std::exp(-t));
  const double e = std::exp(t);
  return e / (1.0 + e);
}
}  // namespace detail

// 1/2 (y - eta)^2
struct Squared {
  static constexpr const char* name = "squared";
  static constexpr const char* domain = "finite real y";
  static constexpr bool constant_curvature = true;
  static bool valid(double y) { return std::isfinite(y); }
  static double value(double y, double eta) { return 0.5 * (y - eta) * (y - eta); }
  static double d1(double y, double eta) { return eta - y; }
  static double d2(double, double) { return 1.0; }
  static double d3(double, double) { return 0.0; }
  static double d4(double, double) { return 0.0; }
  static double init_intercept(double ybar) { return ybar; }
};

// Log-loss of a Bernoulli y in {0, 1} with logit link: log(1 + e^eta) - y eta.
struct Logistic {
  static constexpr const char* name = "logistic";
  static constexpr const char* domain = "y in {0, 1}";
  static constexpr bool constant_curvature = false;
  static bool valid(double y) { return y == 0.0 || y == 1.0; }
  static double value(double y, double eta) { return detail::softplus(eta) - y * eta; }
  static double d1(double y, double eta) { return detail::sigmoid(eta) - y; }
  static double d2(double, double eta) {
    const double e = std::exp(-std::abs(eta));  // s (1 - s) = e / (1 + e)^2, no overflow
    return e / ((1.0 + e) * (1.0 + e));
  }
  static double d3(double y, double eta) {  // s (1 - s) (1 - 2 s)
    const double s = detail::sigmoid(eta);
    return d2(y, eta) * (1.0 - 2.0 * s);
  }
  static double d4(double y, double eta) {  // s (1 - s) (1 - 6 s + 6 s^2)
    const double s = detail::sigmoid(eta);
    return d2(y, eta) * (1.0 - 6.0 * s * (1.0 - s));
  }
  static double init_intercept(double ybar) {
    const double q = std::min(std::max(ybar, 1e-6), 1.0 - 1e-6);
    return std::log(q / (1.0 - q));
  }
};

// Poisson negative log-likelihood with log link: e^eta - y eta + log(y!).
struct Poisson {
  static constexpr const char* name = "poisson";
  static constexpr const char* domain = "finite y >= 0";
  static constexpr bool constant_curvature = false;
  static bool valid(double y) { return std::isfinite(y) && y >= 0.0; }
  static double value(double y, double eta) {
    return std::exp(eta) - y * eta + std::lgamma(y + 1.0);
  }
  static double d1(double y, double eta) { return std::exp(eta) - y; }
  static double d2(double, double eta) { return std::exp(eta); }
  static double d3(double, double eta) { return std::exp(eta); }
  static double d4(double, double eta) { return std::exp(eta); }
  static double init_intercept(double ybar) { return std::log(std::max(ybar, 1e-10)); }
};

// The registry: one line per loss.
#define ALOOCV_FOR_EACH_LOSS(X) \
  X(Squared)                    \
  X(Logistic)                   \
  X(Poisson)

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

// Throws InvalidInput naming the first y outside the loss's domain.
template <class Loss>
void check_response(const double* y, Index n) {
  for (Index i = 0; i < n; ++i) {
    if (!Loss::valid(y[i])) {
      std::ostringstream msg;
      msg << "y is outside the domain of the " << Loss::name << " loss (" << Loss::domain << "): y["
          << i << "] = " << y[i];
      throw InvalidInput(msg.str());
    }
  }
}

}  // namespace aloocv
