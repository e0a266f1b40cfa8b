// Newton / IRLS fits of smooth L2-penalized GLMs: fresh Hessians far from the optimum,
// secant-corrected chord steps on the last factor near it (fit_policy); the factor of the
// last Hessian is kept for the leave-one-out step. See docs/math/newton.md.
#pragma once

#include <algorithm>
#include <vector>

#include <limits>
#include <sstream>

#include "blas.hpp"
#include "hessian.hpp"
#include "losses.hpp"
#include "newton_driver.hpp"
#include "problem.hpp"
#include "vector_math.hpp"

namespace aloocv {

namespace detail {

// The terms of the loss value in y alone (Loss::y_part: Gamma's log(y), Tweedie's
// y^(2-p) / ((1-p)(2-p)), Poisson's log(y!), an lgamma for rates) of one model's
// samples: its first evaluation with the value stores them, the later ones (every
// Newton step and line-search trial) read them back instead of a log, a pow or an
// lgamma per sample (bitwise the same value). Empty for the other losses.
struct YPartCache {
  Vec v;
  bool ready = false;
};

// value (when with_value), l' and l'' of sample i at eta, through the cache yc when the
// loss has a y_part (yc may be null: no cache).
template <class Loss>
inline LossEval sample_eval(const Problem& pb, Index i, double eta, bool with_value,
                            YPartCache* yc) {
  if constexpr (has_y_part<Loss>::value) {
    if (with_value && yc) {
      double& yp = yc->v[i];
      if (!yc->ready) yp = Loss::y_part(pb.y[i], pb.lp);
      return Loss::eval_y(pb.y[i], yp, eta, pb.lp, true);
    }
  }
  return loss_eval<Loss>(pb.y[i], eta, pb.lp, with_value);
}

// A cache for a model of pb with Loss (empty, never filled, for a loss without y_part).
template <class Loss>
YPartCache y_part_cache(const Problem& pb) {
  YPartCache c;
  if constexpr (has_y_part<Loss>::value) c.v.resize(pb.n());
  return c;
}
inline YPartCache* cache_of(YPartCache& c) { return c.v.size() ? &c : nullptr; }

// The logistic loss's rows [i0, i0 + m) in blocks (cpp/src/logistic_rows.cpp): g = w l',
// d = w l'' at eta (zero at `skip`; g, d nullptr: values only); returns the sum of w l.
double logistic_rows(const Problem& pb, Index i0, Index m, const double* eta, double* g, double* d,
                     Index skip);

// sum_i w_i l(y_i, eta_i) (skipping `skip`) + 1/2 sum_j pen_j beta_j^2
template <class Loss>
double objective(const Problem& pb, const double* eta, const Vec& beta, int n_threads,
                 Index skip = -1, YPartCache* yc = nullptr) {
  if constexpr (std::is_base_of_v<Logistic, Loss>) {
    const double f = parallel_block_sum(pb.n(), n_threads, [&](Index i0, Index i1) {
      return logistic_rows(pb, i0, i1 - i0, eta, nullptr, nullptr, skip);
    });
    return f + 0.5 * pb.pen.dot(beta.cwiseAbs2()) + pb.l1_norm(beta);
  }
  double f = parallel_sum(pb.n(), n_threads, [&](Index i) {
    const double w = pb.weight(i);
    if (i == skip || w == 0.0) return 0.0;
    if constexpr (has_y_part<Loss>::value) {
      if (yc) return w * sample_eval<Loss>(pb, i, eta[i], true, yc).value;
    }
    return w * Loss::value(pb.y[i], eta[i], pb.lp);
  });
  if (yc) yc->ready = true;
  return f + 0.5 * pb.pen.dot(beta.cwiseAbs2()) + pb.l1_norm(beta);
}

// g_i = w_i l'_i, d_i = w_i l''_i (both zero at `skip`).
template <class Loss>
void derivatives(const Problem& pb, const double* eta, double* g, double* d, int n_threads,
                 Index skip = -1) {
  if constexpr (std::is_base_of_v<Logistic, Loss>) {  // the same rows as the other passes
    parallel_block_sum(pb.n(), n_threads, [&](Index i0, Index i1) {
      return logistic_rows(pb, i0, i1 - i0, eta, g, d, skip);
    });
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads_for(n_threads, 16.0 * double(pb.n())))
  for (Index i = 0; i < pb.n(); ++i) {
    const double w = (i == skip) ? 0.0 : pb.weight(i);
    if (w == 0.0) {
      g[i] = 0.0;
      if (d) d[i] = 0.0;
      continue;
    }
    const LossEval v = loss_eval<Loss>(pb.y[i], eta[i], pb.lp, false);
    g[i] = w * v.d1;
    if (d) d[i] = w * v.d2;
  }
}

// derivatives() and objective() in one O(n) loop (one evaluation of the loss per sample;
// the same per-sample terms and summation order as objective(), so the same value).
template <class Loss>
double derivatives_objective(const Problem& pb, const double* eta, double* g, double* d,
                             const Vec& beta, int n_threads, Index skip = -1,
                             YPartCache* yc = nullptr) {
  if constexpr (std::is_base_of_v<Logistic, Loss>) {
    const double f = parallel_block_sum(pb.n(), n_threads, [&](Index i0, Index i1) {
      return logistic_rows(pb, i0, i1 - i0, eta, g, d, skip);
    });
    return f + 0.5 * pb.pen.dot(beta.cwiseAbs2()) + pb.l1_norm(beta);
  }
  const double f = parallel_sum(pb.n(), n_threads, [&](Index i) {
    const double w = (i == skip) ? 0.0 : pb.weight(i);
    if (w == 0.0) {
      g[i] = d[i] = 0.0;
      return 0.0;
    }
    const LossEval v = sample_eval<Loss>(pb, i, eta[i], true, yc);
    g[i] = w * v.d1;
    d[i] = w * v.d2;
    return w * v.value;
  });
  if (yc) yc->ready = true;
  return f + 0.5 * pb.pen.dot(beta.cwiseAbs2()) + pb.l1_norm(beta);
}

// The loss's O(n) passes above as function pointers (their instances for Loss): drivers
// whose other work is loss-independent (the matrix-free fits and refits) are compiled once
// and call these once or twice per Newton step.
struct LossPasses {
  double (*derivatives_objective)(const Problem&, const double*, double*, double*, const Vec&, int,
                                  Index, YPartCache*);
  double (*objective)(const Problem&, const double*, const Vec&, int, Index, YPartCache*);
  YPartCache (*y_part_cache)(const Problem&);
  void (*derivatives)(const Problem&, const double*, double*, double*, int, Index);
};
template <class Loss>
LossPasses loss_passes() {
  return LossPasses{&derivatives_objective<Loss>, &objective<Loss>, &y_part_cache<Loss>,
                    &derivatives<Loss>};
}

// grad = X~^T g + pen .* beta
inline void full_gradient(const Problem& pb, const double* g, const Vec& beta, Vec& grad,
                          int n_threads) {
  grad.resize(pb.p1());
  gradient(pb.X, g, pb.intercept, grad.data(), n_threads);
  grad.array() += pb.pen.array() * beta.array();
  if (!grad.allFinite()) {
    throw InvalidInput(
        "the gradient is not finite (overflow of the loss at extreme linear predictors); rescale "
        "X or increase the penalty");
  }
}

// Float32 Newton Hessians (docs/math/newton.md, "Single-precision Hessians"): a fit's
// Hessians are accumulated from float32 row blocks (SSYRK, about twice DSYRK's speed; the
// blocks summed in float64) while max|grad| / sum(w) exceeds kSingleGradFactor x tol: they
// only choose Newton directions there, whose errors the float64 gradient, the line search
// and the stopping test absorb. The end's Hessian (what the LOO formulas factor) and every
// Hessian closer to the optimum are float64. A float32 Hessian whose factor's rcond() is
// below kSingleMinRcond (relative errors eps32 / rcond in its solves) is taken again in
// float64.
constexpr double kSingleGradFactor = 1e3;
constexpr double kSingleMinRcond = 1e-3;

// Subsampled Newton Hessians (docs/math/newton.md, "Subsampled Hessians"): in a fit from
// the default start (zero slopes), while max|grad| is above kSubsampleGradShare of its
// value at the start (the first decade of the descent, far from the optimum), a Hessian is
// taken from every k-th row of a C-ordered dense X, its curvatures times k (an unbiased
// estimate of X~^T D X~ read from 1/k of X), with k the largest stride up to
// kSubsampleMaxStride that keeps at least kSubsampleRowsPerColumn sampled rows per column
// of X~ (relative spectral error about sqrt(p1 / (n / k)) <= 0.18 on well-spread rows).
// Such a Hessian only chooses directions: its factor is marked stale like a float32 one, a
// sampled factor whose rcond() is below kSingleMinRcond (a column the sample barely sees)
// is taken again from every row, and a step without descent on it switches the drive to
// full Hessians.
// A fit that ends on the Hessian at its point (FitOptions::fresh_end: ALO's) samples
// only where the sample spans the rows: every column's weighted second moment
// sum_i w_i x_ij^2 over the sampled rows, times k, within kSubsampleMomentError (relative)
// of the one over every row (subsample_spans: one read of X; heavy-tailed rows that the
// sample misses make its Hessian underestimate the curvature, and its long first steps
// cost a fresh end's drive more Hessians than the sample saves), and its sampled factors
// take no chord steps once max|grad| is below the sampled range (GlmCore::factor_expired:
// the chord steps to that drive's target and polish would go at a sampled factor's slow
// contraction; the next Hessian is full). The moment test's 25% is 4.6 standard errors of
// a Gaussian column's sampled moment (sqrt(2 / m)) at the fewest sampled rows (m = 32 p1,
// p1 = 21), more at larger m; Student-t(2) rows fail it, and so do the t(1.2) rows and
// the weights on rows the sample misses of tests/test_fit.py.
constexpr double kSubsampleGradShare = 0.1;
constexpr Index kSubsampleMaxStride = 8;
constexpr Index kSubsampleRowsPerColumn = 32;
constexpr double kSubsampleMomentError = 0.25;
// A plain fit (no fresh end) whose sample holds at least kSubsampleThroughoutRows rows per
// column of X~ (relative spectral error about sqrt(1 / 1024) = 0.03: a chord step on it
// contracts the gradient nearly as a full Hessian's Newton step does) keeps sampling to
// the end (docs/math/newton.md, "Subsampled Hessians").
constexpr Index kSubsampleThroughoutRows = 1024;
// ... unless a step on a sampled factor below the first decade's range contracts max|grad|
// by less than this factor (rows the sample misses: Student-t(1.2) rows contracted by 0.58
// a step and stalled above tol); the drive's next Hessians then take every row.
constexpr double kSubsampleLocalContraction = 0.5;

// The row stride of a subsampled Hessian of pb (1: none; see above).
inline Index subsample_stride(const Problem& pb) {
  if (pb.X.sparse || pb.X.dense.col_stride != 1) return 1;
  const Index per = kSubsampleRowsPerColumn * pb.p1();
  return std::max<Index>(1, std::min<Index>(kSubsampleMaxStride, pb.n() / std::max<Index>(1, per)));
}

// Whether every k-th row of pb's dense X spans its rows (kSubsampleMomentError above; a
// column that is zero in every row passes). One read of X.
inline bool subsample_spans(const Problem& pb, Index k, int n_threads) {
  const Index p = pb.X.p;
  std::vector<double> all(static_cast<size_t>(p)), sampled(static_cast<size_t>(p));
  column_second_moments(pb.X, pb.w, k, all.data(), sampled.data(), n_threads);
  for (Index j = 0; j < p; ++j) {
    const double a = all[static_cast<size_t>(j)], s = double(k) * sampled[static_cast<size_t>(j)];
    if (!(std::abs(s - a) <= kSubsampleMomentError * a)) return false;
  }
  return true;
}

// Adds the penalty to an approximate unpenalized Hessian in Hbuf (float32 blocks or a row
// sample; kept in `unpen` when given) and factors it: false where an entry is not finite
// (float32's range ends near 3.4e38: huge curvatures or rows overflow there first), the
// factor fails or its rcond() is below kSingleMinRcond (the caller then takes the exact one).
inline bool factor_approximate(const Problem& pb, Vec& Hbuf, Cholesky& chol, Vec* unpen) {
  const Index p1 = pb.p1();
  if (!std::all_of(Hbuf.data(), Hbuf.data() + p1 * p1, [](double v) { return std::isfinite(v); })) {
    return false;
  }
  if (unpen) *unpen = Hbuf;
  for (Index j = 0; j < p1; ++j) Hbuf[j * p1 + j] += pb.pen[j];
  try {
    chol.factor(Hbuf.data(), p1);
    return chol.rcond() >= kSingleMinRcond;
  } catch (const SingularHessian&) {
    return false;
  }
}

// Hessian X~^T D X~ + diag(pen), factored into chol; the unpenalized part is kept in
// `unpen` when given.
// Factors H = X~^T D X~ + P. With `allow_modified` (Newton steps away from the optimum),
// an H that is not positive definite because some d_i < 0 (a loss with negative
// curvature, e.g. Tweedie with power > 2) is replaced by the one with d clipped at 0, a
// descent direction; returns true then (the factor is not the Hessian at beta, and the
// caller marks it stale so that the LOO formulas refresh it).
// With `single` pointing to true, the Hessian is accumulated from float32 blocks (hessian's
// `single`) and kept when its factor's rcond() is at least kSingleMinRcond; otherwise (and
// where no SSYRK is registered) the float64 Hessian is taken and *single set to false.
// With `stride` pointing to k > 1, the Hessian is estimated from every k-th row (curvatures
// times k; subsample_stride) and kept when its factor's rcond() is at least
// kSingleMinRcond; otherwise the Hessian of every row is taken and *stride set to 1.
inline bool factor_hessian(const Problem& pb, const double* d, Vec& Hbuf, Cholesky& chol,
                           int n_threads, Vec* unpen = nullptr, bool allow_modified = false,
                           bool* single = nullptr, Index* stride = nullptr) {
  const Index p1 = pb.p1();
  Hbuf.resize(p1 * p1);
  if (stride != nullptr && *stride > 1) {
    const Index k = *stride, m = (pb.n() + k - 1) / k;
    DenseView v = pb.X.dense;
    v.n = m;
    v.row_stride *= k;
    const Design Xs = Design::from(v);
    std::vector<double> ds(static_cast<size_t>(m));
    bool any_negative = false;
    for (Index i = 0; i < m; ++i) {
      ds[static_cast<size_t>(i)] = double(k) * d[i * k];
      any_negative = any_negative || d[i * k] < 0.0;
    }
    const bool f32 = single != nullptr && *single && blas::has_ssyrk();
    if (!any_negative) {
      hessian(Xs, ds.data(), pb.intercept, Hbuf.data(), n_threads, {}, f32);
      if (factor_approximate(pb, Hbuf, chol, unpen)) {
        if (single != nullptr) *single = f32;
        return false;
      }
    }
    *stride = 1;
  }
  if (single != nullptr && *single) {
    *single = !pb.X.sparse && blas::has_ssyrk();
    if (*single) {
      hessian(pb.X, d, pb.intercept, Hbuf.data(), n_threads, {}, true);
      if (factor_approximate(pb, Hbuf, chol, unpen)) return false;
      *single = false;
    }
  }
  hessian(pb.X, d, pb.intercept, Hbuf.data(), n_threads);
  if (unpen) *unpen = Hbuf;
  for (Index j = 0; j < p1; ++j) Hbuf[j * p1 + j] += pb.pen[j];
  try {
    chol.factor(Hbuf.data(), p1);
    return false;
  } catch (const SingularHessian&) {
    const Index n = pb.n();
    if (!allow_modified || std::none_of(d, d + n, [](double v) { return v < 0.0; })) throw;
  }
  std::vector<double> dplus(d, d + pb.n());
  for (double& v : dplus) v = std::max(v, 0.0);
  hessian(pb.X, dplus.data(), pb.intercept, Hbuf.data(), n_threads);
  if (unpen) *unpen = Hbuf;
  for (Index j = 0; j < p1; ++j) Hbuf[j * p1 + j] += pb.pen[j];
  chol.factor(Hbuf.data(), p1);
  return true;
}

// fused_rows for the logistic loss (and binomial proportions): l = max(eta, 0) - y eta +
// log1p(e) with e = exp(-|eta|), l' and l'' from Logistic::parts, a block of rows at a time
// (cpp/src/logistic_rows.cpp: the exp and log1p through vmath, the rest compiled for AVX2
// where the CPU has it; glibc's scalar exp, log1p and the two divisions per row were ~40% of
// a 1e6 x 50 fit).
double logistic_fused_rows(const Problem& pb, Index i0, Index m, const double* eta, const double* x,
                           double* eta_new, double* gb, double* d, Index skip);

// The loss part of fused_step for the rows [i0, i0 + m): eta_new = eta + x, and, at
// eta_new, g = w l' and d = w l'' (zero at `skip`); returns the block's sum of w l.
template <class Loss>
double fused_rows(const Problem& pb, Index i0, Index m, const double* eta, const double* x,
                  double* eta_new, double* gb, double* d, Index skip, YPartCache* yc) {
  if constexpr (std::is_base_of_v<Logistic, Loss>) {
    return logistic_fused_rows(pb, i0, m, eta, x, eta_new, gb, d, skip);
  }
  double fsum = 0.0;
  for (Index k = 0; k < m; ++k) {
    const Index i = i0 + k;
    const double e = eta[i] + x[k];
    eta_new[i] = e;
    const double w = i == skip ? 0.0 : pb.weight(i);
    if (w == 0.0) {
      gb[k] = 0.0;
      d[i] = 0.0;
      continue;
    }
    const LossEval v = sample_eval<Loss>(pb, i, e, true, yc);
    fsum += w * v.value;
    gb[k] = w * v.d1;
    d[i] = w * v.d2;
  }
  return fsum;
}
using FusedRows = double (*)(const Problem&, Index, Index, const double*, const double*, double*,
                             double*, double*, Index, YPartCache*);

// Backtracking (Armijo, detail::armijo) along beta + t*step with eta + t*xs, through the
// loss's passes. Returns t, or 0 if no decrease was found; eta_try and f_try hold the
// accepted point.
inline double line_search(const LossPasses& loss, const Problem& pb, const Vec& beta,
                          const Vec& step, const Vec& eta, const Vec& xs, double f, double dec,
                          Vec& eta_try, double& f_try, int n_threads, Index skip, YPartCache* yc) {
  return armijo(f, dec, [&](double t) {
    eta_try = eta + t * xs;
    f_try = loss.objective(pb, eta_try.data(), beta + t * step, n_threads, skip, yc);
    return f_try;
  });
}

// The full Newton step in one pass over X: xs = X~ step, eta_new = eta + xs, and, at
// eta_new, g = w l', d = w l'' (n each, zero at `skip`), gX = X~^T g and the summed loss
// (returned). Each row block is read once for both products while it is in cache, and
// each row's loss is evaluated once (loss_eval: one exp for value, l' and l''); fixed
// chunks make the sums independent of the thread count. The pass over X is compiled once
// (fit.cpp), the loss's rows (fused_rows<Loss>) called once per row block.
double fused_pass(const Problem& pb, const Vec& step, const Vec& eta, Vec& eta_new, Vec& xs,
                  Vec& gX, double* g, double* d, int n_threads, Index skip, YPartCache* yc,
                  FusedRows rows);
template <class Loss>
double fused_step(const Problem& pb, const Vec& step, const Vec& eta, Vec& eta_new, Vec& xs,
                  Vec& gX, double* g, double* d, int n_threads, Index skip = -1,
                  YPartCache* yc = nullptr) {
  return fused_pass(pb, step, eta, eta_new, xs, gX, g, d, n_threads, skip, yc, &fused_rows<Loss>);
}

// Zero slopes and the intercept at the loss's link of the weighted mean of y
// (samples other than `skip`).
template <class Loss>
Vec initial_beta(const Problem& pb, Index skip = -1) {
  Vec beta = Vec::Zero(pb.p1());
  if (pb.intercept) {
    double sy = 0.0, sw = 0.0;
    for (Index i = 0; i < pb.n(); ++i) {
      if (i == skip) continue;
      sy += pb.weight(i) * pb.y[i];
      sw += pb.weight(i);
    }
    beta[0] = Loss::init_intercept(sy / sw, pb.lp) - pb.offset_mean();
  }
  return beta;
}

// max_i |x~_i^T step| through xs (n): one O(n p) pass (the probe of a fused end's guard).
inline double eta_move(const Problem& pb, const Vec& step, Vec& xs, int n_threads) {
  xs.resize(pb.n());
  linear_predictor(pb.X, step.data(), pb.intercept, xs.data(), n_threads);
  return xs.size() ? xs.cwiseAbs().maxCoeff() : 0.0;
}

// A loss as the smooth fits below see it: its O(n) passes, its rows of the fused step,
// its starting point and whether its curvature is constant. The fit layer (GlmCore and
// the drives of newton_fit, path_fit, prepare_at, newton_step, settle_deferred_end,
// fresh_factor) takes the loss through these and is compiled once (fit.cpp) instead of
// once per loss: its work is the loss's passes, the passes over X and the factorizations,
// so the indirection (a call per pass) costs nothing measurable, and every value is the
// same (the same instances of the passes, called in the same order).
struct LossOps {
  LossPasses passes;
  FusedRows fused_rows;
  Vec (*initial_beta)(const Problem&, Index);
  bool constant_curvature;
};
template <class Loss>
LossOps loss_ops() {
  return LossOps{loss_passes<Loss>(), &fused_rows<Loss>, &initial_beta<Loss>,
                 Loss::constant_curvature};
}

// Moves st along the Newton direction `step` (decrement dec): the full step is tried
// in one fused pass (the common case); otherwise Armijo backtracking. On success beta,
// eta, f, the gradient st.grad and the derivatives g, d at the new point are updated
// and the step length is returned; 0 when no decrease was found (st, g, d unchanged).
// eta_try, g_try, d_try (n each) are work space: the full step's point and derivatives.
double newton_move(const LossOps& loss, const Problem& pb, FitState& st, const Vec& step,
                   double dec, double& f, Vec& xs, Vec& eta_try, Vec& g, Vec& d, Vec& g_try,
                   Vec& d_try, int nt, Index skip = -1, YPartCache* yc = nullptr);

// A smooth primal problem (sample `skip` left out) as a model of newton_drive: the
// point, gradient and factor live in st (the factor of H = X~^T D X~ + P, kept
// unpenalized in st.hx when keep_hx); g, d are w l', w l'' at the point; moves are the
// fused full step with the shared Armijo fallback (newton_move). st.eta must hold
// X~ beta + offset; the gradient is computed unless `have_grad` (then st.grad is used).
// Its members are compiled once (fit.cpp); GlmModel<Loss> is the model of one loss.
class GlmCore {
 public:
  GlmCore(const LossOps& loss, const Problem& pb, FitState& st, int n_threads, Index skip = -1,
          bool keep_hx = true, bool have_grad = false);

