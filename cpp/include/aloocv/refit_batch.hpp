// Exact leave-one-out refits of a batch of samples run in lockstep, for a driver that
// evaluates the refits' objectives elsewhere (the dask backend: one pass over the chunks
// per lockstep iteration, chunk_refits in chunk.hpp). The policy is exact_loo's
// (loo.hpp): per refit, newton_drive with detail::exact_refit_policy() and
// detail::exact_refit_options(), chord steps on the full factor downdated by the sample
// (detail::downdated_step), then fresh leave-one-out Hessians; one Armijo search per step
// (detail::armijo_accepts, kMaxHalvings halvings), the stall rule (detail::StallDetector),
// singular refits as exact_loo marks them (detail::downdate_singular, a fresh Hessian that
// Cholesky refuses). Only the evaluation is split off: each iteration of the lockstep
// asks (request) for the sums of every refit that moves at its trial coefficients, and
// goes on when they come (feed). Nothing here knows where the data lie.
#pragma once

#include <vector>

#include "factor.hpp"
#include "losses.hpp"
#include "newton_driver.hpp"

namespace aloocv {

// One evaluation the batch needs: refit cols[k] (its position in the batch) at
// beta.col(k); for the refits cols[hess[h]] also the Hessian there. done: none left.
struct RefitRequest {
  bool done = false;
  std::vector<Index> cols;
  Mat beta;
  std::vector<Index> hess;
};

struct RefitBatchResult {
  Vec losses, predictions;      // per sample of the batch; NaN for a singular refit
  Index n_not_converged = 0;    // refits not at tol (the singular ones included)
  std::vector<Index> singular;  // positions in the batch of the singular refits (ascending)
};

class RefitBatch {
 public:
  // The batch's m samples: X (m x p, their rows without the intercept column), y, w, offset
  // (m each; w and offset may be empty: unit weights, no offset). The full fit: H, its
  // penalized Hessian at beta (factored here; SingularHessian when it is not positive
  // definite), the objective f and gradient grad at beta, pen (p, the ridge penalty per
  // feature; the intercept is unpenalized) and sw, the sum of all the weights. tol and
  // max_iter: the fit options of exact_loo. pol: exact_loo's (detail::exact_refit_policy())
  // unless given (a test's tighter chord phase).
  RefitBatch(LossKind loss, const LossParams& lp, bool intercept, const Mat& H, const Mat& X,
             const Vec& y, const Vec& w, const Vec& offset, const Vec& beta, double f,
             const Vec& grad, const Vec& pen, double sw, double tol, Index max_iter,
             const RefreshPolicy* pol = nullptr);

  Index size() const { return static_cast<Index>(r_.size()); }
  Index p1() const { return p1_; }
  // The pending evaluation (done: the batch has finished).
  const RefitRequest& request() const { return req_; }
  // The sums of the pending request without each refit's own sample, unpenalized (the
  // penalty is added here): loss (k), grad (p1 x k) and hess (p1 x p1 x |hess|,
  // column-major). Advances to the next request.
  void feed(const Vec& loss, const Mat& grad, const Vec& hess);
  RefitBatchResult results() const;

 private:
  struct Refit {
    Vec beta, g, a;  // the point, the penalized gradient there, a = H^{-1} x~_j
    double f = 0.0, d = 0.0, den = 1.0, scale = 0.0, gcur = 0.0;
    bool active = false, singular = false, chord = true, on_fresh = false;
    Index n_chord = 0, attempts = 0;
    detail::StallDetector stall;
    Cholesky fresh;  // the penalized leave-one-out Hessian at the point (on_fresh)
    // the search of the current step
    Vec step, beta_new, g_new, hess_new;
    double dec = 0.0, t = 1.0, f_new = 0.0;
    bool tiny = false, ok = false, fresh_step = false;
  };
  enum class Phase { Fresh, Search };

  void next();            // prepares the next request
  void start_search();    // directions of the active refits, then their first trial
  bool search_request();  // the trial points of the refits still searching (false: none)
  void update();          // the refits after their search
  bool set_fresh(Refit& r, const double* hess);  // false: Cholesky refused (singular)

  LossKind loss_;
  LossParams lp_;
  Index p1_;
  Mat xt_;  // (p1 x m) the batch's rows x~_j
  Vec y_, w_, off_, pen1_, eta0_;
  double tol_;
  Index budget_;
  RefreshPolicy pol_;
  Cholesky full_;
  std::vector<Refit> r_;
  std::vector<Index> act_;   // the refits of the current lockstep iteration
  std::vector<Index> srch_;  // those still searching
  int halvings_ = 0;
  Phase phase_ = Phase::Fresh;
  RefitRequest req_;
};

}  // namespace aloocv
