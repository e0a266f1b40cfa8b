// Leave-one-out from one fit: ALO (Theorem 1 with the exact rank-one downdate),
// the influence-function approximation (no downdate) and the Lemma 3 estimator.
// See docs/math/alo.md.
#pragma once

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "enet.hpp"
#include "losses.hpp"
#include "newton.hpp"

namespace aloocv {

enum class LooMethod : int { ALO = 0, IF = 1, Lemma3 = 2, Exact = 3 };

LooMethod loo_method_from_name(const std::string& name);

struct LooResult {
  Vec losses, predictions, leverages;  // leverages empty for the exact method
  // 1 - d_i h_i, the factor of the rank-one downdate (the closed forms divide by it);
  // empty for the exact method. The dual route computes it directly (a stable form);
  // otherwise loo_formulas computes it from the leverages.
  Vec den;
  // Exact refits that missed the tolerance, those among them that stopped on a singular
  // (not numerically positive definite) leave-one-out Hessian, and the indices of those
  // samples (ascending). A singular refit has no unique minimizer: its loss and prediction
  // are NaN, and it is never counted as converged.
  Index n_not_converged = 0;
  Index n_singular = 0;
  std::vector<Index> singular;
};

// The samples an exact LOO refits: all of them (idx == nullptr), or a list of indices
// (an accuracy certificate refits a random subset). Results are in the list's order.
struct SampleSet {
  const std::vector<Index>* idx = nullptr;
  Index size(Index n) const { return idx ? static_cast<Index>(idx->size()) : n; }
  Index operator()(Index k) const { return idx ? (*idx)[static_cast<size_t>(k)] : k; }
  void check(Index n) const {
    if (!idx) return;
    for (Index i : *idx)
      if (i < 0 || i >= n) {
        throw InvalidInput("sample index " + std::to_string(i) + " is outside [0, " +
                           std::to_string(n) + ")");
      }
  }
};

namespace detail {
// 1 - d_i h_i at or below this (the rounding level): the leave-one-out Hessian is singular.
constexpr double kSingularDen = 64 * std::numeric_limits<double>::epsilon();
inline bool downdate_singular(double den) { return !(den > kSingularDen); }

[[noreturn]] inline void throw_loo_singular(Index i, double dh) {
  std::ostringstream msg;
  msg << "the leave-one-out Hessian is singular for sample " << i << " (d_i h_i = " << dh
      << " >= 1): without this sample the problem has no unique minimizer; use a larger penalty";
  throw SingularHessian(msg.str());
}

// Marks the exact refit at position k (sample i) singular (LooResult::singular): NaN loss
// and prediction, no value to report.
inline void mark_singular(LooResult& out, std::vector<char>& flag, Index k) {
  flag[static_cast<size_t>(k)] = 1;
  out.predictions[k] = out.losses[k] = std::numeric_limits<double>::quiet_NaN();
}

// Counts the singular refits and lists their samples (after the parallel loop).
inline void collect_singular(LooResult& out, const std::vector<char>& flag, const SampleSet& set) {
  out.singular.clear();
  for (size_t k = 0; k < flag.size(); ++k)
    if (flag[k]) out.singular.push_back(set(static_cast<Index>(k)));
  std::sort(out.singular.begin(), out.singular.end());
  out.n_singular = static_cast<Index>(out.singular.size());
}
}  // namespace detail

// The closed forms from the linear predictor eta and the leverages h (already in
// out.leverages), and 1 - d_i h_i (computed here unless already in out.den): O(n).
template <class Loss>
void loo_formulas(const Problem& pb, const double* eta_hat, LooMethod method, LooResult& out,
                  int n_threads) {
  const Index n = pb.n();
  const int nt = threads_for(n_threads, 32.0 * double(n));
  out.losses.resize(n);
  out.predictions.resize(n);
  const bool given_den = out.den.size() == n;
  if (!given_den) out.den.resize(n);
  ExceptionCatcher guard;
#pragma omp parallel for schedule(static) num_threads(nt)
  for (Index i = 0; i < n; ++i) {
    guard.run([&] {
      const double y = pb.y[i], eta = eta_hat[i], w = pb.weight(i), h = out.leverages[i];
      const double l1 = Loss::d1(y, eta, pb.lp);
      const double g = w * l1, dh = w * Loss::d2(y, eta, pb.lp) * h;
      const double den = given_den ? (w == 0.0 ? 1.0 : out.den[i]) : 1.0 - dh;
      out.den[i] = den;
      if (method != LooMethod::IF && w != 0.0 && detail::downdate_singular(den)) {
        detail::throw_loo_singular(i, dh);
      }
      switch (method) {
        case LooMethod::IF: {
          const double e = eta + g * h;
          out.predictions[i] = e;
          out.losses[i] = Loss::value(y, e, pb.lp);
          break;
        }
        case LooMethod::Lemma3: {
          out.predictions[i] = eta + g * h / den;
          out.losses[i] = Loss::value(y, eta, pb.lp) + l1 * g * h / den;
          break;
        }
        default: {
          const double e = eta + g * h / den;
          out.predictions[i] = e;
          out.losses[i] = Loss::value(y, e, pb.lp);
        }
      }
    });
  }
  guard.rethrow();
}

// out.den = 1 - d_i h_i from out.leverages (1 for zero-weight samples): O(n).
template <class Loss>
void downdate_factors(const Problem& pb, const double* eta_hat, LooResult& out) {
  const Index n = pb.n();
  out.den.resize(n);
  for (Index i = 0; i < n; ++i) {
    const double w = pb.weight(i);
    out.den[i] = w == 0.0 ? 1.0 : 1.0 - w * Loss::d2(pb.y[i], eta_hat[i], pb.lp) * out.leverages[i];
  }
}

// The closed forms on a fitted state: O(n p^2) for the leverages (one blocked
// triangular solve against X~^T), O(n) for the rest.
template <class Loss>
LooResult approx_loo(const Problem& pb, const FitState& st, LooMethod method, int n_threads) {
  const int nt = resolve_threads(n_threads);
  LooResult out;
  out.leverages.resize(pb.n());
  leverages(pb.X, pb.intercept, st.chol, out.leverages.data(), nt, st.columns());
  loo_formulas<Loss>(pb, st.eta.data(), method, out, nt);
  return out;
}

// The closed forms at the end of a fit (ALO, IF, Lemma 3). Where the fit deferred its
// fused end's guard (FitOptions::defer_end_guard) the guard's probe max_i |x~_i^T step|
// is taken in the leverage pass, which reads every row anyway (no pass of its own); in
// the rare case that it fails, settle_deferred_end takes the step and a fresh Hessian
// and the leverages are computed again, for that Hessian. Otherwise fresh_factor, then
// approx_loo. Either way the factor is the Hessian at st.beta and the leverages are its.
template <class Loss>
LooResult settled_approx_loo(const Problem& pb, FitState& st, LooMethod method, int n_threads) {
  if (st.end_guard.step.size() == 0 || st.restricted) {
    fresh_factor<Loss>(pb, st, n_threads);
    return approx_loo<Loss>(pb, st, method, n_threads);
  }
  const int nt = resolve_threads(n_threads);
  LooResult out;
  out.leverages.resize(pb.n());
  double moved = 0.0;
  leverages(pb.X, pb.intercept, st.chol, out.leverages.data(), nt, {}, &st.end_guard.step, &moved);
  if (settle_deferred_end<Loss>(pb, st, nt, moved)) {
    leverages(pb.X, pb.intercept, st.chol, out.leverages.data(), nt);
  }
  loo_formulas<Loss>(pb, st.eta.data(), method, out, nt);
  return out;
}

// The exact refits' chord phase: chord steps on the downdated full factor while each
// cuts max|grad| to at most kExactChordRatio of the last, at most kExactMaxChord in a
// row (exact_loo here, the dask backend's lockstep refits in refit_batch.hpp).
constexpr double kExactChordRatio = 0.25;
constexpr int kExactMaxChord = 9;

namespace detail {

// The refresh policy and the drive options of an exact leave-one-out refit (exact_loo and
// the lockstep refits of refit_batch.hpp): chord steps on the downdated full factor first,
// at least one step (a start within tol is no evidence of a leave-one-out minimum),
// stop at max|grad| / scale <= tol with scale = sum(w) - w_i.
inline RefreshPolicy exact_refit_policy() {
  RefreshPolicy pol;
  pol.chord_ratio = kExactChordRatio;
  pol.start_factored = true;
  pol.max_chord = kExactMaxChord;
  return pol;
}
inline DriveOptions exact_refit_options(double tol, double scale, Index max_iter) {
  DriveOptions o;
  o.tol = o.target = tol;
  o.scale = scale;
  o.max_iter = std::max<Index>(1, max_iter);
  o.check_first = false;
  return o;
}

// The chord step of a refit without sample i on the full factor downdated by it
// (Sherman-Morrison: (H - d_i x~_i x~_i^T)^{-1} = H^{-1} + a a^T d_i / den, a = H^{-1} x~_i,
// den = 1 - d_i h_i): step = -(H^{-1} grad + a (d_i x~_i^T H^{-1} grad) / den); returns the
// decrement -grad^T step.
inline double downdated_step(const Cholesky& full, const Vec& grad, const Vec& xi, const Vec& a,
                             double di, double den, Vec& step) {
  step = -grad;
  full.solve(step.data());
  step += (di * xi.dot(step) / den) * a;
  return -grad.dot(step);
}

// The leave-one-out problem without sample i as a Newton model: starts from the full
// fit with the Hessian H_{-i}(beta_hat) = H - d_i x~_i x~_i^T applied through
// Sherman-Morrison on the full factor (O(p^2) per solve; its first step is the ALO
// point); once the driver refreshes, fresh Hessians of the leave-one-out problem.
class LooRefitModel {
 public:
  // st: the refit's state (beta, eta, grad at beta_hat without sample i); xi = x~_i,
  // a = H^{-1} x~_i, di = w_i l''_i, den = 1 - d_i h_i.
  LooRefitModel(const LossOps& loss, const Problem& pb, FitState& st, Index i, const Cholesky& full,
                const Vec& xi, const Vec& a, double di, double den)
      : core_(loss, pb, st, 1, i, false, true),
        st_(st),
        full_(full),
        xi_(xi),
        a_(a),
        di_(di),
        den_(den) {}
  double gnorm() const { return core_.gnorm(); }
  double objective() const { return core_.objective(); }
  void refactor() {
    core_.refactor();
    fresh_ = true;
  }
  bool factor_at_point() const { return fresh_ && core_.factor_at_point(); }
  bool newton_at_point() const { return factor_at_point(); }
  bool chord_ok() const { return false; }  // once refreshed, fresh Hessians to the end
  double direction(Vec& step) {
    if (fresh_) return core_.direction(step);
    return downdated_step(full_, st_.grad, xi_, a_, di_, den_, step);
  }
  double move(const Vec& step, double dec) { return core_.move(step, dec); }