  double gnorm() const { return st_.grad.cwiseAbs().maxCoeff(); }
  double objective() const { return f_; }
  // H at the point; where it is not positive definite because some d_i < 0, the one with
  // d clipped at 0 (a descent direction; the factor is then marked stale).
  void refactor();
  // Float32 Hessians while max|grad| exceeds `gnorm_above` (unscaled; kSingleGradFactor).
  void use_single(double gnorm_above) { single_above_ = gnorm_above; }
  // Hessians from every `stride`-th row (subsample_stride) while max|grad| exceeds
  // `gnorm_above` (unscaled; kSubsampleGradShare of a cold start's); with `expire`, a
  // sampled factor takes no chord steps once max|grad| is at or below it (factor_expired).
  // With `local_below` >= 0 (a plain fit sampling throughout), a step on a sampled factor
  // at max|grad| <= local_below that contracts it by less than kSubsampleLocalContraction
  // ends the sampling.
  void use_subsample(Index stride, double gnorm_above, bool expire = false,
                     double local_below = -1.0) {
    sub_stride_ = stride;
    sub_above_ = gnorm_above;
    sub_expire_ = expire;
    sub_local_below_ = local_below;
  }
  bool factor_at_point() const {
    return exact_ && !st_.chol.empty() && (loss_.constant_curvature || st_.stale_eta == 0.0);
  }
  bool newton_at_point() const { return factor_at_point(); }
  bool chord_ok() const { return st_.stale_eta < 0.05; }
  // The factor is a sampled one that may serve no more chord steps (use_subsample).
  bool factor_expired() const { return sub_factor_ && sub_expire_ && !(gnorm() > sub_above_); }
  // max_i |change of eta_i| in the last step
  double last_move() const { return last_move_; }
  // Chord steps (a factor not at the point) with the secant correction of the steps
  // since the factor was formed (use_secant).
  double direction(Vec& step);
  // Keep the last `memory` steps' secant pairs to correct chord steps (SecantChord).
  void use_secant(Index memory) { secant_ = SecantChord(memory); }
  double move(const Vec& step, double dec);
  // max_i |x~_i^T step| (one O(n p) pass; settle_end's probe).
  double probe_move(const Vec& step);
  // The point (with its factor and chord state) and the return to it (settle_end, the
  // drive's trial steps): the derivatives and the objective from st.eta again (O(n), no
  // pass over X); the pass counts stay.
  struct Saved {
    FitState st;
    bool exact;
    double f, last_move;
    SecantChord secant;
  };
  Saved save() const { return Saved{st_, exact_, f_, last_move_, secant_}; }
  void restore(Saved&& keep);
  // The factor held in st was set by the caller: the Hessian at the point (true) or not.
  void adopt_factor(bool exact) {
    exact_ = exact;
    secant_.clear();
  }
  // Writes the driver's counts into st.
  void finish(const DriveResult& r, double scale) {
    st_.n_iter += r.n_iter;
    st_.hessian_passes += r.hessian_passes;
    st_.objective = f_;
    st_.grad_norm = gnorm() / scale;
    st_.converged = r.converged;
  }

