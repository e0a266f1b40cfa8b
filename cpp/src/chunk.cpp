#include "aloocv/chunk.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "aloocv/hypergrad.hpp"

namespace aloocv {

namespace {

// eta = X~ beta + offset
Vec chunk_eta(const Problem& pb, const Vec& beta, int n_threads) {
  Vec eta(pb.n());
  linear_predictor(pb.X, beta.data(), pb.intercept, eta.data(), n_threads);
  pb.add_offset(eta.data());
  return eta;
}

void check_beta(const Problem& pb, const Vec& beta) {
  if (beta.size() != pb.p1()) {
    throw InvalidInput("beta has " + std::to_string(beta.size()) + " entries, expected " +
                       std::to_string(pb.p1()));
  }
}

// The loss part of chunk_sums for the rows [i0, i0 + m) (eb: X_b theta): g = w l' (and
// d = w l'', clipped at 0 when `clip`, when d is not null) at eta = eb + b0 + offset;
// adds the block's w l to fsum. The pass over X is compiled once, this per loss.
template <class Loss>
void sums_rows(const Problem& pb, Index i0, Index m, const double* eb, double b0, double* gb,
               double* d, bool clip, double& fsum) {
  for (Index r = 0; r < m; ++r) {
    const Index i = i0 + r;
    const double e = eb[r] + b0 + pb.offset_at(i);
    const double w = pb.weight(i);
    if (w == 0.0) {
      gb[r] = 0.0;
      if (d) d[i] = 0.0;
      continue;
    }
    fsum += w * Loss::value(pb.y[i], e, pb.lp);
    gb[r] = w * Loss::d1(pb.y[i], e, pb.lp);
    if (d) {
      const double di = w * Loss::d2(pb.y[i], e, pb.lp);
      d[i] = clip ? std::max(di, 0.0) : di;
    }
  }
}
using SumsRows = void (*)(const Problem&, Index, Index, const double*, double, double*, double*,
                          bool, double&);

// The loss part of chunk_refits for the rows [i0, i0 + m): E (m x B, leading dimension
// ldE) holds eta_ij - offset_i on entry, w l'(eta_ij) on exit (0 at exclude[j]); adds
// sum_i w_i l(eta_ij) to loss[j].
template <class Loss>
void refit_rows(const Problem& pb, Index i0, Index m, double* E, Index ldE, Index B,
                const int* exclude, double* loss) {
  for (Index j = 0; j < B; ++j) {
    const Index skip = exclude[j];
    double* Ej = E + j * ldE;
    for (Index k = 0; k < m; ++k) {
      const Index i = i0 + k;
      const double w = (i == skip) ? 0.0 : pb.weight(i);
      const double eta = Ej[k] + pb.offset_at(i);
      if (w == 0.0) {
        Ej[k] = 0.0;
        continue;
      }
      loss[j] += w * Loss::value(pb.y[i], eta, pb.lp);
      Ej[k] = w * Loss::d1(pb.y[i], eta, pb.lp);
    }
  }
}
using RefitRows = void (*)(const Problem&, Index, Index, double*, Index, Index, const int*,
                           double*);
using Derivatives = void (*)(const Problem&, const double*, double*, double*, int, Index);

}  // namespace

ChunkSums chunk_sums(const Problem& pb, LossKind loss, const Vec& beta, bool want_hessian,
                     bool check, int n_threads, const Vec* step, bool clip) {
  check_beta(pb, beta);
  if (step) check_beta(pb, *step);
  const SumsRows rows = dispatch_loss(loss, [&](auto L) -> SumsRows {
    using Loss = decltype(L);
    if (check) check_response<Loss>(pb.y, pb.n(), pb.lp);
    return &sums_rows<Loss>;
  });
  const Index n = pb.n(), p = pb.X.p, off = pb.intercept ? 1 : 0, p1 = p + off;
  ChunkSums out;
  out.weight = pb.weight_sum();
  out.grad = Vec::Zero(p1);
  // One read of X per row block for everything but the Hessian (as fused_step in
  // memory): [eta, X~ step] = X~ [beta, step] in one product, the loss, w l' (and w l''
  // for the Hessian) per row, and X~^T (w l') while the block is in cache. Partials per
  // fixed row chunk, summed in chunk order: independent of the thread count.
  const Vec theta = beta.tail(p);
  const Vec theta_s = step ? Vec(step->tail(p)) : Vec();
  const double b0 = off ? beta[0] : 0.0, s0 = (off && step) ? (*step)[0] : 0.0;
  const int nt = threads_for(n_threads, 2.0 * double(step ? 3 : 2) * double(n) * double(p1));
  const Partition part{n, reduction_chunks(n, p1 + 2, nt, 1024)};
  const Index B = std::max<Index>(64, std::min<Index>(4096, Index(32768) / std::max<Index>(1, p)));
  std::vector<double> partial(static_cast<size_t>(part.chunks * (p1 + 2)), 0.0);
  Vec d;
  if (want_hessian) d.resize(n);
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt)
  {
    interrupt::Share share(ictx);
    Vec eb, xb, gb;
#pragma omp for schedule(dynamic, 1)
    for (Index c = 0; c < part.chunks; ++c) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        double* acc = partial.data() + c * (p1 + 2);
        Eigen::Map<Vec> acc_theta(acc + off, p);
        double fsum = 0.0, smax = 0.0;
        for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
          const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
          gb.resize(m);
          eb.resize(m);
          pb.X.with_rows(i0, i1, [&](const auto& M) {
            eb.noalias() = M * theta;
            if (step) {  // the block again, from cache
              xb.resize(m);
              xb.noalias() = M * theta_s;
              smax = std::max(smax, (xb.array() + s0).abs().maxCoeff());
            }
            rows(pb, i0, m, eb.data(), b0, gb.data(), want_hessian ? d.data() : nullptr, clip,
                 fsum);
            acc_theta.noalias() += M.transpose() * gb;
            if (off) acc[0] += gb.sum();
          });
        }
        acc[p1] = fsum;
        acc[p1 + 1] = smax;
      });
    }
  }
  guard.rethrow();
  for (Index c = 0; c < part.chunks; ++c) {
    const double* acc = partial.data() + c * (p1 + 2);
    out.grad += Eigen::Map<const Vec>(acc, p1);
    out.loss += acc[p1];
    out.step_max = std::max(out.step_max, acc[p1 + 1]);
  }
  if (want_hessian) {
    out.hess.resize(p1 * p1);
    hessian(pb.X, d.data(), pb.intercept, out.hess.data(), n_threads);
  }
  return out;
}

