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
    if (chord && m.factor_expired && m.factor_expired(m.model)) chord = false;
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
          Eigen::Map<Vec> x(xs.data() + i0, m);
          // the block's rows and losses between its two products
          auto middle = [&] {
            x.array() += b;
            const double fsum =
                rows(pb, i0, m, eta.data(), x.data(), eta_new.data(), gb.data(), d, skip, yc);
            if (off) acc[0] += gb.sum();
            acc[p1] += fsum;
          };
          // contiguous rows (float64 or float32) straight through the row kernels
          if (pb.X.rows_gemv(i0, i1, false, theta.data(), 0.0, x.data())) {
            middle();
            pb.X.rows_gemv(i0, i1, true, gb.data(), 1.0, acc + off);
            continue;
          }
          pb.X.with_rows(i0, i1, [&](const auto& M) {
            if (!block_gemv(M, false, theta.data(), 0.0, x.data())) x.noalias() = M * theta;
            middle();
            if (!block_gemv(M, true, gb.data(), 1.0, acc + off)) {
              acc_theta.noalias() += M.transpose() * gb;
            }
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

// The Newton fit layer (newton.hpp), compiled once: the loss through LossOps.
double newton_move(const LossOps& loss, const Problem& pb, FitState& st, const Vec& step,
                   double dec, double& f, Vec& xs, Vec& eta_try, Vec& g, Vec& d, Vec& g_try,
                   Vec& d_try, int nt, Index skip, YPartCache* yc) {
  Vec gX;
  g_try.resize(pb.n());
  d_try.resize(pb.n());
  const double floss = fused_pass(pb, step, st.eta, eta_try, xs, gX, g_try.data(), d_try.data(), nt,
                                  skip, yc, loss.fused_rows);
  const Vec b1 = st.beta + step;
  const double f1 = floss + 0.5 * pb.pen.dot(b1.cwiseAbs2());
  if (std::isfinite(f1) && (tiny_decrease(dec, f) || f1 <= f - kArmijo * dec)) {
    st.beta = b1;
    st.eta.swap(eta_try);
    f = f1;
    st.grad = gX + pb.pen.cwiseProduct(st.beta);
    if (!st.grad.allFinite()) {
      throw InvalidInput(
          "the gradient is not finite (overflow of the loss at extreme linear predictors); "
          "rescale X or increase the penalty");
    }
    g.swap(g_try);
    d.swap(d_try);
    return 1.0;
  }
  double f_try = f;
  const double t =
      line_search(loss.passes, pb, st.beta, step, st.eta, xs, f, dec, eta_try, f_try, nt, skip, yc);
  if (t == 0.0) return 0.0;
  st.beta += t * step;
  st.eta.swap(eta_try);
  f = f_try;
  loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, skip);
  full_gradient(pb, g.data(), st.beta, st.grad, nt);
  return t;
}

GlmCore::GlmCore(const LossOps& loss, const Problem& pb, FitState& st, int n_threads, Index skip,
                 bool keep_hx, bool have_grad)
    : loss_(loss),
      pb_(pb),
      st_(st),
      nt_(n_threads),
      skip_(skip),
      keep_hx_(keep_hx),
      ypart_(loss.passes.y_part_cache(pb)) {
  const Index n = pb.n();
  g_.resize(n);
  d_.resize(n);
  xs_.resize(n);
  eta_try_.resize(n);
  f_ = loss_.passes.derivatives_objective(pb, st.eta.data(), g_.data(), d_.data(), st.beta, nt_,
                                          skip_, cache_of(ypart_));
  if (!have_grad) {
    full_gradient(pb, g_.data(), st.beta, st.grad, nt_);
    ++st.matvec_passes;
  }
  st.grad_pen = pb.pen;
}

void GlmCore::refactor() {
  bool single = gnorm() > single_above_;
  Index stride = gnorm() > sub_above_ ? sub_stride_ : 1;
  const bool modified = factor_hessian(pb_, d_.data(), H_, st_.chol, nt_,
                                       keep_hx_ ? &st_.hx : nullptr, true, &single, &stride);
  if (single) ++st_.single_hessian_passes;
  if (stride > 1) ++st_.sampled_hessian_passes;
  // a float32 or sampled Hessian is not the Hessian at the point: marked stale like a
  // modified one
  const bool approx = single || stride > 1;
  st_.stale_eta = (modified || approx) ? std::numeric_limits<double>::infinity() : 0.0;
  exact_ = !approx;
  single_factor_ = single;
  sub_factor_ = stride > 1;
  secant_.clear();
}

double GlmCore::direction(Vec& step) {
  step = -st_.grad;
  if (secant_.size() > 0 && !factor_at_point()) {
    secant_.apply(step, [&](Vec& v) { st_.chol.solve(v.data()); });
  } else {
    st_.chol.solve(step.data());
  }
  return -st_.grad.dot(step);
}

double GlmCore::move(const Vec& step, double dec) {
  if (!(dec > 0.0)) return 0.0;  // a zero gradient (or no descent): nothing to gain
  const double g_before = gnorm();
  Vec g0;
  if (secant_.on()) g0 = st_.grad;
  const double t = newton_move(loss_, pb_, st_, step, dec, f_, xs_, eta_try_, g_, d_, g_try_,
                               d_try_, nt_, skip_, cache_of(ypart_));
  // no descent on a float32 factor: the drive's next Hessians are float64
  if (t == 0.0 && single_factor_) single_above_ = std::numeric_limits<double>::infinity();
  // a damped step on a sampled factor (its curvature missed heavy rows: Student-t rows took
  // 100 damped sampled steps without converging) or none: the next Hessians take every row
  if (t < 1.0 && sub_factor_) sub_above_ = std::numeric_limits<double>::infinity();
  // a sampled factor that contracts the gradient poorly near the optimum (use_subsample)
  if (t > 0.0 && sub_factor_ && g_before <= sub_local_below_ &&
      gnorm() > kSubsampleLocalContraction * g_before) {
    sub_above_ = std::numeric_limits<double>::infinity();
  }
  if (t > 0.0 && secant_.on()) secant_.add(t * step, st_.grad - g0);
  // the fused step reads X once; a backtracked step adds the gradient's pass
  st_.matvec_passes += (t == 1.0) ? 1 : 2;
  if (t > 0.0) {
    const double mv = t * xs_.cwiseAbs().maxCoeff();
    last_move_ = mv;
    if (!loss_.constant_curvature) st_.stale_eta += mv;
  }
  return t;
}

double GlmCore::probe_move(const Vec& step) {
  ++st_.matvec_passes;
  return eta_move(pb_, step, xs_, nt_);
}

void GlmCore::restore(Saved&& keep) {
  const Index passes = st_.matvec_passes;
  st_ = std::move(keep.st);
  st_.matvec_passes = passes;
  loss_.passes.derivatives(pb_, st_.eta.data(), g_.data(), d_.data(), nt_, skip_);
  f_ = keep.f;
  exact_ = keep.exact;
  last_move_ = keep.last_move;
  secant_ = std::move(keep.secant);
}

void settle_fused_end(FitState& st, GlmCore& m, const DriveResult& r, bool defer, double tol) {
  if (defer) {
    if (end_guard_step(m, r, st.end_guard.step, st.end_guard.dec)) {
      st.end_guard.tol = tol;
    } else {
      st.end_guard.step.resize(0);
    }
    return;
  }
  if (settle_end(m, r, kFusedEndEta)) {
    ++st.n_iter;
    ++st.fused_end_fallbacks;
    ++st.hessian_passes;
  }
}

void exact_end_factor(const LossOps& loss, const Problem& pb, FitState& st, int nt) {
  Vec g(pb.n()), d(pb.n()), H;
  loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
  factor_hessian(pb, d.data(), H, st.chol, nt, &st.hx);
  ++st.hessian_passes;
  st.stale_eta = 0.0;
}

FitState prepare_at(const LossOps& loss, const Problem& pb, const Vec& beta,
                    const FitOptions& opt) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n();
  FitState st;
  st.beta = beta;
  st.eta.resize(n);
  linear_predictor(pb.X, beta.data(), pb.intercept, st.eta.data(), nt);
  pb.add_offset(st.eta.data());
  Vec g(n), d(n), H;
  loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
  full_gradient(pb, g.data(), beta, st.grad, nt);
  factor_hessian(pb, d.data(), H, st.chol, nt, &st.hx);
  st.hessian_passes = 1;
  st.matvec_passes = 2;
  st.grad_pen = pb.pen;
  st.objective = loss.passes.objective(pb, st.eta.data(), beta, nt, -1, nullptr);
  st.grad_norm = st.grad.cwiseAbs().maxCoeff() / pb.weight_sum();
  st.converged = st.grad_norm <= opt.tol;
  return st;
}

