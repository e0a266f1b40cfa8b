// Smooth fits whose data are reached only through sums: a "source" evaluates, at a given
// beta, the summed (weighted, unpenalized) loss, the gradient X~^T (w l') and, on request,
// the unpenalized Hessian X~^T D X~. A map-reduce driver over the row chunks of a
// distributed X (python/aloocv/_dask.py) is such a source: one pass over the chunks per
// evaluation. SumsModel is the newton_drive model of such a problem: it adds the penalty,
// factors, solves and moves with the shared Armijo search, with the bookkeeping of the
// in-memory GlmModel (stale_eta, chord_ok, factor_at_point), so that the one driver takes
// the same iterates, the same number of steps and of Hessians as the in-memory fit with
// the same options. What differs is fusion, which does not change iterates: a trial point
// is evaluated with its Hessian when the next step is expected to need it, and refactor()
// then uses that Hessian instead of a further pass.
#pragma once

#include <limits>
#include <vector>

#include "factor.hpp"
#include "newton_driver.hpp"
#include "problem.hpp"

namespace aloocv {

// What an evaluation of the source is asked for.
struct SumsRequest {
  bool hessian = false;       // also the unpenalized Hessian X~^T D X~ at beta
  bool clip = false;          // ... with d_i clipped at 0 (a descent direction where the
                              // exact one is not positive definite; see factor_hessian)
  const Vec* step = nullptr;  // when given, also max_i |x~_i^T step|
  // When given (the elastic net's working sets, enet.hpp): the Hessian and the gradient
  // on these coordinates of beta only (intercept = 0 when fitted; beta is zero outside
  // them), |cols| x |cols| and |cols|.
  const std::vector<Index>* cols = nullptr;
};

// The sums at one beta.
struct SumsValue {
  double loss = 0.0;      // sum_i w_i l(y_i, eta_i)
  Vec grad;               // (p1) X~^T (w l')
  Vec hess;               // (p1 x p1, column-major) X~^T D X~ when asked; empty otherwise
  double step_max = 0.0;  // max_i |x~_i^T step| when a step was given
};

// The data of a sums problem: one evaluation per call (e.g. one pass over a distributed X).
// Exceptions thrown by eval (the source's own errors, an interruption) end the fit.
class SumsSource {
 public:
  virtual ~SumsSource() = default;
  virtual SumsValue eval(const Vec& beta, const SumsRequest& request) = 0;
};

// The fitted state of a sums problem.
struct SumsFit {
  Vec beta;                       // coefficients (intercept first)
  Vec grad;                       // penalized gradient at beta
  double loss = 0.0;              // the source's sums at beta: sum_i w_i l(y_i, eta_i) ...
  Vec loss_grad;                  // ... and X~^T (w l') (unpenalized; a path's next start)
  Vec hessian;                    // (p1 x p1) penalized Hessian of the held factor
  Vec hx;                         // (p1 x p1) its unpenalized part (X~^T D X~)
  bool hessian_at_point = false;  // the held factor is the Hessian at beta
  double objective = 0.0;         // penalized objective at beta
  Index n_iter = 0;
  Index hessian_passes = 0;  // Hessians factored (refactor calls, as in memory)
  Index n_evals = 0;         // evaluations of the source (passes over the data)
  bool converged = false;
  bool stalled = false;
  double grad_norm = 0.0;  // max |grad| / weight_sum
  double stale_eta = 0.0;  // as FitState::stale_eta
  // A fused end whose guard is deferred (SumsFitOptions::defer_end_guard): the Newton
  // step of the end Hessian and its decrement (empty when none is pending). The caller
  // measures max_i |x~_i^T step| in a pass of its own (the leverage pass) and, above
  // kFusedEndEta, takes the step and the Hessian there (settle_deferred_end in memory).
  Vec end_guard_step;
  double end_guard_dec = 0.0;
};

struct SumsFitOptions {
  FitOptions fit;           // tol, max_iter, fresh_end (n_threads unused)
  double weight_sum = 1.0;  // sum of the weights (the gradient's scale)
  // A previous fit of the same data (another penalty): start with chord steps on its
  // unpenalized Hessian plus the new penalty, as path_fit does in memory.
  const Vec* previous_hx = nullptr;
  // With a fresh end: leave the guard of the fused end to the caller (SumsFit::
  // end_guard_step) instead of probing it with an evaluation of its own.
  bool defer_end_guard = false;
  // With previous_hx: the sums (loss and gradient, no Hessian) at beta0, known to the
  // caller (the previous fit's end, whose gradient the new penalty changes without a
  // pass, as path_fit's predictor): no evaluation for the start.
  const SumsValue* start = nullptr;
};

namespace detail {

// The multinomial loss's gauge term tau/2 (sum_a beta[a stride])^2 on the K intercepts
// (multinomial.hpp); tau = 0: none.
struct SumsGauge {
  Index classes = 0;
  Index stride = 0;
  double tau = 0.0;
};

// The newton_drive model of a sums problem (see the file comment). Mirrors GlmModel
// (newton.hpp) step for step: the same objective, gradient, factor, Armijo search and
// stale_eta bookkeeping, each pass over X replaced by one evaluation of the source.
class SumsModel {
 public:
  // pen: (p1) the L2 weights (0 for the intercept). constant_curvature: the loss's Hessian
  // does not depend on beta. track_stale: measure how far eta moves after each Hessian
  // (chord_ok needs it; without it any move marks the factor stale). target: the driver's
  // stopping value of max|grad| (unscaled), used only to foresee the last step. gauge: the
  // multinomial's gauge term; chord_always: chord steps on any held factor (mn_fit's
  // MnModel) instead of only while eta moved little since it.
  SumsModel(SumsSource& src, const Vec& pen, Vec beta, bool constant_curvature, bool track_stale,
            bool first_hessian, double target, const SumsGauge& gauge = {},
            bool chord_always = false, const SumsValue* start = nullptr)
      : src_(src),
        pen_(pen),
        beta_(std::move(beta)),
        cc_(constant_curvature),
        track_(track_stale),
        target_(target),
        gauge_(gauge),
        chord_always_(chord_always) {
    if (start && !first_hessian) {
      // the sums at beta, known to the caller (a previous fit's end): no evaluation
      if (start->grad.size() != pen_.size()) {
        throw InvalidInput("the start's gradient has " + std::to_string(start->grad.size()) +
                           " entries, expected " + std::to_string(pen_.size()));
      }
      SumsValue v;
      v.loss = start->loss;
      v.grad = start->grad;
      accept(std::move(v), beta_);
    } else {
      SumsRequest rq;
      rq.hessian = first_hessian;
      accept(evaluate(beta_, rq), beta_);
    }
    f_ = loss_ + penalty(beta_);
  }

