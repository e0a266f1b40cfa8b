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
// `grad`, L1 weights pb.l1) at beta.
inline double kkt_violation(const Problem& pb, const Vec& beta, const Vec& grad, Vec* viol) {
  double worst = 0.0;
  for (Index j = 0; j < beta.size(); ++j) {
    const double l1 = pb.l1[j];
    double v;
    if (beta[j] > 0.0) {
      v = std::abs(grad[j] + l1);
    } else if (beta[j] < 0.0) {
      v = std::abs(grad[j] - l1);
    } else {
      v = std::max(0.0, std::abs(grad[j]) - l1);
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

// Coordinate descent on  g^T delta + 1/2 delta^T H delta + sum_k l1_k |beta_k + delta_k|
// over the |W| coordinates of H (column-major, |W| x |W|), until no coordinate moves the
// model gradient by more than max(tol, rounding floor), or the work bound. Returns delta.
inline Vec quadratic_cd(const Mat& H, const Vec& g, const Vec& beta, const Vec& l1, double tol,
                        Index max_sweeps = kCdMaxSweeps) {
  const Index m = H.rows();
  Vec delta = Vec::Zero(m), q = Vec::Zero(m);  // q = H delta
  std::vector<Index> act;
  if (m == 0) return delta;
  const double scale = H.diagonal().cwiseProduct(beta).cwiseAbs().maxCoeff() +
                       g.cwiseAbs().maxCoeff() + l1.cwiseAbs().maxCoeff();
  tol = std::max(tol, kCdRoundingFloor * scale);
  Index budget = max_sweeps * m;  // coordinate updates left
  Index sweeps = 0;
  auto update = [&](Index k) {
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
  };
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
  return delta;
}

}  // namespace detail

// Elastic-net fit (pb.l1 non-empty). `skip` leaves one sample out (exact LOO refits).
template <class Loss>
FitState enet_fit(const Problem& pb, const FitOptions& opt, const Vec* beta0, Index skip = -1,
                  bool factor_active = true) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n(), p1 = pb.p1(), off = pb.intercept ? 1 : 0;
  const double sw = pb.weight_sum() - (skip >= 0 ? pb.weight(skip) : 0.0);
  FitState st;
  st.beta = beta0 ? *beta0 : detail::initial_beta<Loss>(pb, skip);
  st.eta.resize(n);
  linear_predictor(pb.X, st.beta.data(), pb.intercept, st.eta.data(), nt);
  pb.add_offset(st.eta.data());
  Vec g(n), d(n), xs(n), eta_try(n), viol(p1), step(p1);
  detail::derivatives<Loss>(pb, st.eta.data(), g.data(), d.data(), nt, skip);
  detail::full_gradient(pb, g.data(), st.beta, st.grad, nt);
  double f = detail::objective<Loss>(pb, st.eta.data(), st.beta, nt, skip);
  if (!std::isfinite(f)) throw InvalidInput("the objective is not finite at the starting point");

  std::vector<Index> W, Wcols;  // working set (indices into beta) and its feature columns
  Mat H;
  bool have_H = false;
  const double inner_tol = 0.1 * opt.tol * sw;
  detail::StallDetector stall;
  double last_dec = 0.0;
  for (Index it = 0;; ++it) {
    interrupt::check();
    const double kkt = detail::kkt_violation(pb, st.beta, st.grad, &viol);
    if (it > 0 && kkt / sw <= opt.tol) {
      st.converged = true;
      break;
    }
    if (it > 0 && stall.update(last_dec, f, kkt)) break;  // tol below the rounding floor
    if (it >= std::max<Index>(1, opt.max_iter)) break;
    // working set: nonzero coefficients, the intercept, and the worst violators
    std::vector<Index> cand;
    std::vector<Index> next;
    for (Index j = 0; j < p1; ++j) {
      if (j < off || st.beta[j] != 0.0) {
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
    const bool same_W = next == W;
    W.swap(next);
    Wcols.clear();
    for (Index j : W)
      if (j >= off) Wcols.push_back(j - off);
    const Index m = static_cast<Index>(W.size());
    if (!(have_H && same_W && Loss::constant_curvature)) {
      H.resize(m, m);
      hessian(pb.X, d.data(), pb.intercept, H.data(), nt, Columns::of(Wcols));
      for (Index k = 0; k < m; ++k) H(k, k) += pb.pen[W[k]];
      have_H = true;
    }
    Vec gW(m), bW(m), lW(m);
    for (Index k = 0; k < m; ++k) {
      gW[k] = st.grad[W[k]];
      bW[k] = st.beta[W[k]];
      lW[k] = pb.l1[W[k]];
    }
    const Vec dW = detail::quadratic_cd(H, gW, bW, lW, inner_tol);
    step.setZero();
    for (Index k = 0; k < m; ++k) step[W[k]] = dW[k];
    // decrease predicted by the model (prox-Newton): grad^T step + l1 change, summed
    // term by term so that tiny steps near the optimum do not cancel to zero
    double dF = 0.0;
    for (Index k = 0; k < m; ++k)
      dF += gW[k] * dW[k] + lW[k] * (std::abs(bW[k] + dW[k]) - std::abs(bW[k]));
    if (!(dF < 0.0)) break;  // no descent left at this precision
    last_dec = -dF;
    linear_predictor(pb.X, step.data(), pb.intercept, xs.data(), nt);
    double f_try = f;
    const double t =
        detail::line_search<Loss>(pb, st.beta, step, st.eta, xs, f, -dF, eta_try, f_try, nt, skip);
    if (t == 0.0) break;
    st.beta += t * step;
    // exact zeros for coordinates the step set to zero (a full step lands on them)
    if (t == 1.0)
      for (Index k = 0; k < m; ++k)
        if (bW[k] + dW[k] == 0.0) st.beta[W[k]] = 0.0;
    st.eta.swap(eta_try);
    f = f_try;
    ++st.n_iter;
    detail::derivatives<Loss>(pb, st.eta.data(), g.data(), d.data(), nt, skip);
    detail::full_gradient(pb, g.data(), st.beta, st.grad, nt);
  }
  st.objective = f;
  st.grad_norm = detail::kkt_violation(pb, st.beta, st.grad, nullptr) / sw;
  st.converged = st.grad_norm <= opt.tol;
  // The active set and the factor of its Hessian, for the LOO formulas.
  st.restricted = true;
  st.active.clear();
  for (Index j = off; j < p1; ++j)
    if (st.beta[j] != 0.0) st.active.push_back(j - off);
  if (!factor_active) return st;
  std::vector<Index> keep;  // positions in W of the intercept and the active columns
  bool subset = have_H;
  if (subset) {
    for (Index j = 0; j < p1; ++j) {
      if (j < off || st.beta[j] != 0.0) {
        auto it = std::lower_bound(W.begin(), W.end(), j);
        if (it == W.end() || *it != j) {
          subset = false;
          break;
        }
        keep.push_back(static_cast<Index>(it - W.begin()));
      }
    }
  }
  const Index q = static_cast<Index>(st.active.size()) + off;
  Mat HA(q, q);
  if (subset) {
    for (Index a = 0; a < q; ++a)
      for (Index b = 0; b < q; ++b) HA(a, b) = H(keep[a], keep[b]);
  } else {
    hessian(pb.X, d.data(), pb.intercept, HA.data(), nt, Columns::of(st.active));
    for (Index a = 0; a < q; ++a) HA(a, a) += pb.pen[a < off ? 0 : st.active[a - off] + off];
  }
  st.chol.factor(HA.data(), q);
  return st;
}

// The active-set state at a given beta ("bring your own fit" with an L1 term).
template <class Loss>
FitState enet_prepare_at(const Problem& pb, const Vec& beta, const FitOptions& opt) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n(), p1 = pb.p1(), off = pb.intercept ? 1 : 0;
  FitState st;
  st.beta = beta;
  st.eta.resize(n);
  linear_predictor(pb.X, beta.data(), pb.intercept, st.eta.data(), nt);
  pb.add_offset(st.eta.data());
  Vec g(n), d(n);
  detail::derivatives<Loss>(pb, st.eta.data(), g.data(), d.data(), nt);
  detail::full_gradient(pb, g.data(), beta, st.grad, nt);
  st.objective = detail::objective<Loss>(pb, st.eta.data(), beta, nt);
  st.grad_norm = detail::kkt_violation(pb, beta, st.grad, nullptr) / pb.weight_sum();
  st.converged = st.grad_norm <= opt.tol;
  st.restricted = true;
  for (Index j = off; j < p1; ++j)
    if (beta[j] != 0.0) st.active.push_back(j - off);
  const Index q = static_cast<Index>(st.active.size()) + off;
  Mat HA(q, q);
  hessian(pb.X, d.data(), pb.intercept, HA.data(), nt, Columns::of(st.active));
  for (Index a = 0; a < q; ++a) HA(a, a) += pb.pen[a < off ? 0 : st.active[a - off] + off];
  st.chol.factor(HA.data(), q);
  return st;
}

}  // namespace aloocv
