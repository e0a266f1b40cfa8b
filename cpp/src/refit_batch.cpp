// Exact leave-one-out refits of a batch in lockstep (refit_batch.hpp): exact_loo's policy
// (loo.hpp) with the evaluations left to the caller.
#include "aloocv/refit_batch.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "aloocv/loo.hpp"

namespace aloocv {

namespace {
void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidInput(what);
}
}  // namespace

RefitBatch::RefitBatch(LossKind loss, const LossParams& lp, bool intercept, const Mat& H,
                       const Mat& X, const Vec& y, const Vec& w, const Vec& offset, const Vec& beta,
                       double f, const Vec& grad, const Vec& pen, double sw, double tol,
                       Index max_iter, const RefreshPolicy* pol)
    : loss_(loss),
      lp_(lp),
      p1_(X.cols() + (intercept ? 1 : 0)),
      tol_(tol),
      budget_(detail::exact_refit_options(tol, 1.0, max_iter).max_iter),
      pol_(pol ? *pol : detail::exact_refit_policy()) {
  const Index m = X.rows(), p = X.cols();
  require(y.size() == m, "y must have one entry per row of X");
  require(w.size() == 0 || w.size() == m, "sample_weight must have one entry per row of X");
  require(offset.size() == 0 || offset.size() == m, "offset must have one entry per row of X");
  require(H.rows() == p1_ && H.cols() == p1_, "H must be p1 x p1 (p1 = p + intercept)");
  require(beta.size() == p1_ && grad.size() == p1_, "beta and grad must have p1 entries");
  require(pen.size() == p, "penalty must have one entry per feature");
  xt_.resize(p1_, m);
  if (intercept) xt_.row(0).setOnes();
  xt_.bottomRows(p) = X.transpose();
  y_ = y;
  w_ = w.size() ? w : Vec::Ones(m);
  off_ = offset.size() ? offset : Vec::Zero(m);
  pen1_ = Vec::Zero(p1_);
  pen1_.tail(p) = pen;
  full_.factor(H.data(), p1_);
  eta0_ = xt_.transpose() * beta + off_;
  r_.resize(static_cast<size_t>(m));
  dispatch_loss(loss_, [&](auto L) {
    using Loss = decltype(L);
    for (Index j = 0; j < m; ++j) {
      Refit& r = r_[static_cast<size_t>(j)];
      const double yj = y_[j], e = eta0_[j], wj = w_[j];
      const Vec xi = xt_.col(j);
      // as exact_loo: the objective and gradient without sample j at the full fit, the
      // downdate of the full factor by it
      r.beta = beta;
      r.f = f - wj * Loss::value(yj, e, lp_);
      r.g = grad - (wj * Loss::d1(yj, e, lp_)) * xi;
      r.d = wj * Loss::d2(yj, e, lp_);
      r.a = xi;
      full_.solve(r.a.data());
      r.den = 1.0 - r.d * xi.dot(r.a);
      r.scale = sw - wj;
      r.singular = wj != 0.0 && detail::downdate_singular(r.den);
      r.active = wj != 0.0 && !r.singular;  // a zero-weight sample does not change the fit
      r.chord = pol_.start_factored && pol_.chord_ratio > 0.0;
      r.gcur = r.g.cwiseAbs().maxCoeff();
    }
  });
  next();
}

bool RefitBatch::set_fresh(Refit& r, const double* hess) {
  Mat Hm = Eigen::Map<const Mat>(hess, p1_, p1_);
  Hm.diagonal() += pen1_;
  try {
    r.fresh.factor(Hm.data(), p1_);
  } catch (const SingularHessian&) {  // exact_loo: a fresh leave-one-out Hessian refused
    r.on_fresh = false;
    return false;
  }
  r.on_fresh = true;
  return true;
}

void RefitBatch::start_search() {
  srch_.clear();
  halvings_ = 0;
  for (Index j : act_) {
    Refit& r = r_[static_cast<size_t>(j)];
    r.fresh_step = r.on_fresh;
    if (r.on_fresh) {  // newton_drive's direction on a fresh factor (GlmModel::direction)
      r.step = -r.g;
      r.fresh.solve(r.step.data());
      r.dec = -r.g.dot(r.step);
    } else {  // LooRefitModel::direction's chord step
      r.dec = detail::downdated_step(full_, r.g, xt_.col(j), r.a, r.d, r.den, r.step);
    }
    r.tiny = detail::tiny_decrease(r.dec, r.f);
    r.t = 1.0;
    r.ok = false;
    if (r.dec > 0.0) srch_.push_back(j);  // GlmModel::move: no descent, no step (t = 0)
  }
}

bool RefitBatch::search_request() {
  if (srch_.empty() || halvings_ >= detail::kMaxHalvings) return false;
  const Index k = static_cast<Index>(srch_.size());
  req_.cols = srch_;
  req_.beta.resize(p1_, k);
  req_.hess.clear();
  for (Index c = 0; c < k; ++c) {
    const Refit& r = r_[static_cast<size_t>(srch_[static_cast<size_t>(c)])];
    req_.beta.col(c) = r.beta + r.t * r.step;
    if (r.fresh_step) req_.hess.push_back(c);  // its Hessian, should the point be taken
  }
  return true;
}