 private:
  GlmCore core_;
  FitState& st_;
  const Cholesky& full_;
  const Vec &xi_, &a_;
  double di_, den_;
  bool fresh_ = false;
};

}  // namespace detail

// Exact LOO: n refits of the problem without sample i, each warm-started from the
// full fit and solved to the fit tolerance by newton_drive on a LooRefitModel: chord
// steps on the downdated full factor while they contract the gradient 4x per step (at
// most 9), then plain Newton with fresh leave-one-out Hessians. Parallel over samples.
// st's factor must be the Hessian at st.beta (loo() refreshes it): the downdate is then
// the leave-one-out Hessian at the start, and 1 - d_i h_i its singularity test. Each
// refit takes at least one step, as a fit does: a start within tol is no evidence of a
// leave-one-out minimum where the leave-one-out Hessian is nearly flat (a tiny penalty on
// a feature seen by sample i only). A refit whose Hessian is singular (1 - d_i h_i at the
// rounding level, or a fresh Hessian that Cholesky refuses) has no unique minimizer: it
// is counted in n_not_converged and listed in LooResult::singular, with NaN values.
LooResult exact_loo(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                    const FitOptions& opt, SampleSet set = {});

// Exact LOO with an L1 term: the full elastic-net problem refitted without each
// sample, warm-started from the full fit, parallel over samples.
LooResult enet_exact_loo(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                         const FitOptions& opt, SampleSet set = {});

// Refreshes st's factor at beta when needed (fresh_factor), then the method.
// With `set`, the exact method refits only those samples.
LooResult loo(const Problem& pb, LossKind loss, LooMethod method, FitState& st,
              const FitOptions& opt, SampleSet set = {});

// The closed forms are compiled once, in loo.cpp, for every registered loss (the chunk and
// dual routes share them).
#define ALOOCV_LOO_INSTANCES(EXTERN, T) \
  EXTERN template void loo_formulas<T>(const Problem&, const double*, LooMethod, LooResult&, int);
#define ALOOCV_LOO_EXTERN(T) ALOOCV_LOO_INSTANCES(extern, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_LOO_EXTERN)
#undef ALOOCV_LOO_EXTERN

}  // namespace aloocv