FitState newton_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt,
                    const Vec* beta0) {
  const int nt = resolve_threads(opt.n_threads);
  const double sw = pb.weight_sum();
  FitState st;
  st.beta = beta0 ? *beta0 : loss.initial_beta(pb, -1);
  st.eta.resize(pb.n());
  if (st.beta.tail(pb.X.p).isZero(0.0)) {
    // zero slopes (the default start): eta is the intercept, no pass over X (X is finite)
    st.eta.setConstant(pb.intercept ? st.beta[0] : 0.0);
  } else {
    linear_predictor(pb.X, st.beta.data(), pb.intercept, st.eta.data(), nt);
    ++st.matvec_passes;
  }
  pb.add_offset(st.eta.data());
  GlmCore m(loss, pb, st, nt);
  if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  const bool fresh_end = opt.fresh_end && !loss.constant_curvature;
  DriveOptions o = drive_options(opt, sw, fresh_end);
  // A plain fit always takes a step (and so holds a factor); one that ends on a fresh
  // factor may stop at once.
  o.check_first = fresh_end;
  if (!loss.constant_curvature) {
    m.use_secant(kSecantMemory);
    m.use_single(kSingleGradFactor * opt.tol * sw);
    // from the default start; a fresh-end drive where the sample spans the rows, its
    // sampled factors expiring below the sampled range (docs/math/newton.md,
    // "Subsampled Hessians")
    const Index k = beta0 ? 1 : subsample_stride(pb);
    if (k > 1 && (!fresh_end || subsample_spans(pb, k, nt))) {
      const bool throughout = !fresh_end && pb.n() / k >= kSubsampleThroughoutRows * pb.p1();
      const double range = kSubsampleGradShare * m.gnorm();
      m.use_subsample(k, throughout ? 0.0 : range, fresh_end, throughout ? range : -1.0);
    }
  }
  const DriveResult r = newton_drive(m, o, fit_policy(opt, loss.constant_curvature));
  settle_fused_end(st, m, r, fresh_end && opt.defer_end_guard, opt.tol);
  m.finish(r, sw);
  if (fresh_end && st.stale_eta > 0.0) exact_end_factor(loss, pb, st, nt);
  return st;
}