 private:
  LossOps loss_;
  const Problem& pb_;
  FitState& st_;
  int nt_;
  Index skip_;
  bool keep_hx_;
  bool exact_ = false;
  bool single_factor_ = false;
  double single_above_ = std::numeric_limits<double>::infinity();
  Index sub_stride_ = 1;
  double sub_above_ = std::numeric_limits<double>::infinity();
  bool sub_factor_ = false;
  bool sub_expire_ = false;
  double sub_local_below_ = -1.0;
  double f_ = 0.0;
  double last_move_ = std::numeric_limits<double>::infinity();
  Vec g_, d_, xs_, eta_try_, g_try_, d_try_, H_;
  SecantChord secant_;
  YPartCache ypart_;
};

template <class Loss>
class GlmModel : public GlmCore {
 public:
  GlmModel(const Problem& pb, FitState& st, int n_threads, Index skip = -1, bool keep_hx = true,
           bool have_grad = false)
      : GlmCore(loss_ops<Loss>(), pb, st, n_threads, skip, keep_hx, have_grad) {}
};

// The most chord steps after the target is reached (RefreshPolicy::polish), and the largest
// Newton step (max_i |change of eta_i|) that a fused end leaves untaken (settle_fused_end):
// d_i = w_i l''(eta_i) moves by about that much relative, and so do the leverages,
// amplified by 1 / (1 - d_i h_i).
constexpr Index kPolishSteps = 6;
constexpr double kFusedEndEta = 1e-12;
// Chord steps of a fresh-end drive carry the secant correction of the pairs of the last
// kSecantMemory steps since their factor (SecantChord): they then contract faster as they
// go (the correction learns how D changed along the steps), and an ALO fit can leave the
// fresh Newton steps one Hessian earlier. Measured on 24 logistic problems (4 designs,
// p = 100 and 300, three lambdas): 5-22% less work than plain chord steps, no guard
// fallback; loo's fit at n=1e5, p=200 takes 4 Hessian passes instead of 5.
constexpr Index kSecantMemory = 5;
// The most chord steps that a drive predicts to tol after a fresh Newton step for it to go
// on with them (RefreshPolicy::rechord_max_steps), and the most further steps at the last
// chord step's rate before a refresh (chord_max_steps). The prediction takes each step to
// contract at twice the fresh step's rate, while the secant-corrected steps contract faster
// than that (superlinearly as their pairs accumulate). Measured (logistic, one thread,
// n=1e5, p=200, three lambdas, iso / AR(1) / unequal scales): a plain fit takes 2 Hessian
// passes and 4-7 chord steps instead of 5 Hessians (0.37-0.43 s instead of 0.67-0.75 s), and
// ALO's fit (predicting to tol) the plain fit's 2 plus the end's one instead of 4-5. A bound
// scaled to the cost of a Hessian pass (4 or 8 steps where rows are narrow) took as long
// within the timing noise at p = 20, 50 and on sparse one-hot rows (width 5), where a chord
// step costs about as much as a Hessian pass, and 15-40% longer at p = 600 (n = 2e4).
constexpr Index kChordSteps = 20;

// The drive of a smooth fit with options opt: to tol, or, with opt.fresh_end (the LOO
// formulas need the Hessian at beta), 100x below tol and a fresh factor at the end (chord
// steps on the last factor near the optimum either way; fit_policy).
inline DriveOptions drive_options(const FitOptions& opt, double scale, bool fresh_end) {
  DriveOptions o;
  o.tol = opt.tol;
  o.target = fresh_end ? 0.01 * opt.tol : opt.tol;
  o.scale = scale;
  o.max_iter = std::max<Index>(1, opt.max_iter);
  o.factor_end = fresh_end;
  return o;
}
// The chord policy of every smooth drive of a loss whose curvature changes: a fresh
// Hessian far from the optimum; after a full step on it, secant-corrected chord steps on
// its factor whenever at most kChordSteps of them are predicted to reach tol, refreshed
// when a step cuts max|grad| by less than chord_ratio or more than kChordSteps further
// steps are predicted. A plain fit stops at tol (a Newton step on a fresh Hessian where
// the gradient is within a few decades of tol buys nothing that O(n p) steps do not); a
// fresh-end drive (factor_end) takes the same decisions up to tol (rechord_max_steps), goes on
// with chord steps to its target and polishes to the rounding level, so that the one
// Hessian of its end is at the returned point (issue 13: ALO including its fit = the plain
// fit + chord steps + one Hessian pass + one leverage pass).
inline RefreshPolicy chord_policy() {
  RefreshPolicy pol;
  pol.chord_ratio = 0.3;  // refresh when a chord step cuts max|grad| by less
  pol.rechord = true;
  pol.rechord_max_steps = kChordSteps;
  pol.chord_max_steps = kChordSteps;
  pol.polish = kPolishSteps;  // with factor_end only
  pol.polish_move = 0.1 * kFusedEndEta;
  return pol;
}

// The policy of a tuning path (FitOptions::secant): its first chord steps, on the factor of
// a point several-fold away in lambda, may contract slowly without calling for a fresh
// Hessian: it goes on while each step cuts max|grad| to kSecantChordRatio of the last, and
// unless more than kChordSteps further steps are predicted at the last step's rate.
// Measured on ALOLogisticRegressionCV's 8-decade grid (n=50000, p=200, logistic): 11
// Hessian passes for 10 candidates instead of 16-17, about as many O(n p) passes.
constexpr double kSecantChordRatio = 0.6;
inline RefreshPolicy smooth_policy(const FitOptions& opt) {
  RefreshPolicy pol = chord_policy();
  if (opt.secant) pol.chord_ratio = kSecantChordRatio;
  return pol;
}
// The policy of a fit (newton_fit and the dask sums_fit from a start): the chord policy
// (the tuning path's with opt.secant), or a fresh Hessian every step for a constant
// curvature (one exact Newton step).
inline RefreshPolicy fit_policy(const FitOptions& opt, bool constant_curvature) {
  return constant_curvature ? RefreshPolicy{} : smooth_policy(opt);
}
// The policy of a path point (path_fit and the dask sums_fit from a previous point's
// Hessian): chord steps from the start on that factor with the new penalty; slow chord
// steps already below tol end the run.
inline RefreshPolicy path_policy(const FitOptions& opt) {
  RefreshPolicy pol = smooth_policy(opt);
  pol.start_factored = true;
  pol.accept_slow = true;
  return pol;
}

// The guard of a fused end (settle_end in newton_driver.hpp) with its counters. With
// `defer` (FitOptions::defer_end_guard) only the step to probe is kept in st.end_guard:
// settle_deferred_end finishes the guard once a pass over X has measured its move.
void settle_fused_end(FitState& st, GlmCore& m, const DriveResult& r, bool defer = false,
                      double tol = 0.0);

// A fresh_end fit whose factor was clipped (the Hessian at beta is not positive definite):
// the real one at beta, or the error that says so.
void exact_end_factor(const LossOps& loss, const Problem& pb, FitState& st, int nt);

// The fits below, for the loss `loss` (compiled once, fit.cpp).
FitState prepare_at(const LossOps& loss, const Problem& pb, const Vec& beta, const FitOptions& opt);
FitState newton_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt,
                    const Vec* beta0);
bool settle_deferred_end(const LossOps& loss, const Problem& pb, FitState& st, int n_threads,
                         double moved);
double newton_step(const LossOps& loss, const Problem& pb, FitState& st, bool refresh,
                   int n_threads);
FitState path_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt,
                  const FitState& prev);
