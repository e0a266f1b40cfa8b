#include "aloocv/loo.hpp"
#include "aloocv/hypergrad.hpp"

#include <limits>

namespace aloocv {

namespace detail {
Vec blocked_reduce(const Problem& pb, Columns cols, Index q1, int nt, Index stride,
                   double flops_per_row, BlockBody body) {
  const Index n = pb.n();
  const Partition part{n, reduction_chunks(n, std::max<Index>(stride, 1), nt, 256)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * stride), 0.0);
  const Index B = std::min(block_rows(q1), std::max<Index>(1, n));
  const int threads = threads_for(nt, flops_per_row * double(n));
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(threads)
  {
    interrupt::Share share(ictx);
    Scratch s;
    guard.run([&] { s.ensure(q1, B); });
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        double* P = partial.data() + c * stride;
        for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
          const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
          pb.X.pack_rows(i0, i1, nullptr, pb.intercept, s.pack, cols);
          body(P, i0, m, s.pack, s);
        }
      });
    }
  }
  guard.rethrow();
  Vec out = Vec::Zero(stride);
  if (stride == 0) return out;
  for (Index c = 0; c < part.chunks; ++c)
    out += Eigen::Map<const Vec>(partial.data() + c * stride, stride);
  return out;
}

}  // namespace detail

LooMethod loo_method_from_name(const std::string& name) {
  if (name == "alo") return LooMethod::ALO;
  if (name == "if") return LooMethod::IF;
  if (name == "lemma3") return LooMethod::Lemma3;
  if (name == "exact") return LooMethod::Exact;
  throw InvalidInput("unknown LOO method '" + name +
                     "'; expected one of 'alo', 'exact', 'if', 'lemma3'");
}

LooResult loo(const Problem& pb, LossKind loss, LooMethod method, FitState& st,
              const FitOptions& opt, SampleSet set) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    if (method == LooMethod::Exact) {
      settle_deferred_end<Loss>(pb, st, opt.n_threads);
      if (pb.has_l1()) return enet_exact_loo<Loss>(pb, st, opt, set);
      if (!Loss::constant_curvature && st.stale_eta > 0.0) {
        // the refits downdate the Hessian at beta (exact_loo): take it where the fit ended
        // on an older one (clipped where not positive definite, as the fit's own factors)
        const int nt = resolve_threads(opt.n_threads);
        Vec g(pb.n()), d(pb.n()), H;
        detail::derivatives<Loss>(pb, st.eta.data(), g.data(), d.data(), nt);
        const bool clipped = detail::factor_hessian(pb, d.data(), H, st.chol, nt, &st.hx, true);
        ++st.hessian_passes;
        st.stale_eta = clipped ? std::numeric_limits<double>::infinity() : 0.0;
      }
      return exact_loo<Loss>(pb, st, opt, set);
    }
    return settled_approx_loo<Loss>(pb, st, method, opt.n_threads);
  });
}

LooResult loo_gradient(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                       HyperGradient& grad, GradientKind kind) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    fresh_factor<Loss>(pb, st, n_threads);
    LooResult res = alo_with_gradient<Loss>(pb, st, n_threads, grad, kind);
    downdate_factors<Loss>(pb, st.eta.data(), res);
    return res;
  });
}

LooResult loo_gradient_tangents(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                                HyperGradient& grad, const Mat& D2, const Mat& D1,
                                HyperTangents& tangents) {
  if (D2.rows() != pb.X.p || D1.rows() != pb.X.p || D1.cols() != D2.cols()) {
    throw InvalidInput("hyperparameter directions must be (n_features x m) for l2 and l1");
  }
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    fresh_factor<Loss>(pb, st, n_threads);
    AdjointState adj;
    LooResult res = alo_with_gradient<Loss>(pb, st, n_threads, grad, GradientKind::Exact, &adj);
    tangents = alo_gradient_tangents<Loss>(pb, st, res, adj, D2, D1, n_threads);
    downdate_factors<Loss>(pb, st.eta.data(), res);
    return res;
  });
}

HyperGradient loo_sample_gradient(const Problem& pb, LossKind loss, const FitState& st,
                                  const Index* idx, Index m, double& acv) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    return sample_gradient<Loss>(pb, st, idx, m, acv);
  });
}

}  // namespace aloocv
