// The regularized empirical-risk problem of the paper's eq. (2):
//   min_beta  sum_i w_i l(y_i, x~_i^T beta) + 1/2 sum_j pen_j beta_j^2
// with beta = (b, theta), x~_i = (1, x_i) when fitting an intercept (pen_0 = 0).
// Notation: docs/math/index.md.
#pragma once

#include <cmath>
#include <vector>

#include "design.hpp"
#include "factor.hpp"
#include "losses.hpp"

namespace aloocv {

struct Problem {
  Design X;
  const double* y = nullptr;
  const double* w = nullptr;  // nullptr: unit weights
  bool intercept = true;
  Vec pen;        // (p1) diagonal of the penalty Hessian; 0 for the intercept
  Vec l1;         // (p1) L1 weights (0 for the intercept); empty when there is no L1 term
  LossParams lp;  // parameters of a parametrized loss (Tweedie power, Huber delta)
  const double* offset = nullptr;  // nullptr: no offset; else eta_i = x~_i^T beta + offset_i

  bool has_l1() const { return l1.size() > 0 && l1.maxCoeff() > 0.0; }
  double l1_norm(const Vec& beta) const { return has_l1() ? l1.dot(beta.cwiseAbs()) : 0.0; }

  Index n() const { return X.n; }
  Index p1() const { return X.p + (intercept ? 1 : 0); }
  double weight(Index i) const { return w ? w[i] : 1.0; }
  double weight_sum() const {
    if (!w) return static_cast<double>(X.n);
    double s = 0.0;
    for (Index i = 0; i < X.n; ++i) s += w[i];
    return s;
  }
  double offset_at(Index i) const { return offset ? offset[i] : 0.0; }
  // eta += offset (after eta = X~ beta)
  void add_offset(double* eta) const {
    if (!offset) return;
    for (Index i = 0; i < X.n; ++i) eta[i] += offset[i];
  }
  // weighted mean of the offset (0 without one), for initial intercepts
  double offset_mean() const {
    if (!offset) return 0.0;
    double s = 0.0;
    for (Index i = 0; i < X.n; ++i) s += weight(i) * offset[i];
    return s / weight_sum();
  }
  // x~_i as a dense vector
  void row(Index i, double* out) const { X.row(i, intercept, out); }
};

// sqrt(w_i l''_i) for the symmetric (I + S K S) forms of the dual route and the fold
// downdates; they need non-negative curvature.
inline double sqrt_curvature(double wd) {
  if (!(wd >= 0.0)) {
    throw InvalidInput(
        "this route needs a loss with non-negative curvature at the fit; the loss has "
        "l'' < 0 at some sample (Tweedie with power > 2): use solver='primal' and "
        "leave-one-out (K-fold with method='exact')");
  }
  return std::sqrt(wd);
}

struct FitOptions {
  double tol = 1e-8;     // on max_j |gradient_j| / sum(w)
  Index max_iter = 100;  // Newton iterations
  int n_threads = 0;     // <= 0: OpenMP default
  // End on a Hessian factored at the returned beta (what the LOO formulas need): near
  // the optimum, Newton continues with chord steps on the last factor (O(n p) each)
  // instead of new Hessians, and one fresh Hessian is taken at the end.
  bool fresh_end = false;
  // With fresh_end: chord steps corrected by the secant pairs of the steps since their
  // factor (limited-memory BFGS on the held factor, SecantChord in newton.hpp), under the
  // chord policy that suits them (detail::smooth_policy). Set by tuning runs (TuneState:
  // the cold first fit and every path point), where the chord steps of a grid's
  // several-fold lambda steps otherwise call for fresh Hessians.
  bool secant = false;
  // With fresh_end: leave the guard of a fused end (settle_end) to the caller's leverage
  // pass, which measures max_i |x~_i^T step| while it reads X anyway (FitState::end_guard;
  // loo() settles it). Only for a caller that settles the state before anything reads it.
  bool defer_end_guard = false;
};

// A fitted point with everything the LOO formulas reuse.
struct FitState {
  Vec beta, eta, grad;  // coefficients, linear predictor, objective gradient
  Cholesky chol;        // factor of the last Newton Hessian (at or next to beta)
  // With an L1 term the LOO formulas live on the active set (the paper, end of its
  // Section 3): chol then factors the Hessian of the columns `active` (+ intercept).
  bool restricted = false;
  std::vector<Index> active;
  Columns columns() const { return restricted ? Columns::of(active) : Columns{}; }
  double objective = 0.0;
  Index n_iter = 0;
  bool converged = false;
  double grad_norm = 0.0;  // max |grad| / sum(w)
  // X~^T D X~ (no penalty) of the last full Hessian pass (smooth fits): along a
  // lambda path the next fit starts Newton with it plus the new penalty.
  Vec hx;
  Index hessian_passes = 0;
  // Of those, the Hessians accumulated from float32 blocks (newton.hpp, kSingleGradFactor).
  Index single_hessian_passes = 0;
  // Of those, the Hessians estimated from a row subsample (newton.hpp, subsample_stride).
  Index sampled_hessian_passes = 0;
  // O(n p) passes over X (products X~ v, X~^T v; a fused step reads X once for both);
  // counted by the smooth Newton fits (newton.hpp), not by the leverage pass of ALO.
  Index matvec_passes = 0;
  // Conjugate-gradient iterations of a matrix-free (Newton-CG) fit (matrix_free.hpp).
  Index cg_iterations = 0;
  // The penalty vector that `grad` includes (smooth fits): along a lambda path the next
  // point's gradient at this beta is grad + (pen_new - grad_pen) .* beta, no pass over X.
  Vec grad_pen;
  // Fused ends whose guard fell back to a final fresh Newton step (settle_fused_end).
  Index fused_end_fallbacks = 0;
  // A fused end whose guard is deferred (FitOptions::defer_end_guard): the Newton step of
  // the end Hessian, its decrement and the fit's tol, still to be settled
  // (settle_deferred_end, newton.hpp); step empty when none is pending.
  struct PendingEnd {
    Vec step;
    double dec = 0.0, tol = 0.0;
  } end_guard;
  // max_i |change of eta_i| in the step taken after the last Hessian: when it is not
  // negligible, the LOO formulas refresh the factor at beta first (see fresh_factor).
  double stale_eta = 0.0;
};

// Sums block(i0, i1), the sum over the rows [i0, i1) of a fixed chunk, over the chunks of
// [0, n), in chunk order (deterministic for any thread count).
template <class F>
double parallel_block_sum(Index n, int n_threads, F&& block) {
  const Partition part{n, std::max<Index>(1, std::min<Index>(64, n / 4096))};
  std::vector<double> partial(static_cast<size_t>(part.chunks), 0.0);
#pragma omp parallel for schedule(static) num_threads(threads_for(n_threads, 16.0 * double(n)))
  for (Index c = 0; c < part.chunks; ++c) {
    partial[static_cast<size_t>(c)] = block(part.begin(c), part.begin(c + 1));
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

// Sums f(i) over [0, n) in the same fixed chunks, row by row within a chunk.
template <class F>
double parallel_sum(Index n, int n_threads, F&& f) {
  return parallel_block_sum(n, n_threads, [&](Index i0, Index i1) {
    double s = 0.0;
    for (Index i = i0; i < i1; ++i) s += f(i);
    return s;
  });
}

}  // namespace aloocv