// The largest move of an eta_i since the factor for which fresh_factor keeps it.
constexpr double kFreshFactorEta = 1e-7;
void fresh_factor(const LossOps& loss, const Problem& pb, FitState& st, int n_threads,
                  double threshold = kFreshFactorEta);

}  // namespace detail

// Everything the LOO formulas need at a given beta (no optimization): eta, gradient,
// and the factor of the Hessian at beta ("bring your own fit").
template <class Loss>
FitState prepare_at(const Problem& pb, const Vec& beta, const FitOptions& opt) {
  return detail::prepare_at(detail::loss_ops<Loss>(), pb, beta, opt);
}

// Damped Newton from beta0 (nullptr: zero slopes, intercept at the loss's link of
// the weighted mean of y). Stops when max|grad| / sum(w) <= tol.
template <class Loss>
FitState newton_fit(const Problem& pb, const FitOptions& opt, const Vec* beta0) {
  return detail::newton_fit(detail::loss_ops<Loss>(), pb, opt, beta0);
}

// Finishes a fused end's guard that newton_fit deferred (FitOptions::defer_end_guard):
// `moved` = max_i |x~_i^T st.end_guard.step|, measured by the caller's own pass over X
// (negative: measured here, one O(n p) pass). Within kFusedEndEta the point and its
// factor stand; otherwise the fallback of settle_end (newton_driver.hpp): the step and a
// fresh Hessian at the new point, or back to the point when the step does not halve
// max|grad|. True when the point and its factor changed (leverages computed with the old
// factor are then stale). No-op when no guard is pending.
template <class Loss>
bool settle_deferred_end(const Problem& pb, FitState& st, int n_threads, double moved = -1.0) {
  return detail::settle_deferred_end(detail::loss_ops<Loss>(), pb, st, n_threads, moved);
}