  // The guesses of move() (which evaluations bring the Hessian along). Measured on
  // logistic and Poisson fits (n = 2e4-1e5, p = 20-300; iso, AR(1), unequal scales, rare
  // positives, strong signal; plain and fresh-end): the end guessed 10x early and the
  // chord-failure guess at 1.2x chord_ratio took 335 evaluations, 127 of them with a
  // Hessian, where guessing the end 100x early and no chord failure took 365 and 139
  // (30 fewer passes, 12 fewer Hessians, the same iterates); 3x early asks for fewer
  // Hessians but misses ends (4 more passes), 1.0x and 0.8x chord_ratio ask for 7 and
  // 13 more Hessians and save no pass.
  static constexpr double kEndGuessSlack = 10.0;
  static constexpr double kChordFailGuess = 1.2;

  double gnorm() const { return grad_.cwiseAbs().maxCoeff(); }
  double objective() const { return f_; }
  void refactor() {
    take_hessian_at_point();
    bool modified = false;
    try {
      factor_penalized();
    } catch (const SingularHessian&) {
      // as factor_hessian: the Hessian with d clipped at 0 (the same one when no d_i < 0,
      // whose factor then fails again and the error stands)
      SumsRequest rq;
      rq.hessian = true;
      rq.clip = true;
      hx_ = evaluate(beta_, rq).hess;
      factor_penalized();
      modified = true;
    }
    stale_eta_ = modified ? std::numeric_limits<double>::infinity() : 0.0;
    exact_ = true;
    secant_.clear();
  }
  bool factor_at_point() const { return exact_ && !chol_.empty() && (cc_ || stale_eta_ == 0.0); }
  bool newton_at_point() const { return factor_at_point(); }
  bool chord_ok() const { return chord_always_ || stale_eta_ < 0.05; }
  double direction(Vec& step) {
    fresh_step_ = factor_at_point();
    step = -grad_;
    if (secant_.size() > 0 && !fresh_step_) {  // a chord step with the secant correction
      secant_.apply(step, [&](Vec& v) { chol_.solve(v.data()); });
    } else {
      chol_.solve(step.data());
    }
    return -grad_.dot(step);
  }
  double move(const Vec& step, double dec) {
    if (!(dec > 0.0)) return 0.0;
    // The Hessian at the new point is asked for with the trial points when the next step
    // will likely refactor (a wrong yes costs the Hessian's sums in an evaluation made
    // anyway, a wrong no a whole evaluation), from the drive's own predictions
    // (set_end_hints) and the contractions seen so far:
    // - after a step on a fresh Hessian, unless a chord phase is predicted to follow (a
    //   few chord steps reach tol at twice the step's contraction, the contraction taken as
    //   the last step's squared), and, with factor_end, when the step is predicted to reach
    //   the target (the quadratic model gnew = kq g0^2 of the last full fresh step): the
    //   run then ends on a Hessian at that point;
    // - on a chord step predicted to fail the chord test: its contraction, taken as twice
    //   the fresh step's after a fresh step and as the last chord step's after a chord step,
    //   above kChordFailGuess times chord_ratio (a refresh then follows);
    // - on a chord step expected to end a run with factor_end (the final factor at the
    //   returned point): at the target, once the polish rule stops (the remaining move of
    //   eta at the polish threshold). Secant-corrected chord steps speed up as they go (a
    //   step may contract 30x more than the last), so the end is guessed kEndGuessSlack
    //   times early.
    // With chord_always (the multinomial) the steps after a fresh Hessian are mostly chord
    // steps and a Hessian costs K (K + 1) / 2 SYRK passes: no Hessian is asked for ahead
    // (a refresh then costs one more pass). A wrong guess never changes an iterate.
    const double g0 = gnorm();
    SumsRequest rq;
    if (!cc_ && !chord_always_) {
      if (fresh_step_) {
        const double r2 = rate_ * rate_;
        rq.hessian =
            !(rechord_max_ > 0 && chords_reach(g0 * r2, 2.0 * r2, rechord_target_, rechord_max_)) ||
            (end_factor_ && kq_ > 0.0 && kq_ * g0 * g0 <= target_);
      } else {
        const bool end =
            end_factor_ && g0 * rate_ <= target_ &&
            (!(polish_move_ > 0.0) || !(rate_ < 1.0) ||
             last_move_ * rate_ * rate_ / (1.0 - rate_) <= kEndGuessSlack * polish_move_);
        const double chord_rate = after_fresh_ ? 2.0 * rate_ : rate_;
        const bool fail =
            rate_known_ && chord_ratio_ > 0.0 && chord_rate > kChordFailGuess * chord_ratio_;
        rq.hessian = end || fail;
      }
    }
    if (hessian_next_) rq.hessian = true;
    rq.step = track_ ? &step : nullptr;
    Vec g_before;
    if (secant_.on()) g_before = grad_;
    Vec b1 = beta_ + step;
    SumsValue v1 = evaluate(b1, rq);
    const double f1 = v1.loss + penalty(b1);
    double t = 1.0;
    if (std::isfinite(f1) && (tiny_decrease(dec, f_) || f1 <= f_ - kArmijo * dec)) {
      accept(std::move(v1), b1);
    } else {
      // Armijo from t = 1 (whose value is known), each further trial one evaluation
      SumsValue vt;
      Vec bt;
      t = armijo(f_, dec, [&](double s) {
        if (s == 1.0) return f1;
        bt = beta_ + s * step;
        vt = evaluate(bt, rq);
        return vt.loss + penalty(bt);
      });
      if (t == 0.0) return 0.0;
      accept(std::move(vt), bt);  // t < 1: the last trial is the accepted one
    }
    if (secant_.on()) secant_.add(t * step, grad_ - g_before);
    if (track_) last_move_ = t * step_max_;
    if (!cc_) stale_eta_ += track_ ? t * step_max_ : std::numeric_limits<double>::infinity();
    rate_ = g0 > 0.0 ? gnorm() / g0 : 1.0;
    rate_known_ = true;
    after_fresh_ = fresh_step_;
    hessian_next_ = false;
    if (fresh_step_ && t == 1.0 && g0 > 0.0) kq_ = gnorm() / (g0 * g0);
    return t;
  }
  // The drive's RefreshPolicy::rechord_max_steps with the value of max|grad| (unscaled)
  // its prediction is to, polish_move (0: none) and DriveOptions::factor_end, used only to
  // foresee which evaluations should bring the Hessian along (see move; a run without
  // factor_end ends without one).
  void set_end_hints(Index rechord_max_steps, double rechord_target, double polish_move,
                     bool factor_end, double chord_ratio) {
    chord_ratio_ = chord_ratio;
    rechord_max_ = rechord_max_steps;
    rechord_target_ = rechord_target;
    polish_move_ = polish_move;
    end_factor_ = factor_end;
  }
  // max_i |change of x~_i^T beta| in the last step (tracked models; GlmModel::last_move).
  double last_move() const { return last_move_; }
  // max_i |x~_i^T step|: one evaluation (settle_end's probe).
  double probe_move(const Vec& step) {
    SumsRequest rq;
    rq.step = &step;
    return evaluate(beta_, rq).step_max;
  }
  // The point with its factor, and the return to it (settle_end); n_evals stays.
  struct Saved {
    Vec beta, grad, raw_grad, hx, H, pending;
    Cholesky chol;
    double loss, f, stale_eta, step_max, rate, last_move, kq;
    bool exact, pending_at_point, fresh_step, rate_known, after_fresh;
    SecantChord secant;
  };
  Saved save() const {
    return Saved{beta_,       grad_,       raw_grad_,    hx_,
                 H_,          pending_,    chol_,        loss_,
                 f_,          stale_eta_,  step_max_,    rate_,
                 last_move_,  kq_,         exact_,       pending_at_point_,
                 fresh_step_, rate_known_, after_fresh_, secant_};
  }
  void restore(Saved&& s) {
    beta_ = std::move(s.beta);
    grad_ = std::move(s.grad);
    raw_grad_ = std::move(s.raw_grad);
    hx_ = std::move(s.hx);
    H_ = std::move(s.H);
    pending_ = std::move(s.pending);
    chol_ = std::move(s.chol);
    loss_ = s.loss;
    f_ = s.f;
    stale_eta_ = s.stale_eta;
    step_max_ = s.step_max;
    rate_ = s.rate;
    last_move_ = s.last_move;
    exact_ = s.exact;
    pending_at_point_ = s.pending_at_point;
    fresh_step_ = s.fresh_step;
    kq_ = s.kq;
    rate_known_ = s.rate_known;
    after_fresh_ = s.after_fresh;
    secant_ = std::move(s.secant);
  }
  // A factor of prev_hx + the penalty, of another point (path_fit's start), or of this
  // point (at_point: prev_hx is the unpenalized Hessian at beta; the deferred guard's
  // settle, where the next trial point also brings its Hessian along).
  void adopt(const Vec& prev_hx, bool at_point = false) {
    hx_ = prev_hx;
    factor_penalized();
    stale_eta_ = cc_ || at_point ? 0.0 : std::numeric_limits<double>::infinity();
    exact_ = true;
    secant_.clear();
    hessian_next_ = at_point;
  }
  // Keep the last `memory` steps' secant pairs to correct chord steps (as GlmModel).
  void use_secant(Index memory) { secant_ = SecantChord(memory); }
  // The factor at the point, refused if singular (no clipping): the LOO formulas need it.
  void exact_factor() {
    take_hessian_at_point();
    factor_penalized();
    stale_eta_ = 0.0;
    exact_ = true;
  }
  double stale_eta() const { return stale_eta_; }
  Index n_evals() const { return n_evals_; }
  SumsFit result(const DriveResult& r, double scale) const {
    SumsFit out;
    out.beta = beta_;
    out.grad = grad_;
    out.loss = loss_;
    out.loss_grad = raw_grad_;
    out.hessian = H_;
    out.hx = hx_;
    out.hessian_at_point = factor_at_point();
    out.objective = f_;
    out.n_iter = r.n_iter;
    out.hessian_passes = r.hessian_passes;
    out.n_evals = n_evals_;
    out.converged = r.converged;
    out.stalled = r.stalled;
    out.grad_norm = gnorm() / scale;
    out.stale_eta = stale_eta_;
    return out;
  }

