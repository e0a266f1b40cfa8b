#include "aloocv/sums_model.hpp"

#include "aloocv/losses.hpp"
#include "aloocv/multinomial.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

SumsFit sums_fit(SumsSource& source, LossKind loss, const Vec& lam, bool intercept,
                 const Vec& beta0, const SumsFitOptions& opt) {
  const Index off = intercept ? 1 : 0, p1 = lam.size() + off;
  Vec pen = Vec::Zero(p1);
  pen.tail(lam.size()) = lam;
  if (beta0.size() != p1) {
    throw InvalidInput("beta0 has " + std::to_string(beta0.size()) + " entries, expected " +
                       std::to_string(p1));
  }
  if (!(opt.weight_sum > 0.0)) throw InvalidInput("the sum of the weights must be positive");
  const bool cc = dispatch_loss(loss, [](auto L) { return decltype(L)::constant_curvature; });
  const double sw = opt.weight_sum;
  const bool path = opt.previous_hx && opt.previous_hx->size() == p1 * p1;
  // the options of path_fit (path) or newton_fit (newton.hpp), step for step
  const bool fresh_end = path || (opt.fit.fresh_end && !cc);
  DriveOptions o = detail::drive_options(opt.fit, sw, fresh_end);
  // the policy of the in-memory fit (path_fit, newton_fit)
  RefreshPolicy pol = path ? detail::path_policy(opt.fit) : detail::fit_policy(opt.fit, cc);
  if (!path) o.check_first = fresh_end;
  const bool chords = fresh_end || !cc;  // chord steps with their secant pairs
  detail::SumsModel m(source, pen, beta0, cc, chords, !path, o.target * sw, {}, false,
                      path ? opt.start : nullptr);
  if (chords) {
    m.use_secant(detail::kSecantMemory);
    m.set_end_hints(pol.rechord_max_steps, o.tol * sw, pol.polish ? pol.polish_move : 0.0,
                    o.factor_end, pol.chord_ratio);
  }
  if (path) {
    m.adopt(*opt.previous_hx);
  } else if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  DriveResult r = newton_drive(m, o, pol);
  // the guard of a fused end, as newton_fit and path_fit (deferred: the caller's)
  Vec guard_step;
  double guard_dec = 0.0;
  if (opt.defer_end_guard) {
    if (!end_guard_step(m, r, guard_step, guard_dec)) guard_step.resize(0);
  } else if (settle_end(m, r, detail::kFusedEndEta)) {
    ++r.n_iter;
    ++r.hessian_passes;
  }
  SumsFit out = m.result(r, sw);
  if (!path && fresh_end && m.stale_eta() > 0.0) {
    // the Hessian at beta is not positive definite (clipped factor): the real one, or the
    // error that says so (as newton_fit)
    m.exact_factor();
    out = m.result(r, sw);
    ++out.hessian_passes;
  }
  out.end_guard_step = std::move(guard_step);
  out.end_guard_dec = guard_dec;
  return out;
}

SumsFit sums_settle_end(SumsSource& source, LossKind loss, const Vec& lam, bool intercept,
                        const SumsFit& fit, double tol, double weight_sum, bool& taken,
                        const SumsValue* at_beta) {
  const Index off = intercept ? 1 : 0, p1 = lam.size() + off;
  if (fit.beta.size() != p1 || fit.hx.size() != p1 * p1 || fit.end_guard_step.size() != p1) {
    throw InvalidInput("sums_settle_end needs the fit's beta, its Hessian and a pending guard");
  }
  Vec pen = Vec::Zero(p1);
  pen.tail(lam.size()) = lam;
  const bool cc = dispatch_loss(loss, [](auto L) { return decltype(L)::constant_curvature; });
  detail::SumsModel m(source, pen, fit.beta, cc, true, false, tol * weight_sum, {}, false, at_beta);
  m.adopt(fit.hx, true);
  taken = take_end_step(m, fit.end_guard_step, fit.end_guard_dec);
  DriveResult r;
  r.n_iter = fit.n_iter + (taken ? 1 : 0);
  r.hessian_passes = fit.hessian_passes + (taken ? 1 : 0);
  if (taken && m.stale_eta() > 0.0) {
    // the Hessian at the new point was clipped: the real one, or the error that says so
    // (as sums_fit and the in-memory settle)
    m.exact_factor();
    ++r.hessian_passes;
  }
  r.converged = m.gnorm() / weight_sum <= tol;
  r.stalled = fit.stalled;
  SumsFit out = m.result(r, weight_sum);
  out.n_evals += fit.n_evals;
  return out;
}

// The multinomial fit over a sums source here, not in multinomial.cpp: the one compiled
// copy of SumsModel and of its Newton driver serves both fits.
SumsFit mn_sums_fit(SumsSource& source, Index K, const Vec& lam, bool intercept, const Vec& beta0,
                    const SumsFitOptions& opt) {
  const Index off = intercept ? 1 : 0, p = lam.size(), p1 = p + off, dim = K * p1;
  if (K < 2) throw InvalidInput("the multinomial loss needs at least 2 classes");
  if (beta0.size() != dim) {
    throw InvalidInput("beta0 has " + std::to_string(beta0.size()) + " entries, expected " +
                       std::to_string(dim));
  }
  const double sw = opt.weight_sum;
  if (!(sw > 0.0)) throw InvalidInput("the sample weights sum to zero");
  Vec pen = Vec::Zero(dim);
  for (Index a = 0; a < K; ++a) pen.segment(a * p1 + off, p) = lam;
  detail::SumsGauge gauge;
  if (intercept) gauge = {K, p1, sw / static_cast<double>(K * K)};  // MnProblem::gauge()
  // mn_fit's options and policy
  DriveOptions o;
  o.tol = o.target = opt.fit.tol;
  o.scale = sw;
  o.max_iter = opt.fit.max_iter;
  o.factor_end = opt.fit.fresh_end;
  RefreshPolicy pol;
  pol.chord_ratio = kMnChordRatio;
  pol.rechord = pol.rechord_confirmed = true;
  detail::SumsModel m(source, pen, beta0, false, false, true, o.target * sw, gauge, true);
  const DriveResult r = newton_drive(m, o, pol);
  return m.result(r, sw);
}

}  // namespace aloocv