// One damped Newton step from st with the factor already in st (a chord step: the
// Hessian may be stale, e.g. from an earlier penalty along a tuning run), or with a
// fresh Hessian when `refresh`. Updates beta, eta, grad and (if refreshed) the factor.
// Returns the step length taken (0: no decrease found).
template <class Loss>
double newton_step(const Problem& pb, FitState& st, bool refresh, int n_threads) {
  return detail::newton_step(detail::loss_ops<Loss>(), pb, st, refresh, n_threads);
}

// A fit along a lambda path: from the previous point's state `prev` (same data, new
// penalty in pb), Newton steps use prev's unpenalized Hessian plus the new penalty
// (no pass over X for the Hessian: chord steps, O(n p) each) while they contract
// fast; then one fresh Hessian at the solution serves the leave-one-out formulas.
// The first step is the predictor beta_prev + (dbeta/dlambda) dlambda: with
// grad(beta, lambda) = X~^T g + P(lambda) beta, the gradient at beta_prev under the new
// penalty is prev.grad + (P_new - P_prev) beta_prev (no pass over X), and
// dbeta = -H^{-1} (P_new - P_prev) beta_prev (plus prev's own small residual) with the
// held factor of H = prev's X~^T D X~ + P_new (the implicit, secant form of the
// tangent: exact for a quadratic loss, where the penalty enters H linearly).
// When the chord steps slow down above tol, the drive goes on as newton_fit's (fresh
// Hessians, chord steps near the optimum). About one Hessian pass per path point
// instead of one per Newton iteration. With opt.secant the chord steps carry the secant
// correction of the steps taken since the factor (SecantChord, smooth_policy): a grid
// step of several-fold in lambda then converges on the previous point's factor too.
template <class Loss>
FitState path_fit(const Problem& pb, const FitOptions& opt, const FitState& prev) {
  return detail::path_fit(detail::loss_ops<Loss>(), pb, opt, prev);
}