ChunkLoo chunk_loo(const Problem& pb, LossKind loss, const Vec& beta, const Cholesky& chol,
                   LooMethod method, bool want_gradient, double inv_sw, int n_threads) {
  check_beta(pb, beta);
  if (method == LooMethod::Exact) throw InvalidInput("chunk_loo computes the closed forms only");
  if (chol.size() != pb.p1()) throw InvalidInput("the factor does not match X");
  if (want_gradient && method != LooMethod::ALO) {
    throw InvalidInput("the hypergradient needs method 'alo'");
  }
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    const Index n = pb.n(), p1 = pb.p1();
    ChunkLoo out;
    out.eta = chunk_eta(pb, beta, n_threads);
    out.res.leverages.resize(n);
    leverages(pb.X, pb.intercept, chol, out.res.leverages.data(), n_threads);
    loo_formulas<Loss>(pb, out.eta.data(), method, out.res, n_threads);
    if (want_gradient) {
      Vec cA(n), cB(n);
      for (Index i = 0; i < n; ++i) {
        const auto t = detail::alo_terms<Loss>(pb.y[i], out.eta[i], pb.weight(i),
                                               out.res.leverages[i], inv_sw, i, pb.lp);
        cA[i] = t.c * t.A;
        cB[i] = t.c * t.B;
      }
      out.r.resize(p1);
      gradient(pb.X, cA.data(), pb.intercept, out.r.data(), n_threads);
      out.S.resize(p1 * p1);
      hessian(pb.X, cB.data(), pb.intercept, out.S.data(), n_threads);
    }
    return out;
  });
}

