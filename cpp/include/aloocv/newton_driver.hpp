// The one damped-Newton driver of the core and its one Armijo line search. Every smooth
// fit (primal GLM fits, path points, single tuning steps, exact leave-one-out refits, the
// dual route, the multinomial loss) is a "model" run by newton_drive; only the model
// knows its coordinates, its Hessian and how to evaluate a point.
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
    if (std::isfinite(f_try) && (tiny || f_try <= f - kArmijo * t * dec)) return t;
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
  Index n_iter = 0;          // steps taken
  Index hessian_passes = 0;  // refactor() calls
  bool converged = false;    // max|grad| / scale <= tol at the end
  bool stalled = false;      // stopped at the rounding floor or without a decrease
  double grad_norm = 0.0;    // max|grad| / scale at the end
  double last_step = 0.0;    // length of the last step taken (0: none)
};

// Damped Newton on `m` until the stopping test holds (see the file comment).
template <class Model>
DriveResult newton_drive(Model& m, const DriveOptions& o, const RefreshPolicy& pol) {
  static_assert(is_newton_model<Model>::value,
                "a Newton model must provide gnorm, objective, refactor, factor_at_point, "
                "newton_at_point, chord_ok, direction and move (see newton_driver.hpp)");
  DriveResult r;
  detail::StallDetector stall;
  bool chord = pol.start_factored && pol.chord_ratio > 0.0;
  Index n_chord = 0;
  double g = m.gnorm();
  double g_best_refine = g;
  Vec step;
  const Index budget = o.max_iter;
  bool done = o.check_first && o.refine == 0 && g / o.scale <= o.target;
  for (Index attempt = 0; !done && attempt < budget; ++attempt) {
    interrupt::check();
    if (!chord && !m.newton_at_point()) {
      m.refactor();
      ++r.hessian_passes;
      n_chord = 0;
    }
    const bool on_fresh = m.newton_at_point();
    const double dec = m.direction(step);
    const double t = m.move(step, dec);
    if (t == 0.0) {
      if (!on_fresh) {  // the reused factor gives no descent: refresh and retry
        chord = false;
        continue;
      }
      r.stalled = true;  // no further decrease possible
      break;
    }
    ++r.n_iter;
    r.last_step = t;
    const double gnew = m.gnorm();
    if (stall.update(dec, m.objective(), gnew)) {  // the rounding floor is above target
      r.stalled = true;
      break;
    }
    if (o.refine > 0) {
      // a quadratic: refine while each step at least halves the gradient
      if (r.n_iter > o.refine || !(gnew < 0.5 * g_best_refine)) break;
      g_best_refine = gnew;
      g = gnew;
      continue;
    }
    if (gnew / o.scale <= o.target) break;
    const bool contracted = gnew <= pol.chord_ratio * g;
    if (chord) {
      ++n_chord;
      if (!contracted || n_chord >= pol.max_chord) {
        chord = false;
        if (pol.accept_slow && gnew / o.scale <= o.tol) break;
      }
    } else if (pol.rechord && pol.chord_ratio > 0.0 && t == 1.0 && m.chord_ok() &&
               (!pol.rechord_confirmed || contracted)) {
      chord = true;
      n_chord = 0;
    }
    g = gnew;
  }
  if (o.factor_end && !m.factor_at_point()) {
    m.refactor();
    ++r.hessian_passes;
  }
  r.grad_norm = m.gnorm() / o.scale;
  r.converged = r.grad_norm <= o.tol;
  return r;
}

}  // namespace aloocv
