// The one damped-Newton driver of the core and its one Armijo line search. Every smooth
// fit (primal GLM fits, path points, single tuning steps, exact leave-one-out refits, the
// dual route, the multinomial loss) is a "model" run by newton_drive; only the model
// knows its coordinates, its Hessian and how to evaluate a point. See docs/math/newton.md.
//
// A model M provides (checked at compile time by is_newton_model):
//   double gnorm() const            max_j |gradient_j| at the current point (unscaled)
//   double objective() const        the objective at the current point
//   void refactor()                 build and factor the Hessian at the current point
//   bool factor_at_point() const    the held factor is the Hessian at the current point
//   bool newton_at_point() const    direction() solves with the Hessian at the current
//                                   point (a factor at the point, or an iterative solve
//                                   with Hessian-vector products there)
//   bool chord_ok() const           the held factor may serve further (chord) steps
//   double direction(Vec& step)     step = -H^{-1} grad with the held factor; returns
//                                   the decrement -grad^T step
//   double move(const Vec& step, double dec)   moves along step with the shared Armijo
//                                   test (armijo below; a fused full step first where the
//                                   model has one); returns the step length, 0 when no
//                                   decrease was found (the point is then unchanged)
// The driver owns the iteration: when to take a fresh Hessian (RefreshPolicy), the
// stopping test (max|grad| / scale <= target), stall detection at the rounding floor,
// interrupt checks, and the final factor at the returned point (DriveOptions::factor_end;
// the place where a Hessian accumulated in the confirming pass would plug in).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.hpp"