ChunkLoo chunk_loo(const Problem& pb, LossKind loss, const Vec& beta, const Mat& H,
                   LooMethod method, bool want_gradient, double inv_sw, int n_threads) {
  if (H.rows() != pb.p1() || H.cols() != pb.p1()) {
    throw InvalidInput("H must be " + std::to_string(pb.p1()) + " x " + std::to_string(pb.p1()));
  }
  Cholesky chol;
  chol.factor(H.data(), pb.p1());
  return chunk_loo(pb, loss, beta, chol, method, want_gradient, inv_sw, n_threads);
}

Vec chunk_adjoint(const Problem& pb, LossKind loss, const Vec& beta, const Mat& M, int n_threads) {
  check_beta(pb, beta);
  const Index n = pb.n(), p1 = pb.p1();
  if (M.rows() != p1 || M.cols() != p1) throw InvalidInput("M does not match X");
  Vec out = Vec::Zero(p1);
  // s_i = w_i l'''_i q_i: w l''' per loss (none for a constant curvature: l''' = 0), the
  // quadratic forms q_i = x~_i^T M x~_i in one loss-independent pass
  Vec eta;
  Vec s(n);
  const bool curved = dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    if (Loss::constant_curvature) return false;
    eta = chunk_eta(pb, beta, n_threads);
#pragma omp parallel for schedule(static) num_threads(threads_for(n_threads, 16.0 * double(n)))
    for (Index i = 0; i < n; ++i) s[i] = pb.weight(i) * Loss::d3(pb.y[i], eta[i], pb.lp);
    return true;
  });
  if (!curved) return out;
  const Index B = block_rows(p1);
  const Index nblocks = (n + B - 1) / B;
  ExceptionCatcher guard;
#pragma omp parallel num_threads(threads_for(n_threads, 2.0 * double(n) * double(p1 * p1)))
  {
    Mat Z(p1, B), W(p1, B);
#pragma omp for schedule(static)
    for (Index blk = 0; blk < nblocks; ++blk) {
      guard.run([&] {
        interrupt::check();
        const Index i0 = blk * B, i1 = std::min(n, i0 + B), m = i1 - i0;
        pb.X.pack_rows(i0, i1, nullptr, pb.intercept, Z.data());
        W.leftCols(m).noalias() = M * Z.leftCols(m);
        for (Index k = 0; k < m; ++k) s[i0 + k] *= Z.col(k).dot(W.col(k));
      });
    }
  }
  guard.rethrow();
  gradient(pb.X, s.data(), pb.intercept, out.data(), n_threads);
  return out;
}

ChunkFolds chunk_folds(const Problem& pb, LossKind loss, const Vec& beta, const int* fold, Index K,
                       int n_threads) {
  check_beta(pb, beta);
  const Index n = pb.n(), p1 = pb.p1();
  if (K < 1) throw InvalidInput("the number of folds must be >= 1");
  for (Index i = 0; i < n; ++i) {
    if (fold[i] < 0 || fold[i] >= K) {
      throw InvalidInput("fold label " + std::to_string(fold[i]) + " is outside [0, " +
                         std::to_string(K) + ")");
    }
  }
  const Vec eta = chunk_eta(pb, beta, n_threads);
  Vec g(n), d(n);
  dispatch_loss(loss, [&](auto L) {
    detail::derivatives<decltype(L)>(pb, eta.data(), g.data(), d.data(), n_threads);
  });
  std::vector<std::vector<Index>> rows(static_cast<size_t>(K));
  for (Index i = 0; i < n; ++i) rows[static_cast<size_t>(fold[i])].push_back(i);
  ChunkFolds out;
  out.hess = Vec::Zero(p1 * p1 * K);
  out.grad = Vec::Zero(p1 * K);
  const Index B = block_rows(p1);
  ExceptionCatcher guard;
#pragma omp parallel num_threads(threads_for(n_threads, double(n) * double(p1 * p1)))
  {
    Mat Z(p1, B);
    Vec sc(B), gs(B);
#pragma omp for schedule(dynamic, 1)
    for (Index k = 0; k < K; ++k) {
      guard.run([&] {
        const auto& idx = rows[static_cast<size_t>(k)];
        const Index m_all = static_cast<Index>(idx.size());
        Eigen::Map<Mat> Hk(out.hess.data() + k * p1 * p1, p1, p1);
        Eigen::Map<Vec> gk(out.grad.data() + k * p1, p1);
        for (Index a = 0; a < m_all; a += B) {
          interrupt::check();
          const Index m = std::min(B, m_all - a);
          for (Index t = 0; t < m; ++t) {
            const Index i = idx[static_cast<size_t>(a + t)];
            sc[t] = sqrt_curvature(d[i]);
            gs[t] = g[i];
          }
          pb.X.pack_indices(idx.data() + a, m, nullptr, pb.intercept, Z.data());
          gk.noalias() += Z.leftCols(m) * gs.head(m);
          Z.leftCols(m) = Z.leftCols(m) * sc.head(m).asDiagonal();
          Hk.selfadjointView<Eigen::Lower>().rankUpdate(Z.leftCols(m));
        }
        const Mat full = Hk.selfadjointView<Eigen::Lower>();
        Hk = full;
      });
    }
  }
  guard.rethrow();
  return out;
}