// The LOO formulas need the Hessian at beta itself. A fit ends with the factor of the
// Hessian one (small) Newton step earlier; when that step moved some eta_i by more than
// `threshold`, recompute the Hessian at beta (one pass); active-set states always.
template <class Loss>
void fresh_factor(const Problem& pb, FitState& st, int n_threads,
                  double threshold = detail::kFreshFactorEta) {
  detail::fresh_factor(detail::loss_ops<Loss>(), pb, st, n_threads, threshold);
}

// Non-template entry points (instantiated for every registered loss in fit.cpp).
FitState fit(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec* beta0);
// The fit for callers that keep only its coefficients: as fit, but an elastic net's
// active-set Hessian is neither formed nor factored (|A|^3 / 3 flops at the end of a wide
// fit that nothing reads).
FitState fit_coefficients(const Problem& pb, LossKind loss, const FitOptions& opt,
                          const Vec* beta0);
FitState prepare(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec& beta);
double step(const Problem& pb, LossKind loss, FitState& st, bool refresh, int n_threads);
// Settles a fused end's guard that the fit deferred (settle_deferred_end, one O(n p) pass
// for its probe); true when the point and its factor changed. No-op when none is pending.
bool settle_end_guard(const Problem& pb, LossKind loss, FitState& st, int n_threads);
FitState fit_from(const Problem& pb, LossKind loss, const FitOptions& opt, const FitState& prev);