bool settle_deferred_end(const LossOps& loss, const Problem& pb, FitState& st, int n_threads,
                         double moved) {
  if (st.end_guard.step.size() == 0) return false;
  const Vec step = std::move(st.end_guard.step);
  st.end_guard.step.resize(0);
  const int nt = resolve_threads(n_threads);
  if (moved < 0.0) {
    Vec xs;
    moved = eta_move(pb, step, xs, nt);
    ++st.matvec_passes;
  }
  if (!(moved > kFusedEndEta)) return false;
  GlmCore m(loss, pb, st, nt, -1, true, true);
  m.adopt_factor(true);
  const bool taken = take_end_step(m, step, st.end_guard.dec);
  if (taken) {
    ++st.n_iter;
    ++st.fused_end_fallbacks;
    ++st.hessian_passes;
    const double sw = pb.weight_sum();
    st.objective = m.objective();
    st.grad_norm = m.gnorm() / sw;
    st.converged = st.grad_norm <= st.end_guard.tol;
    if (st.stale_eta > 0.0) exact_end_factor(loss, pb, st, nt);
  }
  return taken;
}

double newton_step(const LossOps& loss, const Problem& pb, FitState& st, bool refresh,
                   int n_threads) {
  const int nt = resolve_threads(n_threads);
  const double sw = pb.weight_sum();
  GlmCore m(loss, pb, st, nt);  // gradient with the current penalty
  if (refresh || st.chol.empty()) {
    m.refactor();
    ++st.hessian_passes;
  }
  DriveOptions o;
  o.tol = o.target = 0.0;
  o.scale = sw;
  o.max_iter = 1;
  o.check_first = false;
  RefreshPolicy pol;
  pol.chord_ratio = 1.0;
  pol.start_factored = true;  // the held factor, whatever its age
  const DriveResult r = newton_drive(m, o, pol);
  st.n_iter += r.n_iter;
  if (r.n_iter > 0) st.objective = m.objective();
  st.grad_norm = r.grad_norm;
  st.converged = false;
  return r.last_step;
}