ChunkRefits chunk_refits(const Problem& pb, LossKind loss, const Mat& beta, const int* exclude,
                         const int* hess_cols, Index n_hess, int n_threads) {
  const Index n = pb.n(), p1 = pb.p1(), B = beta.cols();
  if (beta.rows() != p1) {
    throw InvalidInput("beta has " + std::to_string(beta.rows()) + " rows, expected " +
                       std::to_string(p1));
  }
  for (Index j = 0; j < B; ++j) {
    if (exclude[j] < -1 || exclude[j] >= n) {
      throw InvalidInput("excluded row " + std::to_string(exclude[j]) + " is outside [-1, " +
                         std::to_string(n) + ")");
    }
  }
  for (Index k = 0; k < n_hess; ++k) {
    if (hess_cols[k] < 0 || hess_cols[k] >= B) {
      throw InvalidInput("Hessian column " + std::to_string(hess_cols[k]) + " is outside [0, " +
                         std::to_string(B) + ")");
    }
  }
  RefitRows refit = nullptr;
  Derivatives derivs = nullptr;
  dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    refit = &refit_rows<Loss>;
    derivs = &detail::derivatives<Loss>;
  });
  ChunkRefits out;
  out.loss = Vec::Zero(B);
  out.grad = Mat::Zero(p1, B);
  const Index R = block_rows(std::max(p1, B));
  const Index nblocks = (n + R - 1) / R;
  const int nt =
      threads_for(n_threads, 4.0 * double(n) * double(p1) * double(std::max<Index>(1, B)));
  std::vector<Vec> loss_parts(static_cast<size_t>(nt), Vec::Zero(B));
  std::vector<Mat> grad_parts(static_cast<size_t>(nt), Mat::Zero(p1, B));
  ExceptionCatcher guard;
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    const size_t tid = static_cast<size_t>(omp_get_thread_num());
#else
    const size_t tid = 0;
#endif
    Mat Z(p1, R), E(R, B);
    Vec& lp = loss_parts[tid];
    Mat& gp = grad_parts[tid];
#pragma omp for schedule(static)
    for (Index blk = 0; blk < nblocks; ++blk) {
      guard.run([&] {
        interrupt::check();
        const Index i0 = blk * R, i1 = std::min(n, i0 + R), m = i1 - i0;
        pb.X.pack_rows(i0, i1, nullptr, pb.intercept, Z.data());
        E.topRows(m).noalias() = Z.leftCols(m).transpose() * beta;
        refit(pb, i0, m, E.data(), R, B, exclude, lp.data());
        gp.noalias() += Z.leftCols(m) * E.topRows(m);
      });
    }
  }
  guard.rethrow();
  for (size_t t = 0; t < loss_parts.size(); ++t) {  // in thread order: deterministic
    out.loss += loss_parts[t];
    out.grad += grad_parts[t];
  }
  out.hess.resize(p1 * p1 * n_hess);
  Vec eta(n), g(n), d(n);
  for (Index k = 0; k < n_hess; ++k) {
    const Index j = hess_cols[k];
    linear_predictor(pb.X, beta.col(j).data(), pb.intercept, eta.data(), n_threads);
    pb.add_offset(eta.data());
    derivs(pb, eta.data(), g.data(), d.data(), n_threads, exclude[j]);
    hessian(pb.X, d.data(), pb.intercept, out.hess.data() + k * p1 * p1, n_threads);
  }
  return out;
}

}  // namespace aloocv
