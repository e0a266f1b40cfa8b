#include "aloocv/enet.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

namespace detail {
// The one compiled copy of the Newton driver (newton_driver.hpp).
DriveResult drive_model(const DriveModel& m, const DriveOptions& o, const RefreshPolicy& pol) {
  DriveResult r;
  StallDetector stall;
  bool chord = pol.start_factored && pol.chord_ratio > 0.0;
  Index n_chord = 0, n_polish = 0;
  bool last_chord = false;
  double g = m.gnorm(m.model);
  double g_best_refine = g;
  Vec step;
  const Index budget = o.max_iter;
  bool done = o.check_first && o.refine == 0 && g / o.scale <= o.target;
  for (Index attempt = 0; !done && attempt < budget; ++attempt) {
    interrupt::check();
    if (!chord && !m.newton_at_point(m.model)) {
      m.refactor(m.model);
      ++r.hessian_passes;
      n_chord = 0;
    }
    const bool on_fresh = m.newton_at_point(m.model);
    const double dec = m.direction(m.model, step);
    // A step from a point already within tol whose predicted decrease is at the rounding
    // level (the line search cannot check it) is a trial: where it takes max|grad| back
    // above tol (rounding noise in the step), it is undone and the drive ends there.
    const bool trial = g / o.scale <= o.tol && tiny_decrease(dec, m.objective(m.model));
    double t = 0.0;
    if (m.move_or_undo(m.model, step, dec, trial, o.tol * o.scale, t)) {
      r.stalled = true;
      break;
    }
    last_chord = !on_fresh;
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
    const double gnew = m.gnorm(m.model);
    if (stall.update(dec, m.objective(m.model), gnew)) {  // the rounding floor is above target
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
    const bool contracted = gnew <= pol.chord_ratio * g;
    if (gnew / o.scale <= o.target) {
      // polish: cheap chord steps to the rounding level before the end's one Hessian
      bool more = false;
      if (m.last_move) {
        const double rho = g > 0.0 ? gnew / g : 0.0;
        more = o.factor_end && chord && contracted && n_polish < pol.polish &&
               m.last_move(m.model) * rho / (1.0 - rho) > pol.polish_move;
      }
      if (!more) break;
      ++n_polish;
      g = gnew;
      continue;
    }
    // the value of max|grad| the chord steps are predicted to (rechord_max_steps)
    const double goal = o.tol * o.scale;
    if (chord) {
      ++n_chord;
      const bool slow = pol.chord_max_steps > 0 &&
                        !chords_reach(gnew, g > 0.0 ? gnew / g : 0.0, goal, pol.chord_max_steps);
      if (!contracted || n_chord >= pol.max_chord || slow) {
        chord = false;
        if (pol.accept_slow && gnew / o.scale <= o.tol) break;
      }
    } else if (pol.rechord && pol.chord_ratio > 0.0 && t == 1.0 &&
               (pol.rechord_max_steps > 0 ? chords_reach(gnew, g > 0.0 ? 2.0 * gnew / g : 0.0, goal,
                                                         pol.rechord_max_steps)
                                          : m.chord_ok(m.model)) &&
               (!pol.rechord_confirmed || contracted)) {
      chord = true;
      n_chord = 0;
    }
    g = gnew;
  }
  if (o.factor_end && !m.factor_at_point(m.model)) {
    m.refactor(m.model);
    ++r.hessian_passes;
    r.end_after_chord = last_chord;
  }
  r.grad_norm = m.gnorm(m.model) / o.scale;
  r.converged = r.grad_norm <= o.tol;
  return r;
}

double fused_pass(const Problem& pb, const Vec& step, const Vec& eta, Vec& eta_new, Vec& xs,
                  Vec& gX, double* g, double* d, int n_threads, Index skip, YPartCache* yc,
                  FusedRows rows) {
  const Index n = pb.n(), p = pb.X.p, off = pb.intercept ? 1 : 0, p1 = p + off;
  const int nt = threads_for(n_threads, 4.0 * double(n) * double(p1));
  const Partition part{n, reduction_chunks(n, p1 + 1, nt, 1024)};
  const Index B = std::max<Index>(64, std::min<Index>(4096, Index(32768) / std::max<Index>(1, p)));
  std::vector<double> partial(static_cast<size_t>(part.chunks * (p1 + 1)), 0.0);
  Eigen::Map<const Vec> theta(step.data() + off, p);
  const double b = pb.intercept ? step[0] : 0.0;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        double* acc = partial.data() + c * (p1 + 1);
        Eigen::Map<Vec> acc_theta(acc + off, p);
        for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
          const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
          Eigen::Map<Vec> gb(g + i0, m);
          pb.X.with_rows(i0, i1, [&](const auto& M) {
            Eigen::Map<Vec> x(xs.data() + i0, m);
            if (!block_gemv(M, false, theta.data(), 0.0, x.data())) x.noalias() = M * theta;
            x.array() += b;
            const double fsum =
                rows(pb, i0, m, eta.data(), x.data(), eta_new.data(), gb.data(), d, skip, yc);
            if (!block_gemv(M, true, gb.data(), 1.0, acc + off)) {
              acc_theta.noalias() += M.transpose() * gb;
            }
            if (off) acc[0] += gb.sum();
            acc[p1] += fsum;
          });
        }
      });
    }
  }
  guard.rethrow();
  if (yc) yc->ready = true;
  gX = Vec::Zero(p1);
  double f = 0.0;
  for (Index c = 0; c < part.chunks; ++c) {
    gX += Eigen::Map<const Vec>(partial.data() + c * (p1 + 1), p1);
    f += partial[static_cast<size_t>(c * (p1 + 1) + p1)];
  }
  return f;
}
}  // namespace detail

// The one compiled copy of the Newton fit layer per loss (declared extern in newton.hpp).
#define ALOOCV_NEWTON_DEFINE(T) ALOOCV_NEWTON_INSTANCES(, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_NEWTON_DEFINE)
#undef ALOOCV_NEWTON_DEFINE

FitState fit(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec* beta0) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return pb.has_l1() ? enet_fit<Loss>(pb, opt, beta0) : newton_fit<Loss>(pb, opt, beta0);
  });
}

FitState fit_coefficients(const Problem& pb, LossKind loss, const FitOptions& opt,
                          const Vec* beta0) {
  if (!pb.has_l1()) return fit(pb, loss, opt, beta0);
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return enet_fit<Loss>(pb, opt, beta0, -1, false);
  });
}

FitState prepare(const Problem& pb, LossKind loss, const FitOptions& opt, const Vec& beta) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return pb.has_l1() ? enet_prepare_at<Loss>(pb, beta, opt) : prepare_at<Loss>(pb, beta, opt);
  });
}

FitState fit_from(const Problem& pb, LossKind loss, const FitOptions& opt, const FitState& prev) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    if (pb.has_l1())
      return enet_fit<Loss>(pb, opt, prev.beta.size() == pb.p1() ? &prev.beta : nullptr);
    return path_fit<Loss>(pb, opt, prev);
  });
}

double step(const Problem& pb, LossKind loss, FitState& st, bool refresh, int n_threads) {
  if (pb.has_l1()) throw InvalidInput("a single Newton step needs a smooth (L2) penalty");
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    settle_deferred_end<Loss>(pb, st, n_threads);  // a step from the settled point
    return newton_step<Loss>(pb, st, refresh, n_threads);
  });
}

bool settle_end_guard(const Problem& pb, LossKind loss, FitState& st, int n_threads) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    return settle_deferred_end<Loss>(pb, st, n_threads);
  });
}

}  // namespace aloocv
