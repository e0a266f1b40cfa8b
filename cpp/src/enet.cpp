#include "aloocv/enet.hpp"

#include "aloocv/losses.hpp"

namespace aloocv {

namespace detail {
// The one compiled copy of the elastic-net fit layer (enet.hpp): the loss through LossOps.
FitState enet_fit(const LossOps& loss, const Problem& pb, const FitOptions& opt, const Vec* beta0,
                  Index skip, bool factor_active) {
  const int nt = resolve_threads(opt.n_threads);
  const Index off = pb.intercept ? 1 : 0;
  const double sw = pb.weight_sum() - (skip >= 0 ? pb.weight(skip) : 0.0);
  FitState st;
  st.beta = beta0 ? *beta0 : loss.initial_beta(pb, skip);
  EnetGlmModel m(loss.passes, pb, st, nt, skip);
  if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  const EnetDrive r = enet_drive(m, pb.pen, pb.l1, off, loss.constant_curvature, sw, opt);
  st.n_iter = r.n_iter;
  st.objective = m.objective();
  st.grad_norm = r.grad_norm;
  st.converged = r.converged;
  // The active set and the factor of its Hessian, for the LOO formulas.
  st.restricted = true;
  st.stale_eta = std::numeric_limits<double>::infinity();
  if (!factor_active) {
    for (Index j = off; j < pb.p1(); ++j)
      if (st.beta[j] != 0.0) st.active.push_back(j - off);
    return st;
  }
  Mat HA;
  const bool at_point =
      enet_active_hessian(m, r, pb.pen, off, loss.constant_curvature, opt.fresh_end, HA, st.active);
  st.chol.factor(HA.data(), HA.rows());
  if (at_point) st.stale_eta = 0.0;
  return st;
}

FitState enet_prepare_at(const LossOps& loss, const Problem& pb, const Vec& beta,
                         const FitOptions& opt) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n(), p1 = pb.p1(), off = pb.intercept ? 1 : 0;
  FitState st;
  st.beta = beta;
  st.eta.resize(n);
  linear_predictor(pb.X, beta.data(), pb.intercept, st.eta.data(), nt);
  pb.add_offset(st.eta.data());
  Vec g(n), d(n);
  loss.passes.derivatives(pb, st.eta.data(), g.data(), d.data(), nt, -1);
  full_gradient(pb, g.data(), beta, st.grad, nt);
  st.objective = loss.passes.objective(pb, st.eta.data(), beta, nt, -1, nullptr);
  st.grad_norm = kkt_violation(pb.l1, beta, st.grad, nullptr) / pb.weight_sum();
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
}  // namespace detail

EnetSumsFit enet_sums_fit(SumsSource& source, LossKind loss, const Vec& lam, const Vec& l1,
                          bool intercept, const Vec& beta0, double weight_sum,
                          const FitOptions& opt) {
  const Index off = intercept ? 1 : 0, p = lam.size(), p1 = p + off;
  if (l1.size() != p) {
    throw InvalidInput("l1 has " + std::to_string(l1.size()) + " entries, expected " +
                       std::to_string(p));
  }
  if (beta0.size() != p1) {
    throw InvalidInput("beta0 has " + std::to_string(beta0.size()) + " entries, expected " +
                       std::to_string(p1));
  }
  if (!(weight_sum > 0.0)) throw InvalidInput("the sum of the weights must be positive");
  const bool cc = dispatch_loss(loss, [](auto L) { return decltype(L)::constant_curvature; });
  Vec pen = Vec::Zero(p1), l1_1 = Vec::Zero(p1);
  pen.tail(p) = lam;
  l1_1.tail(p) = l1;
  detail::EnetSumsModel m(source, pen, l1_1, beta0);
  if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  const detail::EnetDrive r = detail::enet_drive(m, pen, l1_1, off, cc, weight_sum, opt);
  EnetSumsFit out;
  detail::enet_active_hessian(m, r, pen, off, cc, true, out.hessian, out.active);
  out.beta = m.beta();
  out.grad = m.grad();
  out.objective = m.objective();
  out.n_iter = r.n_iter;
  out.hessian_passes = m.hessian_passes();
  out.n_evals = m.n_evals();
  out.converged = r.converged;
  out.grad_norm = r.grad_norm;
  return out;
}

}  // namespace aloocv
