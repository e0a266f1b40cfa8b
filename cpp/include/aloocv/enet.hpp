// Elastic net / lasso fits of GLMs: working-set proximal Newton. Each outer iteration
// builds the Hessian of a working set W of columns (the nonzero coefficients plus the
// worst KKT violators) with the same row-blocked kernel as the smooth fits, solves the
// penalized quadratic model on W by coordinate descent on that Hessian (O(|W|) per
// coordinate update, no pass over X), and takes an Armijo step on the true objective.
// It stops on the minimum-norm subgradient of the full problem, so the optimum is
// exact (to tol) over all p columns.
#pragma once

#include <algorithm>
#include <limits>
#include <numeric>

#include "newton.hpp"
#include "sums_model.hpp"

namespace aloocv {

namespace detail {

inline double soft_threshold(double u, double t) { return u > t ? u - t : (u < -t ? u + t : 0.0); }

// Relative width of a tie |u| = l1 in the coordinate update: a coordinate whose
// thresholded value exceeds its L1 weight by no more than rounding of that weight stays
// at zero. At the top of a default grid (alpha_max, where |x_j^T r| = l1 exactly) such a
// tie otherwise leaves a coefficient of ~1e-17, which makes the feature "active" for
// the leave-one-out formulas (they live on the active set).
constexpr double kL1TieRel = 64 * std::numeric_limits<double>::epsilon();

// max_j of the minimum-norm subgradient of the objective (gradient of the smooth part
// `grad`, L1 weights l1) at beta; per coordinate in viol when given.
inline double kkt_violation(const Vec& l1, const Vec& beta, const Vec& grad, Vec* viol) {
  double worst = 0.0;
  for (Index j = 0; j < beta.size(); ++j) {
    double v;
    if (beta[j] > 0.0) {
      v = std::abs(grad[j] + l1[j]);
    } else if (beta[j] < 0.0) {
      v = std::abs(grad[j] - l1[j]);
    } else {
      v = std::max(0.0, std::abs(grad[j]) - l1[j]);
    }
    if (viol) (*viol)[j] = v;
    worst = std::max(worst, v);
  }
  return worst;
}

// Work bound of one quadratic model solve: at most kCdMaxSweeps * |W| coordinate updates
// (each O(|W|)), counted over the full sweeps and the sweeps of the nonzero coordinates.
// Coordinate descent on a positive definite quadratic converges linearly; when the
// budget runs out the partial solution is still a descent step, and the outer
// iteration's KKT test decides convergence.
constexpr Index kCdMaxSweeps = 1000;
// Rounding floor of the coordinate-descent stopping test, relative to the size of the
// terms of the model gradient: changes below it are rounding noise.
constexpr double kCdRoundingFloor = 16 * std::numeric_limits<double>::epsilon();

// The sweep schedule of both model solves (quadratic_cd, quadratic_cd_naive): full sweeps
// over the m coordinates, then sweeps of the nonzero ones (beta + delta != 0, or no L1
// weight) until they settle, until a full sweep changes no model gradient by more than tol
// or max_sweeps * m updates are spent. update(k) updates coordinate k and returns the
// change of the model gradient at k.
template <class Update>
void cd_sweeps(Index m, const Vec& beta, const Vec& delta, const Vec& l1, double tol,
               Index max_sweeps, Update&& update) {
  std::vector<Index> act;
  Index budget = max_sweeps * m;  // coordinate updates left
  Index sweeps = 0;
  while (budget > 0) {
    interrupt::check();
    double change = 0.0;
    for (Index k = 0; k < m; ++k) change = std::max(change, update(k));
    budget -= m;
    if (change <= tol) break;
    // iterate on the nonzero coordinates until they settle, then sweep all again
    act.clear();
    for (Index k = 0; k < m; ++k)
      if (beta[k] + delta[k] != 0.0 || l1[k] == 0.0) act.push_back(k);
    const Index na = static_cast<Index>(act.size());
    while (budget > 0 && na > 0) {
      double c = 0.0;
      for (Index k : act) c = std::max(c, update(k));
      budget -= na;
      if (c <= tol) break;
      if ((++sweeps & 15) == 0) interrupt::check();
    }
  }
}

// Coordinate descent on  g^T delta + 1/2 delta^T H delta + sum_k l1_k |beta_k + delta_k|
// over the |W| coordinates of H (column-major, |W| x |W|), until no coordinate moves the
// model gradient by more than max(tol, rounding floor), or the work bound. Returns delta.
inline Vec quadratic_cd(const Mat& H, const Vec& g, const Vec& beta, const Vec& l1, double tol,
                        Index max_sweeps = kCdMaxSweeps) {
  const Index m = H.rows();
  Vec delta = Vec::Zero(m), q = Vec::Zero(m);  // q = H delta
  if (m == 0) return delta;
  const double scale = H.diagonal().cwiseProduct(beta).cwiseAbs().maxCoeff() +
                       g.cwiseAbs().maxCoeff() + l1.cwiseAbs().maxCoeff();
  tol = std::max(tol, kCdRoundingFloor * scale);
  cd_sweeps(m, beta, delta, l1, tol, max_sweeps, [&](Index k) {
    const double a = H(k, k);
    if (!(a > 0.0)) return 0.0;
    const double z_old = beta[k] + delta[k];
    const double u = a * z_old - (g[k] + q[k]);
    const double z_new =
        std::abs(u) <= l1[k] * (1.0 + kL1TieRel) ? 0.0 : soft_threshold(u, l1[k]) / a;
    const double step = z_new - z_old;
    if (step != 0.0) {
      delta[k] += step;
      q.noalias() += step * H.col(k);
    }
    return std::abs(step) * a;  // change of the model gradient at k
  });
  return delta;
}

// The same model solve as quadratic_cd without forming H on wide sparse working sets
// ("naive" updates, as glmnet's): H = X~_W^T diag(d) X~_W + diag(pen_W) is applied through
// z = X~_W delta (n), so that a coordinate update costs the non-zeros of its column instead
// of |W|, and no |W| x |W| matrix is allocated. X sparse; W the coordinates of beta
// (intercept = 0 when fitted), sorted. Same stopping test and work bound as quadratic_cd
// (enet_naive.cpp; docs/math/newton.md, "The elastic net's working sets").
Vec quadratic_cd_naive(const Design& X, const double* d, bool intercept,
                       const std::vector<Index>& W, const Vec& pen, const Vec& g, const Vec& beta,
                       const Vec& l1, double tol, Index max_sweeps = kCdMaxSweeps);

// Whether the naive solve is the cheaper one for working set W on sparse X: a sweep costs
// about 2 (nnz(X_W) + n) there against |W|^2 on H (plus H's own pass).
bool prefer_naive_cd(const Design& X, bool intercept, const std::vector<Index>& W);

// The working-set proximal Newton iteration of every elastic-net fit: in memory
// (enet_fit, EnetGlmModel) and over a sums source (enet_sums_fit: a distributed X).
// Each outer iteration takes the working set W (the intercept, the nonzero coefficients
// and the worst KKT violators), the Hessian on W, the coordinate-descent solution of the
// penalized quadratic model on W, and an Armijo step on the true objective. It stops on
// the KKT violation / sum(w) <= tol, at the rounding floor (StallDetector), when the
// model predicts no decrease, or after max_iter steps.
// A model M provides:
//   const Vec& beta() const, const Vec& grad() const   the point, the gradient of the
//                                   smooth part (loss + L2) there
//   double objective() const        loss + L2 + L1 at the point
//   void hessian_on(const std::vector<Index>& W, Mat& H)   the unpenalized Hessian
//                                   X~^T D X~ at the point on the coordinates W of beta
//                                   (intercept = 0 when fitted; W holds every nonzero
//                                   coefficient), |W| x |W|
//   double move(const Vec& step, double dec)   Armijo (detail::armijo) along step;
//                                   the step length, 0 when no decrease was found
// Optional part of an enet_drive model: prefer_naive(W) and naive_cd(W, pen, g, b, l1, tol)
// (quadratic_cd_naive on its X and curvature), for wide sparse working sets.
template <class M, class = void>
struct has_naive_cd : std::false_type {};
template <class M>
struct has_naive_cd<M, std::void_t<decltype(std::declval<M&>().prefer_naive(
                           std::declval<const std::vector<Index>&>()))>> : std::true_type {};

struct EnetDrive {
  Index n_iter = 0;
  double grad_norm = 0.0;  // KKT violation / sum(w) at the end
  bool converged = false;
  std::vector<Index> W;  // the last working set
  Mat H;                 // its penalized Hessian (empty when none was taken)
};

template <class M>
EnetDrive enet_drive(M& m, const Vec& pen, const Vec& l1, Index off, bool constant_curvature,
                     double sw, const FitOptions& opt) {
  const Index p1 = pen.size();
  EnetDrive r;
  Vec viol(p1), step(p1);
  const double inner_tol = 0.1 * opt.tol * sw;
  StallDetector stall;
  double last_dec = 0.0;
  for (Index it = 0;; ++it) {
    interrupt::check();
    const Vec& beta = m.beta();
    const double kkt = kkt_violation(l1, beta, m.grad(), &viol);
    if (it > 0 && kkt / sw <= opt.tol) break;
    if (it > 0 && stall.update(last_dec, m.objective(), kkt)) break;  // tol below rounding
    if (it >= std::max<Index>(1, opt.max_iter)) break;
    // working set: nonzero coefficients, the intercept, and the worst violators
    std::vector<Index> cand;
    std::vector<Index> next;
    for (Index j = 0; j < p1; ++j) {
      if (j < off || beta[j] != 0.0) {
        next.push_back(j);
      } else if (viol[j] > 0.0) {
        cand.push_back(j);
      }
    }
    const Index budget = std::max<Index>(256, static_cast<Index>(next.size()));
    if (static_cast<Index>(cand.size()) > budget) {
      std::nth_element(cand.begin(), cand.begin() + budget, cand.end(),
                       [&](Index a, Index b) { return viol[a] > viol[b]; });
      cand.resize(static_cast<size_t>(budget));
    }
    next.insert(next.end(), cand.begin(), cand.end());
    std::sort(next.begin(), next.end());
    const bool same_W = next == r.W;
    r.W.swap(next);
    const Index w = static_cast<Index>(r.W.size());
    bool naive = false;
    if constexpr (has_naive_cd<M>::value) naive = m.prefer_naive(r.W);
    if (naive) {
      r.H.resize(0, 0);  // none for this working set (enet_active_hessian then takes one)
    } else if (!(r.H.size() > 0 && same_W && constant_curvature)) {
      r.H.resize(w, w);
      m.hessian_on(r.W, r.H);
      for (Index k = 0; k < w; ++k) r.H(k, k) += pen[r.W[k]];
    }
    Vec gW(w), bW(w), lW(w);
    for (Index k = 0; k < w; ++k) {
      gW[k] = m.grad()[r.W[k]];
      bW[k] = beta[r.W[k]];
      lW[k] = l1[r.W[k]];
    }
    Vec dW;
    if constexpr (has_naive_cd<M>::value) {
      dW = naive ? m.naive_cd(r.W, pen, gW, bW, lW, inner_tol)
                 : quadratic_cd(r.H, gW, bW, lW, inner_tol);
    } else {
      dW = quadratic_cd(r.H, gW, bW, lW, inner_tol);
    }
    step.setZero();
    for (Index k = 0; k < w; ++k) step[r.W[k]] = dW[k];
    // decrease predicted by the model (prox-Newton): grad^T step + l1 change, summed
    // term by term so that tiny steps near the optimum do not cancel to zero
    double dF = 0.0;
    for (Index k = 0; k < w; ++k)
      dF += gW[k] * dW[k] + lW[k] * (std::abs(bW[k] + dW[k]) - std::abs(bW[k]));
    if (!(dF < 0.0)) break;  // no descent left at this precision
    last_dec = -dF;
    // (a full step lands exactly on the zeros the model chose: b + 1.0 * d is bW + dW)
    if (m.move(step, -dF) == 0.0) break;
    ++r.n_iter;
  }
  r.grad_norm = kkt_violation(l1, m.beta(), m.grad(), nullptr) / sw;
  r.converged = r.grad_norm <= opt.tol;
  return r;
}

// The active set of beta (feature indices of the nonzero coefficients) and a penalized
// Hessian on it (intercept first), in HA: the last working set's where it covers the
// active set and either the curvature is constant or `at_point` is not required (that
// Hessian is then one step old), else the one at beta (one pass over the active columns,
// m.hessian_on). Returns whether HA is the Hessian at beta.
template <class M>
bool enet_active_hessian(M& m, const EnetDrive& r, const Vec& pen, Index off,
                         bool constant_curvature, bool at_point, Mat& HA,
                         std::vector<Index>& active) {
  const Vec& beta = m.beta();
  const Index p1 = beta.size();
  active.clear();
  std::vector<Index> A;  // coordinates of beta: the intercept and the active columns
  for (Index j = 0; j < p1; ++j) {
    if (j < off || beta[j] != 0.0) A.push_back(j);
    if (j >= off && beta[j] != 0.0) active.push_back(j - off);
  }
  const Index q = static_cast<Index>(A.size());
  std::vector<Index> keep;  // positions of A in the last working set
  bool reuse = (constant_curvature || !at_point) && r.H.size() > 0;
  for (Index j : A) {
    if (!reuse) break;
    auto it = std::lower_bound(r.W.begin(), r.W.end(), j);
    if (it == r.W.end() || *it != j) {
      reuse = false;
    } else {
      keep.push_back(static_cast<Index>(it - r.W.begin()));
    }
  }
  HA.resize(q, q);
  if (reuse) {
    for (Index a = 0; a < q; ++a)
      for (Index b = 0; b < q; ++b) HA(a, b) = r.H(keep[a], keep[b]);
    return constant_curvature;
  }
  m.hessian_on(A, HA);
  for (Index a = 0; a < q; ++a) HA(a, a) += pen[A[a]];
  return true;
}

// The enet_drive model of an in-memory problem (one sample left out with skip >= 0):
// compiled once, the loss through its O(n) passes.
class EnetGlmModel {
 public:
  EnetGlmModel(const LossPasses& loss, const Problem& pb, FitState& st, int n_threads, Index skip)
      : loss_(loss), pb_(pb), st_(st), nt_(n_threads), skip_(skip), ypart_(loss.y_part_cache(pb)) {
    const Index n = pb.n();
    g_.resize(n);
    d_.resize(n);
    xs_.resize(n);
    eta_try_.resize(n);
    st_.eta.resize(n);
    linear_predictor(pb.X, st_.beta.data(), pb.intercept, st_.eta.data(), nt_);
    pb.add_offset(st_.eta.data());
    loss_.derivatives(pb, st_.eta.data(), g_.data(), d_.data(), nt_, skip_);
    full_gradient(pb, g_.data(), st_.beta, st_.grad, nt_);
    f_ = loss_.objective(pb, st_.eta.data(), st_.beta, nt_, skip_, cache_of(ypart_));
  }
  const Vec& beta() const { return st_.beta; }
  const Vec& grad() const { return st_.grad; }
  double objective() const { return f_; }
  void hessian_on(const std::vector<Index>& W, Mat& H) {
    const Index off = pb_.intercept ? 1 : 0;
    std::vector<Index> cols;
    for (Index j : W)
      if (j >= off) cols.push_back(j - off);
    hessian(pb_.X, d_.data(), pb_.intercept, H.data(), nt_, Columns::of(cols));
    ++st_.hessian_passes;
  }
  bool prefer_naive(const std::vector<Index>& W) const {
    return prefer_naive_cd(pb_.X, pb_.intercept, W);
  }
  Vec naive_cd(const std::vector<Index>& W, const Vec& pen, const Vec& g, const Vec& b,
               const Vec& l1, double tol) const {
    return quadratic_cd_naive(pb_.X, d_.data(), pb_.intercept, W, pen, g, b, l1, tol);
  }
  double move(const Vec& step, double dec) {
    linear_predictor(pb_.X, step.data(), pb_.intercept, xs_.data(), nt_);
    double f_try = f_;
    const double t = line_search(loss_, pb_, st_.beta, step, st_.eta, xs_, f_, dec, eta_try_, f_try,
                                 nt_, skip_, cache_of(ypart_));
    st_.matvec_passes += 1;
    if (t == 0.0) return 0.0;
    st_.beta += t * step;
    st_.eta.swap(eta_try_);
    f_ = f_try;
    loss_.derivatives(pb_, st_.eta.data(), g_.data(), d_.data(), nt_, skip_);
    full_gradient(pb_, g_.data(), st_.beta, st_.grad, nt_);
    st_.matvec_passes += 1;
    return t;
  }