void RefitBatch::update() {
  for (Index j : act_) {
    Refit& r = r_[static_cast<size_t>(j)];
    ++r.attempts;
    if (!r.ok) {
      if (r.fresh_step) {
        r.active = false;  // no decrease on a fresh Hessian: stalled
      } else {
        r.chord = false;  // the downdated full factor gives no descent: refresh and retry
      }
      if (r.attempts >= budget_) r.active = false;
      continue;
    }
    r.beta.swap(r.beta_new);
    r.g.swap(r.g_new);
    r.f = r.f_new;
    r.on_fresh = false;
    const double gnew = r.g.cwiseAbs().maxCoeff(), gprev = r.gcur;
    r.gcur = gnew;
    const bool stalled = r.stall.update(r.dec, r.f, gnew);
    if (stalled || gnew / r.scale <= tol_ || r.attempts >= budget_) {
      r.active = false;
      continue;
    }
    // a fresh step goes on with the Hessian at its point (newton_drive's refactor), taken
    // with the search's evaluation
    if (r.fresh_step && !set_fresh(r, r.hess_new.data())) {
      r.singular = true;
      r.active = false;
      continue;
    }
    if (r.chord) {
      ++r.n_chord;
      const bool contracted = gnew <= pol_.chord_ratio * gprev;
      if (!contracted || r.n_chord >= pol_.max_chord) r.chord = false;
    }
  }
}

void RefitBatch::next() {
  req_.done = false;
  for (;;) {
    if (phase_ == Phase::Search) {
      if (search_request()) return;
      update();
      phase_ = Phase::Fresh;
    }
    act_.clear();
    for (Index j = 0; j < size(); ++j)
      if (r_[static_cast<size_t>(j)].active) act_.push_back(j);
    if (act_.empty()) {
      req_ = RefitRequest();
      req_.done = true;
      return;
    }
    // leaving the chord phase: a fresh Hessian at the refit's point
    std::vector<Index> need;
    for (Index j : act_) {
      const Refit& r = r_[static_cast<size_t>(j)];
      if (!r.chord && !r.on_fresh) need.push_back(j);
    }
    if (!need.empty()) {
      const Index k = static_cast<Index>(need.size());
      req_.cols = need;
      req_.beta.resize(p1_, k);
      req_.hess.resize(static_cast<size_t>(k));
      for (Index c = 0; c < k; ++c) {
        req_.beta.col(c) = r_[static_cast<size_t>(need[static_cast<size_t>(c)])].beta;
        req_.hess[static_cast<size_t>(c)] = c;
      }
      return;  // phase_ Fresh: feed sets the Hessians
    }
    start_search();
    phase_ = Phase::Search;
  }
}

void RefitBatch::feed(const Vec& loss, const Mat& grad, const Vec& hess) {
  require(!req_.done, "the refits have finished: nothing to feed");
  const Index k = static_cast<Index>(req_.cols.size());
  const Index nh = static_cast<Index>(req_.hess.size());
  require(loss.size() == k, "loss must have one entry per requested refit");
  require(grad.rows() == p1_ && grad.cols() == k, "grad must be p1 x (requested refits)");
  require(hess.size() == p1_ * p1_ * nh, "hess must be p1 x p1 x (requested Hessians)");
  const Index pp = p1_ * p1_;
  if (phase_ == Phase::Fresh) {
    for (Index c = 0; c < k; ++c) {
      Refit& r = r_[static_cast<size_t>(req_.cols[static_cast<size_t>(c)])];
      r.n_chord = 0;
      if (!set_fresh(r, hess.data() + c * pp)) {
        r.singular = true;
        r.active = false;
      }
    }
    std::vector<Index> keep;
    for (Index j : act_)
      if (r_[static_cast<size_t>(j)].active) keep.push_back(j);
    act_.swap(keep);
    start_search();
    phase_ = Phase::Search;
  } else {
    std::vector<Index> left;
    size_t h = 0;
    for (Index c = 0; c < k; ++c) {
      const Index j = req_.cols[static_cast<size_t>(c)];
      Refit& r = r_[static_cast<size_t>(j)];
      const bool has_h = h < req_.hess.size() && req_.hess[h] == c;
      const auto b = req_.beta.col(c);
      const double fc = loss[c] + 0.5 * (pen1_.array() * b.array().square()).sum();
      if (detail::armijo_accepts(fc, r.f, r.t, r.dec, r.tiny)) {
        r.ok = true;
        r.beta_new = b;
        r.f_new = fc;
        r.g_new = grad.col(c) + pen1_.cwiseProduct(b);
        if (has_h) {
          r.hess_new = Eigen::Map<const Vec>(hess.data() + static_cast<Index>(h) * pp, pp);
        }
      } else {
        r.t *= 0.5;
        left.push_back(j);
      }
      if (has_h) ++h;
    }
    srch_.swap(left);
    ++halvings_;
  }
  next();
}

RefitBatchResult RefitBatch::results() const {
  const Index m = size();
  RefitBatchResult out;
  out.losses.resize(m);
  out.predictions.resize(m);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  dispatch_loss(loss_, [&](auto L) {
    using Loss = decltype(L);
    for (Index j = 0; j < m; ++j) {
      const Refit& r = r_[static_cast<size_t>(j)];
      if (r.singular) {  // no unique minimizer: no value (exact_loo's mark_singular)
        out.losses[j] = out.predictions[j] = nan;
        ++out.n_not_converged;
        out.singular.push_back(j);
        continue;
      }
      // a zero-weight sample does not change the fit: the full fit's values
      const bool moved = w_[j] != 0.0;
      const double e = moved ? xt_.col(j).dot(r.beta) + off_[j] : eta0_[j];
      out.predictions[j] = e;
      out.losses[j] = Loss::value(y_[j], e, lp_);
      if (moved && !(r.g.cwiseAbs().maxCoeff() / r.scale <= tol_)) ++out.n_not_converged;
    }
  });
  return out;
}

}  // namespace aloocv