// The loss's part of the Newton fit layer (its fused step's rows and O(n) passes, which the
// LOO, dual, chunk and matrix-free routes share, and LossOps' other entries) is compiled
// once, in fit.cpp, for every registered loss, and the layer itself once (LossOps): the
// other translation units that call it (LOO, k-fold, tuning, the bindings) link to those
// instances instead of compiling their own copies (explicit instantiation declarations).
#define ALOOCV_NEWTON_INSTANCES(EXTERN, T)                                                         \
  EXTERN template double detail::fused_rows<T>(const Problem&, Index, Index, const double*,        \
                                               const double*, double*, double*, double*, Index,    \
                                               YPartCache*);                                       \
  EXTERN template Vec detail::initial_beta<T>(const Problem&, Index);                              \
  EXTERN template detail::YPartCache detail::y_part_cache<T>(const Problem&);                      \
  EXTERN template double detail::fused_step<T>(const Problem&, const Vec&, const Vec&, Vec&, Vec&, \
                                               Vec&, double*, double*, int, Index, YPartCache*);   \
  EXTERN template double detail::objective<T>(const Problem&, const double*, const Vec&, int,      \
                                              Index, YPartCache*);                                 \
  EXTERN template void detail::derivatives<T>(const Problem&, const double*, double*, double*,     \
                                              int, Index);                                         \
  EXTERN template double detail::derivatives_objective<T>(                                         \
      const Problem&, const double*, double*, double*, const Vec&, int, Index, YPartCache*);
#define ALOOCV_NEWTON_EXTERN(T) ALOOCV_NEWTON_INSTANCES(extern, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_NEWTON_EXTERN)
#undef ALOOCV_NEWTON_EXTERN

}  // namespace aloocv