FitState path_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt,
                  const FitState& prev) {
  const Index p1 = pb.p1();
  if (prev.hx.size() != p1 * p1 || prev.beta.size() != p1 || prev.eta.size() != pb.n()) {
    return newton_fit(loss, pb, opt, prev.beta.size() == p1 ? &prev.beta : nullptr);
  }
  const int nt = resolve_threads(opt.n_threads);
  const double sw = pb.weight_sum();
  FitState st;
  st.beta = prev.beta;
  st.eta = prev.eta;
  st.hx = prev.hx;
  Vec H = prev.hx;
  for (Index j = 0; j < p1; ++j) H[j * p1 + j] += pb.pen[j];
  st.chol.factor(H.data(), p1);
  // exact for a constant curvature; otherwise the Hessian of another point
  st.stale_eta = loss.constant_curvature ? 0.0 : std::numeric_limits<double>::infinity();
  // the predictor's gradient: prev's plus the change of the penalty term (no pass)
  const bool predict = prev.grad.size() == p1 && prev.grad_pen.size() == p1;
  if (predict) st.grad = prev.grad + (pb.pen - prev.grad_pen).cwiseProduct(st.beta);
  GlmCore m(loss, pb, st, nt, -1, true, predict);
  m.adopt_factor(true);
  m.use_secant(kSecantMemory);
  // Chord steps are cheap (no Hessian pass): converge them 100x below tol, so that the
  // fresh Hessian taken at the end is at the returned beta (no final step, no refresh).
  DriveOptions o = drive_options(opt, sw, true);
  const DriveResult r = newton_drive(m, o, path_policy(opt));
  settle_fused_end(st, m, r, opt.defer_end_guard, opt.tol);
  m.finish(r, sw);
  return st;
}

void fresh_factor(const LossOps& loss, const Problem& pb, FitState& st, int n_threads,
                  double threshold) {
  settle_deferred_end(loss, pb, st, n_threads, -1.0);
  if (loss.constant_curvature) return;
  if (st.restricted) {
    // Active-set (L1) states factor the active set's Hessian at beta (enet_fit,
    // enet_prepare_at: stale_eta = 0) or hold no factor (refits without factor_active):
    // then take it (one pass over the active columns).
    if (st.stale_eta == 0.0) return;
    const int nt = resolve_threads(n_threads);
    const Index off = pb.intercept ? 1 : 0;
    const Index q = static_cast<Index>(st.active.size()) + off;
    Vec g(pb.n()), d(pb.n());
    loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
    Mat HA(q, q);
    hessian(pb.X, d.data(), pb.intercept, HA.data(), nt, Columns::of(st.active));
    for (Index a = 0; a < q; ++a) HA(a, a) += pb.pen[a < off ? 0 : st.active[a - off] + off];
    st.chol.factor(HA.data(), q);
    ++st.hessian_passes;
    st.stale_eta = 0.0;
    return;
  }
  if (!(st.stale_eta > threshold)) return;
  const int nt = resolve_threads(n_threads);
  Vec g(pb.n()), d(pb.n()), H;
  loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
  factor_hessian(pb, d.data(), H, st.chol, nt, &st.hx);
  ++st.hessian_passes;
  st.stale_eta = 0.0;
}
}  // namespace detail

// The one compiled copy of the loss parts of the Newton fit layer per loss (declared extern
// in newton.hpp).
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