 private:
  const LossPasses loss_;
  const Problem& pb_;
  FitState& st_;
  int nt_;
  Index skip_;
  double f_ = 0.0;
  Vec g_, d_, xs_, eta_try_;
  YPartCache ypart_;
};

// The enet_drive model of a problem reached through its sums (SumsSource: one pass over
// a distributed X per evaluation): the objective and gradient of every trial point come
// from one evaluation, the working set's Hessian from one evaluation on its columns.
class EnetSumsModel {
 public:
  EnetSumsModel(SumsSource& src, const Vec& pen, const Vec& l1, Vec beta)
      : src_(src), pen_(pen), l1_(l1), beta_(std::move(beta)) {
    accept(evaluate(beta_, SumsRequest{}), beta_);
  }
  const Vec& beta() const { return beta_; }
  const Vec& grad() const { return grad_; }
  double objective() const { return f_; }
  void hessian_on(const std::vector<Index>& W, Mat& H) {
    SumsRequest rq;
    rq.hessian = true;
    rq.cols = &W;
    const SumsValue v = evaluate(beta_, rq);
    const Index w = static_cast<Index>(W.size());
    if (v.hess.size() != w * w) {
      throw InvalidInput("the sums source returned no Hessian of " + std::to_string(w) + " x " +
                         std::to_string(w) + " on the columns asked for");
    }
    H = Eigen::Map<const Mat>(v.hess.data(), w, w);
    ++hessian_passes_;
  }
  double move(const Vec& step, double dec) {
    SumsValue vt;
    Vec bt;
    const double t = armijo(f_, dec, [&](double s) {
      bt = beta_ + s * step;
      vt = evaluate(bt, SumsRequest{});
      return vt.loss + penalty(bt);
    });
    if (t == 0.0) return 0.0;
    accept(std::move(vt), bt);  // the last trial is the accepted one
    return t;
  }
  Index hessian_passes() const { return hessian_passes_; }
  Index n_evals() const { return n_evals_; }