namespace aloocv {

namespace detail {

// A predicted decrease below kTinyDecrease * max(1, |f|) is at the rounding level of the
// objective: such steps are taken without a line-search test.
constexpr double kTinyDecrease = 1e-13;
// Iterations at that rounding level without halving the gradient norm after which a
// solver stops (the tolerance is below what rounding allows on this problem): bounded
// work for every tolerance; `converged` then reports whether tol was reached.
constexpr int kStallIters = 3;
// Armijo's sufficient-decrease constant and the most halvings of a step.
constexpr double kArmijo = 1e-4;
constexpr int kMaxHalvings = 60;

inline bool tiny_decrease(double dec, double f) {
  return 0.5 * dec <= kTinyDecrease * std::max(1.0, std::abs(f));
}

// Armijo's test of the objective f_try at step length t from f along a step of predicted
// decrease dec (tiny: tiny_decrease(dec, f), where any finite f_try passes). The one test
// of every line search (armijo below; the lockstep refits of refit_batch.hpp).
inline bool armijo_accepts(double f_try, double f, double t, double dec, bool tiny) {
  return std::isfinite(f_try) && (tiny || f_try <= f - kArmijo * t * dec);
}

// Counts iterations that are stuck at the rounding floor (see kStallIters).
struct StallDetector {
  double best = std::numeric_limits<double>::infinity();
  int stalled = 0;
  // dec: predicted decrease of the step just taken, f: objective, gnorm: new gradient norm.
  // True when the solver should stop.
  bool update(double dec, double f, double gnorm) {
    const bool floor = tiny_decrease(dec, f);
    if (floor && !(gnorm < 0.5 * best)) {
      ++stalled;
    } else {
      stalled = 0;
    }
    best = std::min(best, gnorm);
    return stalled >= kStallIters;
  }
};

// The Armijo backtracking of every Newton route: t = 1, 1/2, 1/4, ... until
// f(t) = trial(t) is finite and f(t) <= f - kArmijo t dec (any finite f(t) when the
// predicted decrease is at the rounding level). trial(t) evaluates the objective at the
// trial point (and keeps what the caller needs of it). Returns t, or 0 when no step
// decreased the objective.
template <class Trial>
double armijo(double f, double dec, Trial&& trial) {
  const bool tiny = tiny_decrease(dec, f);
  double t = 1.0;
  for (int ls = 0; ls < kMaxHalvings; ++ls, t *= 0.5) {
    interrupt::check();
    const double f_try = trial(t);
    if (armijo_accepts(f_try, f, t, dec, tiny)) return t;
  }
  return 0.0;
}

}  // namespace detail

// Compile-time check (detection idiom) that a model provides what newton_drive needs.
template <class M, class = void>
struct is_newton_model : std::false_type {};
template <class M>
struct is_newton_model<
    M, std::void_t<
           std::enable_if_t<std::is_same_v<decltype(std::declval<const M&>().gnorm()), double>>,
           std::enable_if_t<std::is_same_v<decltype(std::declval<const M&>().objective()), double>>,
           std::enable_if_t<std::is_same_v<decltype(std::declval<M&>().refactor()), void>>,
           std::enable_if_t<
               std::is_same_v<decltype(std::declval<const M&>().factor_at_point()), bool>>,
           std::enable_if_t<
               std::is_same_v<decltype(std::declval<const M&>().newton_at_point()), bool>>,
           std::enable_if_t<std::is_same_v<decltype(std::declval<const M&>().chord_ok()), bool>>,
           std::enable_if_t<std::is_same_v<
               decltype(std::declval<M&>().direction(std::declval<Vec&>())), double>>,
           std::enable_if_t<std::is_same_v<
               decltype(std::declval<M&>().move(std::declval<const Vec&>(), 0.0)), double>>>>
    : std::true_type {};

// Optional part of a model: last_move() is max_i |change of eta_i| in the last step
// (models without it are not polished).
template <class M, class = void>
struct has_last_move : std::false_type {};
template <class M>
struct has_last_move<M, std::void_t<std::enable_if_t<std::is_same_v<
                            decltype(std::declval<const M&>().last_move()), double>>>>
    : std::true_type {};

// Optional part of a model: factor_expired() is true where the factor it holds may serve
// no more chord steps (the next step refactors; a sampled Hessian's factor once the
// gradient is below the sampled range, newton.hpp).
template <class M, class = void>
struct has_factor_expired : std::false_type {};
template <class M>
struct has_factor_expired<M, std::void_t<std::enable_if_t<std::is_same_v<
                                 decltype(std::declval<const M&>().factor_expired()), bool>>>>
    : std::true_type {};

// Optional part of a model: save() returns the point with its factor and chord state, and
// restore(saved) returns to it (the trial of a step at the rounding level; settle_end).
template <class M, class = void>
struct has_save : std::false_type {};
template <class M>
struct has_save<M,
                std::void_t<decltype(std::declval<M&>().restore(std::declval<const M&>().save()))>>
    : std::true_type {};

// The quasi-Newton (limited-memory BFGS) correction of chord steps: the held factor of
// another point's Hessian is the initial Hessian, and the pairs (s, y) = (change of beta,
// change of the gradient) of the steps taken since it was formed update it (the
// two-loop recursion, O(memory p) per step, no pass over X). A chord step on the bare
// factor contracts the gradient linearly at the factor's error; with the pairs, the
// steps learn the Hessian's change along the directions they took (superlinear in the
// limit). Along a lambda path the first candidates, where each grid step changes
// lambda several-fold and D with it, then converge on the previous candidate's factor
// instead of taking fresh Hessians. Every pair of a strictly convex objective has
// y^T s > 0, so the correction stays positive definite and its steps descent directions;
// pairs without that curvature (rounding) are skipped.
class SecantChord {
 public:
  explicit SecantChord(Index memory = 0) : memory_(memory) {}
  bool on() const { return memory_ > 0; }
  Index size() const { return static_cast<Index>(s_.size()); }
  void clear() {
    s_.clear();
    y_.clear();
    rho_.clear();
  }
  // Stores the pair of a step taken (oldest dropped beyond the memory).
  void add(Vec s, Vec y) {
    if (!on()) return;
    const double sy = s.dot(y);
    if (!(sy > kMinCurvature * s.norm() * y.norm())) return;
    if (size() == memory_) {
      s_.erase(s_.begin());
      y_.erase(y_.begin());
      rho_.erase(rho_.begin());
    }
    s_.push_back(std::move(s));
    y_.push_back(std::move(y));
    rho_.push_back(1.0 / sy);
  }
  // q <- B^{-1} q, B the initial Hessian (applied by solve(q): q <- H0^{-1} q) updated
  // with the stored pairs.
  template <class Solve>
  void apply(Vec& q, Solve&& solve) const {
    const Index k = size();
    std::vector<double> alpha(static_cast<size_t>(k));
    for (Index i = k - 1; i >= 0; --i) {
      const size_t u = static_cast<size_t>(i);
      alpha[u] = rho_[u] * s_[u].dot(q);
      q -= alpha[u] * y_[u];
    }
    solve(q);
    for (Index i = 0; i < k; ++i) {
      const size_t u = static_cast<size_t>(i);
      const double b = rho_[u] * y_[u].dot(q);
      q += (alpha[u] - b) * s_[u];
    }
  }

