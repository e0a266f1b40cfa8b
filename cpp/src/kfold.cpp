#include "aloocv/kfold.hpp"

#include <sstream>

#include "aloocv/blas.hpp"
#include "aloocv/enet.hpp"
#include "aloocv/hessian.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

namespace {

std::vector<std::vector<Index>> members(const int* fold, Index n, Index K) {
  std::vector<std::vector<Index>> out(static_cast<size_t>(K));
  for (Index i = 0; i < n; ++i) {
    if (fold[i] < 0 || fold[i] >= K) throw InvalidInput("fold label out of range");
    out[static_cast<size_t>(fold[i])].push_back(i);
  }
  for (Index k = 0; k < K; ++k) {
    if (out[static_cast<size_t>(k)].empty()) {
      throw InvalidInput("fold " + std::to_string(k) + " is empty");
    }
  }
  return out;
}

template <class Loss>
KFoldOutput approx_impl(const Problem& pb, FitState& st, const int* fold, Index K, int n_threads) {
  fresh_factor<Loss>(pb, st, n_threads);
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q1 = (cols.all() ? pb.X.p : cols.size) + off;
  const auto groups = members(fold, n, K);
  // H of the factor's coordinates, rebuilt from its Cholesky factor (L L^T)
  Eigen::Map<const Mat> L(st.chol.lower(), q1, q1);
  const Mat H = L.triangularView<Eigen::Lower>() * L.transpose();
  // beta restricted to the factor's coordinates
  Vec bq(q1);
  if (pb.intercept) bq[0] = st.beta[0];
  for (Index k = 0; k < q1 - off; ++k) bq[off + k] = st.beta[off + (cols.all() ? k : cols.cols[k])];
  KFoldOutput out;
  out.losses.resize(n);
  out.predictions.resize(n);
  const Index B = block_rows(q1);
  ExceptionCatcher guard;
#pragma omp parallel num_threads(nt)
  {
    std::vector<double> pack, scale;
    Mat HS;
    Vec r, bS;
    Cholesky chol;
    guard.run([&] {
      pack.resize(static_cast<size_t>(q1 * B));
      scale.resize(static_cast<size_t>(B));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index k = 0; k < K; ++k) {
      if (guard.failed()) continue;
      guard.run([&] {
        const auto& S = groups[static_cast<size_t>(k)];
        const Index q = static_cast<Index>(S.size());
        HS.resize(q1, q1);  // X~_S^T D_S X~_S (lower), then H_{-S} = H - that
        r = Vec::Zero(q1);
        for (Index a = 0; a < q; a += B) {
          const Index m = std::min(B, q - a);
          for (Index t = 0; t < m; ++t) {
            const Index i = S[static_cast<size_t>(a + t)];
            const double w = pb.weight(i);
            scale[static_cast<size_t>(t)] = std::sqrt(w * Loss::d2(pb.y[i], st.eta[i]));
          }
          pb.X.pack_indices(S.data() + a, m, scale.data(), pb.intercept, pack.data(), cols);
          blas::syrk_lower(q1, m, pack.data(), q1, a == 0 ? 0.0 : 1.0, HS.data(), q1);
          Eigen::Map<Mat> Z(pack.data(), q1, m);
          pb.X.pack_indices(S.data() + a, m, nullptr, pb.intercept, pack.data(), cols);
          for (Index t = 0; t < m; ++t) {
            const Index i = S[static_cast<size_t>(a + t)];
            const double g = pb.weight(i) * Loss::d1(pb.y[i], st.eta[i]);
            r.noalias() += g * Z.col(t);
          }
        }
        HS = H - HS;  // the lower triangle is what counts
        HS.triangularView<Eigen::StrictlyUpper>() = HS.transpose();
        try {
          chol.factor(HS.data(), q1);
        } catch (const SingularHessian&) {
          std::ostringstream msg;
          msg << "the Hessian without fold " << k << " (" << q
              << " samples) is singular: the remaining samples do not determine the fit; use "
                 "a larger penalty or fewer folds";
          throw SingularHessian(msg.str());
        }
        chol.solve(r.data());
        bS = bq + r;  // beta~_S
        for (Index a = 0; a < q; a += B) {
          const Index m = std::min(B, q - a);
          pb.X.pack_indices(S.data() + a, m, nullptr, pb.intercept, pack.data(), cols);
          Eigen::Map<const Mat> Z(pack.data(), q1, m);
          for (Index t = 0; t < m; ++t) {
            const Index i = S[static_cast<size_t>(a + t)];
            const double e = Z.col(t).dot(bS);
            out.predictions[i] = e;
            out.losses[i] = Loss::value(pb.y[i], e);
          }
        }
      });
    }
  }
  guard.rethrow();
  return out;
}

template <class Loss>
KFoldOutput exact_impl(const Problem& pb, const FitState& st, const int* fold, Index K,
                       const FitOptions& opt) {
  const Index n = pb.n();
  const auto groups = members(fold, n, K);
  KFoldOutput out;
  out.losses.resize(n);
  out.predictions.resize(n);
  Vec w(n);
  for (Index i = 0; i < n; ++i) w[i] = pb.weight(i);
  // Each refit is the full problem with the fold's weights set to zero, warm-started
  // from the full fit; the folds run one after the other, each with all threads.
  for (Index k = 0; k < K; ++k) {
    const auto& S = groups[static_cast<size_t>(k)];
    Vec wk = w;
    for (Index i : S) wk[i] = 0.0;
    if (!(wk.sum() > 0.0)) throw InvalidInput("a training part has zero total weight");
    Problem pk = pb;
    pk.w = wk.data();
    const FitState r = pb.has_l1() ? enet_fit<Loss>(pk, opt, &st.beta, -1, false)
                                   : newton_fit<Loss>(pk, opt, &st.beta);
    if (!r.converged) ++out.n_not_converged;
    for (Index i : S) {
      out.predictions[i] = r.eta[i];
      out.losses[i] = Loss::value(pb.y[i], r.eta[i]);
    }
  }
  return out;
}

}  // namespace

KFoldOutput kfold_approx(const Problem& pb, LossKind loss, FitState& st, const int* fold, Index K,
                         int n_threads) {
  return dispatch_loss(
      loss, [&](auto L) { return approx_impl<decltype(L)>(pb, st, fold, K, n_threads); });
}

KFoldOutput kfold_exact(const Problem& pb, LossKind loss, const FitState& st, const int* fold,
                        Index K, const FitOptions& opt) {
  return dispatch_loss(loss, [&](auto L) { return exact_impl<decltype(L)>(pb, st, fold, K, opt); });
}

}  // namespace aloocv