 private:
  double penalty(const Vec& b) const {
    const double s = gauge_sum(b);
    return 0.5 * pen_.dot(b.cwiseAbs2()) + 0.5 * gauge_.tau * s * s;
  }
  double gauge_sum(const Vec& b) const {
    double s = 0.0;
    for (Index a = 0; a < gauge_.classes; ++a) s += b[a * gauge_.stride];
    return s;
  }

  SumsValue evaluate(const Vec& b, const SumsRequest& rq) {
    interrupt::check();
    ++n_evals_;
    SumsValue v = src_.eval(b, rq);
    const Index p1 = pen_.size();
    if (v.grad.size() != p1) {
      throw InvalidInput("the sums source returned a gradient of " + std::to_string(v.grad.size()) +
                         " entries, expected " + std::to_string(p1));
    }
    if (rq.hessian && v.hess.size() != p1 * p1) {
      throw InvalidInput("the sums source returned no Hessian of " + std::to_string(p1) + " x " +
                         std::to_string(p1) + " where one was asked for");
    }
    return v;
  }

  // Takes v (at b) as the current point: gradient, loss, a Hessian there if any.
  void accept(SumsValue&& v, const Vec& b) {
    beta_ = b;
    loss_ = v.loss;
    raw_grad_ = v.grad;
    grad_ = v.grad + pen_.cwiseProduct(beta_);
    if (gauge_.tau != 0.0) {
      const double gs = gauge_.tau * gauge_sum(beta_);
      for (Index a = 0; a < gauge_.classes; ++a) grad_[a * gauge_.stride] += gs;
    }
    if (!grad_.allFinite()) {
      throw InvalidInput(
          "the gradient is not finite (overflow of the loss at extreme linear predictors); "
          "rescale X or increase the penalty");
    }
    step_max_ = v.step_max;
    pending_at_point_ = v.hess.size() > 0;
    pending_ = std::move(v.hess);
    f_ = loss_ + penalty(beta_);
  }