 private:
  double penalty(const Vec& b) const {
    return 0.5 * pen_.dot(b.cwiseAbs2()) + l1_.dot(b.cwiseAbs());
  }
  SumsValue evaluate(const Vec& b, const SumsRequest& rq) {
    interrupt::check();
    ++n_evals_;
    SumsValue v = src_.eval(b, rq);
    if (!rq.cols && v.grad.size() != b.size()) {
      throw InvalidInput("the sums source returned a gradient of " + std::to_string(v.grad.size()) +
                         " entries, expected " + std::to_string(b.size()));
    }
    return v;
  }
  void accept(SumsValue&& v, const Vec& b) {
    beta_ = b;
    grad_ = v.grad + pen_.cwiseProduct(beta_);
    if (!grad_.allFinite()) {
      throw InvalidInput(
          "the gradient is not finite (overflow of the loss at extreme linear predictors); "
          "rescale X or increase the penalty");
    }
    f_ = v.loss + penalty(beta_);
  }

  SumsSource& src_;
  Vec pen_, l1_, beta_, grad_;
  double f_ = 0.0;
  Index hessian_passes_ = 0, n_evals_ = 0;
};

}  // namespace detail

// Elastic-net fit (pb.l1 non-empty). `skip` leaves one sample out (exact LOO refits).
// With factor_active, the state ends with the factor of an active-set Hessian: the one
// at beta (stale_eta = 0; always with opt.fresh_end, which callers set whose consumers
// skip fresh_factor, e.g. the minibatch gradients of TuneState) or, for a loss of
// varying curvature whose last working set covers the active set, that set's from one
// step earlier (stale_eta = infinity: the LOO formulas take the one at beta,
// fresh_factor); without, with none.
namespace detail {
// enet_fit and enet_prepare_at for the loss `loss` (compiled once, enet.cpp).
FitState enet_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt, const Vec* beta0,
                  Index skip, bool factor_active);
FitState enet_prepare_at(const LossOps& loss, const Problem& pb, const Vec& beta,
                         const FitOptions& opt);
}  // namespace detail