 private:
  // y^T s below this times |s| |y|: no usable curvature (rounding level), pair skipped.
  static constexpr double kMinCurvature = 1e-10;
  Index memory_;
  std::vector<Vec> s_, y_;
  std::vector<double> rho_;
};

// When the driver takes a fresh Hessian. Chord steps reuse the held factor (O(n p) each
// instead of a Hessian pass) while they contract the gradient fast.
struct RefreshPolicy {
  // A chord phase goes on while each step cuts max|grad| to at most chord_ratio times the
  // previous value; 0: a fresh Hessian for every step.
  double chord_ratio = 0.0;
  // Start with chord steps on the factor the model holds (a previous path point's
  // Hessian with the new penalty, the downdated full-data factor of a refit).
  bool start_factored = false;
  // After a full-length step on a fresh Hessian, go on with chord steps (when the model's
  // chord_ok() agrees) ...
  bool rechord = false;
  // ... only when that step also contracted the gradient by chord_ratio.
  bool rechord_confirmed = false;
  // > 0: instead of asking chord_ok(), go on with chord steps after a full step on a
  // fresh Hessian when at most this many chord steps are predicted to reach
  // DriveOptions::tol (not the target: a drive converged below tol, a fresh end, then takes
  // a plain fit's decisions up to tol and goes on from there with chord steps, refreshing
  // only where they slow down; its fit is the plain fit's, plus chord steps, plus the end's
  // one Hessian).
  // The prediction takes each chord step to contract max|grad| by 2 gnew / g (the fresh
  // step's own contraction, doubled: a chord factor is one step older); a chord step
  // that fails to contract by chord_ratio refreshes. With factor_end, the last Hessian is
  // then taken at the returned point only, not also one step before it: the fit costs
  // as many Hessian passes as a plain fit, plus a few O(n p) chord steps.
  Index rechord_max_steps = 0;
  // > 0: a chord phase also refreshes when, at the contraction of its last step, more
  // than this many further chord steps are predicted to reach DriveOptions::tol (a fresh
  // Hessian and its quadratic steps then cost less than the slow linear ones).
  Index chord_max_steps = 0;
  // > 0 (with DriveOptions::factor_end, a model with last_move()): a chord phase that
  // reached the target goes on, at most `polish` more steps (O(n p) each), while each
  // step still contracts by chord_ratio and the predicted remaining move of eta,
  // last_move() rho / (1 - rho) with rho = gnew / g, exceeds polish_move: the one Hessian
  // of the end is then taken at a point whose remaining Newton step is at rounding level.
  Index polish = 0;
  double polish_move = 0.0;
  // The most chord steps in a row before a refresh.
  Index max_chord = std::numeric_limits<Index>::max();
  // A chord phase that contracts slowly ends the run when max|grad| / scale <= tol
  // already (instead of a refresh to reach the tighter target).
  bool accept_slow = false;
};

struct DriveOptions {
  double tol = 1e-8;        // on max|grad| / scale
  double target = 1e-8;     // the run stops at max|grad| / scale <= target (<= tol)
  double scale = 1.0;       // sum of the weights
  Index max_iter = 100;     // attempted steps (failed chord steps that trigger a refresh included)
  bool check_first = true;  // test the starting point before the first step
  bool factor_end = false;  // end on a factor at the returned point
  // > 0 (a quadratic objective): after the first step, at most `refine` more steps, each
  // only while the previous one at least halved the gradient; replaces the target test.
  Index refine = 0;
};

struct DriveResult {
  Index n_iter = 0;              // steps taken
  Index hessian_passes = 0;      // refactor() calls
  bool converged = false;        // max|grad| / scale <= tol at the end
  bool stalled = false;          // stopped at the rounding floor or without a decrease
  double grad_norm = 0.0;        // max|grad| / scale at the end
  double last_step = 0.0;        // length of the last step taken (0: none)
  bool end_after_chord = false;  // factor_end refactored after a chord step (fused end)
};

// Whether `steps` chord steps, each contracting max|grad| by rho, take gnew to `target`
// (see RefreshPolicy::rechord_max_steps, chord_max_steps).
inline bool chords_reach(double gnew, double rho, double target, Index steps) {
  if (gnew <= target) return true;
  if (!(rho < 1.0)) return false;
  if (!(rho > 0.0)) return true;
  return std::log(target / gnew) >= double(steps) * std::log(rho);
}

namespace detail {
// t = m.move(step, dec); a `trial` step (newton_drive) after which max|grad| exceeds
// gtol is undone (models with save/restore): true.
template <class Model>
bool move_or_undo(Model& m, const Vec& step, double dec, bool trial, double gtol, double& t) {
  if constexpr (has_save<Model>::value) {
    if (trial) {
      auto keep = m.save();
      t = m.move(step, dec);
      if (t > 0.0 && !(m.gnorm() <= gtol)) {
        m.restore(std::move(keep));
        return true;
      }
      return false;
    }
  }
  t = m.move(step, dec);
  return false;
}

// A model seen by the driver: its operations behind one function pointer each, so that
// the driver is compiled once (fit.cpp), not once per model type (per loss in fit.cpp and
// again in loo.cpp, in the multinomial, dual, sums and matrix-free sources). Each call
// does O(n p) work or more; the indirection costs nothing measurable.
struct DriveModel {
  void* model;
  double (*gnorm)(const void*);
  double (*objective)(const void*);
  void (*refactor)(void*);
  bool (*factor_at_point)(const void*);
  bool (*newton_at_point)(const void*);
  bool (*chord_ok)(const void*);
  double (*direction)(void*, Vec&);
  // move_or_undo: t = move(step, dec), a trial step undone (true)
  bool (*move_or_undo)(void*, const Vec&, double, bool, double, double&);
  double (*last_move)(const void*);     // null: a model without last_move() (not polished)
  bool (*factor_expired)(const void*);  // null: a model without factor_expired()
};
DriveResult drive_model(const DriveModel& m, const DriveOptions& o, const RefreshPolicy& pol);
}  // namespace detail

// Damped Newton on `m` until the stopping test holds (see the file comment).
template <class Model>
DriveResult newton_drive(Model& m, const DriveOptions& o, const RefreshPolicy& pol) {
  static_assert(is_newton_model<Model>::value,
                "a Newton model must provide gnorm, objective, refactor, factor_at_point, "
                "newton_at_point, chord_ok, direction and move (see newton_driver.hpp)");
  detail::DriveModel dm;
  dm.model = &m;
  dm.gnorm = [](const void* p) { return static_cast<const Model*>(p)->gnorm(); };
  dm.objective = [](const void* p) { return static_cast<const Model*>(p)->objective(); };
  dm.refactor = [](void* p) { static_cast<Model*>(p)->refactor(); };
  dm.factor_at_point = [](const void* p) {
    return static_cast<const Model*>(p)->factor_at_point();
  };
  dm.newton_at_point = [](const void* p) {
    return static_cast<const Model*>(p)->newton_at_point();
  };
  dm.chord_ok = [](const void* p) { return static_cast<const Model*>(p)->chord_ok(); };
  dm.direction = [](void* p, Vec& step) { return static_cast<Model*>(p)->direction(step); };
  dm.move_or_undo = [](void* p, const Vec& step, double dec, bool trial, double gtol, double& t) {
    return detail::move_or_undo(*static_cast<Model*>(p), step, dec, trial, gtol, t);
  };
  dm.factor_expired = nullptr;
  if constexpr (has_factor_expired<Model>::value) {
    dm.factor_expired = [](const void* p) {
      return static_cast<const Model*>(p)->factor_expired();
    };
  }
  dm.last_move = nullptr;
  if constexpr (has_last_move<Model>::value) {
    dm.last_move = [](const void* p) { return static_cast<const Model*>(p)->last_move(); };
  }
  return detail::drive_model(dm, o, pol);
}

// The guard of a fused end (DriveOptions::factor_end reached after chord steps, so the
// one Hessian of the end was taken at a point whose last step was a chord step): the
// returned point is kept when the Newton step of that Hessian moves no x~_i^T beta by
// more than max_move (the point is then the fresh-Newton end's to rounding). Otherwise
// (ill-conditioned problems, where a small gradient can still be a large step) the fit
// ends as the unfused drive does: that Newton step, then a fresh Hessian at the returned
// point; a step that does not halve max|grad| (the rounding floor of an ill-conditioned
// problem, where it is noise) is undone. The model provides probe_move(step) (max_i
// |x~_i^T step|, one O(n p) pass), save() and restore(saved). True when the step and the
// fresh Hessian were taken (one more step, one more Hessian pass).
// The guard in two halves, for a caller that measures max_i |x~_i^T step| in a pass of
// its own (the leverage pass of ALO, loo.hpp): end_guard_step gives the step to probe
// (false: no guard applies), take_end_step is the fallback once the probe exceeded
// max_move.
template <class Model>
bool end_guard_step(Model& m, const DriveResult& r, Vec& step, double& dec) {
  if (!r.end_after_chord || !m.factor_at_point()) return false;
  dec = m.direction(step);
  return true;
}
template <class Model>
bool take_end_step(Model& m, const Vec& step, double dec) {
  auto keep = m.save();
  const double g0 = m.gnorm();
  if (m.move(step, dec) > 0.0 && m.gnorm() < 0.5 * g0) {
    m.refactor();
    return true;
  }
  m.restore(std::move(keep));
  return false;
}
template <class Model>
bool settle_end(Model& m, const DriveResult& r, double max_move) {
  Vec step;
  double dec = 0.0;
  if (!end_guard_step(m, r, step, dec) || !(m.probe_move(step) > max_move)) return false;
  return take_end_step(m, step, dec);
}

}  // namespace aloocv