  // hx_ = the unpenalized Hessian at beta: the one that came with the point's evaluation,
  // or one more evaluation.
  void take_hessian_at_point() {
    if (!pending_at_point_) {
      SumsRequest rq;
      rq.hessian = true;
      pending_ = evaluate(beta_, rq).hess;
    }
    pending_at_point_ = false;
    hx_.swap(pending_);
    pending_.resize(0);
  }

  void factor_penalized() {
    const Index p1 = pen_.size();
    H_ = hx_;
    for (Index j = 0; j < p1; ++j) H_[j * p1 + j] += pen_[j];
    if (gauge_.tau != 0.0) {
      for (Index a = 0; a < gauge_.classes; ++a) {
        for (Index b = 0; b < gauge_.classes; ++b)
          H_[b * gauge_.stride * p1 + a * gauge_.stride] += gauge_.tau;
      }
    }
    chol_.factor(H_.data(), p1);
  }

  SumsSource& src_;
  Vec pen_, beta_, grad_, raw_grad_, hx_, H_, pending_;
  Cholesky chol_;
  bool cc_, track_;
  double target_;
  SumsGauge gauge_;
  bool chord_always_;
  double loss_ = 0.0, f_ = 0.0, stale_eta_ = 0.0, step_max_ = 0.0, rate_ = 1.0;
  double last_move_ = std::numeric_limits<double>::infinity();
  Index rechord_max_ = 0;
  double rechord_target_ = 0.0;
  double polish_move_ = 0.0, chord_ratio_ = 0.0;
  double kq_ = 0.0;  // gnew / g0^2 of the last full step on a fresh Hessian (0: none yet)
  bool end_factor_ = true, rate_known_ = false, after_fresh_ = false, hessian_next_ = false;
  bool exact_ = false, pending_at_point_ = false, fresh_step_ = false;
  Index n_evals_ = 0;
  SecantChord secant_;
};

}  // namespace detail

// Damped Newton on a sums problem with the one driver (newton_drive) and the options of
// the in-memory fit: newton_fit's (chord steps near the optimum, detail::fit_policy; with
// fit.fresh_end converged 100x below tol with a fresh factor at the returned beta), or path_fit's
// when previous_hx is given. lam: (p) the L2 weights of the features; beta0: (p1) the start
// (intercept first when `intercept`).
SumsFit sums_fit(SumsSource& source, LossKind loss, const Vec& lam, bool intercept,
                 const Vec& beta0, const SumsFitOptions& opt);

// Settles a deferred guard (SumsFit::end_guard_step) whose move max_i |x~_i^T step|
// exceeded kFusedEndEta, as settle_deferred_end does in memory: from `fit` (beta and hx,
// the unpenalized Hessian at beta) the step with the shared Armijo search, its trial
// points bringing their Hessian along, kept where it halves max|grad| (the Hessian at the
// new point then factored, the real one where that was clipped: one more iteration and
// one or two more Hessian passes in the counts), else the point stands. Returns the settled fit
// (end_guard_step emptied); `taken` says which. `at_beta`: the sums at fit.beta when the caller has
// them (no evaluation for them).
SumsFit sums_settle_end(SumsSource& source, LossKind loss, const Vec& lam, bool intercept,
                        const SumsFit& fit, double tol, double weight_sum, bool& taken,
                        const SumsValue* at_beta = nullptr);

}  // namespace aloocv