template <class Loss>
FitState enet_fit(const Problem& pb, const FitOptions& opt, const Vec* beta0, Index skip = -1,
                  bool factor_active = true) {
  return detail::enet_fit(detail::loss_ops<Loss>(), pb, opt, beta0, skip, factor_active);
}

// The active-set state at a given beta ("bring your own fit" with an L1 term).
template <class Loss>
FitState enet_prepare_at(const Problem& pb, const Vec& beta, const FitOptions& opt) {
  return detail::enet_prepare_at(detail::loss_ops<Loss>(), pb, beta, opt);
}

// The fitted state of an elastic-net problem reached through its sums.
struct EnetSumsFit {
  Vec beta;                   // coefficients (intercept first)
  Vec grad;                   // gradient of the smooth part (loss + L2) at beta
  Mat hessian;                // penalized Hessian at beta on the intercept + active columns
  std::vector<Index> active;  // feature indices of the nonzero coefficients
  double objective = 0.0;     // loss + L2 + L1 at beta
  Index n_iter = 0;
  Index hessian_passes = 0;  // evaluations with a Hessian (working sets, the active set)
  Index n_evals = 0;         // evaluations of the source (passes over the data)
  bool converged = false;
  double grad_norm = 0.0;  // KKT violation / weight_sum
};

// enet_fit's iteration (enet_drive) on a sums problem: lam, l1 (p) the L2 and L1 weights of
// the features; beta0 (p1) the start; opt: tol and max_iter. Ends with the active set's
// Hessian at beta, as enet_fit with factor_active.
EnetSumsFit enet_sums_fit(SumsSource& source, LossKind loss, const Vec& lam, const Vec& l1,
                          bool intercept, const Vec& beta0, double weight_sum,
                          const FitOptions& opt);

// A loss as the refit routes (exact LOO, exact and approximate k-fold) see it: its value
// and first two derivatives per sample (O(1) calls per sample against the sample's O(p)
// or O(p^2) products) and its fits (LossOps: newton_fit, enet_fit). Those routes
// are compiled once through it instead of once per loss; the values are the same (the
// same functions, called in the same order).
namespace detail {
struct SampleLoss {
  double (*value)(double, double, const LossParams&);
  double (*d1)(double, double, const LossParams&);
  double (*d2)(double, double, const LossParams&);
  LossOps ops;
};
template <class Loss>
SampleLoss sample_loss() {
  return SampleLoss{&Loss::value, &Loss::d1, &Loss::d2, loss_ops<Loss>()};
}
}  // namespace detail

}  // namespace aloocv
