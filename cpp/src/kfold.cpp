#include "aloocv/kfold.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "aloocv/blas.hpp"
#include "aloocv/enet.hpp"
#include "aloocv/hessian.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

namespace {

SampleSets members(const int* fold, Index n, Index K) {
  if (K < 2) throw InvalidInput("K-fold needs at least 2 folds, got " + std::to_string(K));
  SampleSets out(static_cast<size_t>(K));
  for (Index i = 0; i < n; ++i) {
    if (fold[i] < 0 || fold[i] >= K) {
      throw InvalidInput("fold label " + std::to_string(fold[i]) + " of sample " +
                         std::to_string(i) + " is outside [0, " + std::to_string(K) + ")");
    }
    out[static_cast<size_t>(fold[i])].push_back(i);
  }
  for (Index k = 0; k < K; ++k) {
    if (out[static_cast<size_t>(k)].empty()) {
      throw InvalidInput("fold " + std::to_string(k) + " is empty");
    }
  }
  return out;
}

// Every set non-empty, in range and without repeated samples; returns the offsets of the
// sets in the concatenated outputs (K + 1 entries).
std::vector<Index> check_sets(const SampleSets& sets, Index n) {
  if (sets.empty()) throw InvalidInput("no held-out sets");
  std::vector<Index> offset(sets.size() + 1, 0);
  std::vector<Index> seen(static_cast<size_t>(n), -1);
  for (size_t k = 0; k < sets.size(); ++k) {
    if (sets[k].empty()) throw InvalidInput("held-out set " + std::to_string(k) + " is empty");
    for (Index i : sets[k]) {
      if (i < 0 || i >= n) {
        throw InvalidInput("held-out set " + std::to_string(k) + ": sample " + std::to_string(i) +
                           " is outside [0, " + std::to_string(n) + ")");
      }
      if (seen[static_cast<size_t>(i)] == static_cast<Index>(k)) {
        throw InvalidInput("held-out set " + std::to_string(k) + " holds sample " +
                           std::to_string(i) + " twice");
      }
      seen[static_cast<size_t>(i)] = static_cast<Index>(k);
    }
    offset[k + 1] = offset[k] + static_cast<Index>(sets[k].size());
  }
  return offset;
}

// Concatenated per-set outputs back to per-sample ones (the sets partition the samples).
KFoldOutput scatter(const SampleSets& sets, Index n, KFoldOutput flat) {
  KFoldOutput out = flat;
  out.losses.resize(n);
  out.predictions.resize(n);
  Index pos = 0;
  for (const auto& S : sets) {
    for (Index i : S) {
      out.losses[i] = flat.losses[pos];
      out.predictions[i] = flat.predictions[pos];
      ++pos;
    }
  }
  return out;
}

[[noreturn]] void throw_fold_singular(Index k, Index q, const std::string& detail) {
  std::ostringstream msg;
  msg << "the Hessian without fold " << k << " (" << q << (q == 1 ? " sample" : " samples")
      << ") is singular" << detail
      << ": the remaining samples do not determine the fit; use a larger penalty or smaller "
         "folds";
  throw SingularHessian(msg.str());
}

// Per-thread scratch of the approximate folds.
struct FoldScratch {
  std::vector<double> pack, zt, kmat;
  Vec g, s, c, t, r, bS;
  Mat HS;
  Cholesky chol;
};

// body(k, w) for every fold k on nt OpenMP threads, each thread with its own scratch w;
// the first exception (an interrupt included) stops the other folds and is rethrown here.
// Compiled once, the bodies called per fold.
void for_each_fold(Index K, int nt, FunctionRef<void(Index, FoldScratch&)> body) {
  ExceptionCatcher guard;
#pragma omp parallel num_threads(nt)
  {
    FoldScratch w;
#pragma omp for schedule(dynamic, 1)
    for (Index k = 0; k < K; ++k) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        body(k, w);
      });
    }
  }
  guard.rethrow();
}

// q x q (Woodbury) form for the fold S: writes eta~ and the losses of its samples.
void woodbury_fold(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                   const Columns& cols, Index q1, Index k, const std::vector<Index>& S, Index pos,
                   FoldScratch& w, Vec& pred, Vec& losses) {
  const Index q = static_cast<Index>(S.size());
  w.pack.resize(static_cast<size_t>(q1 * q));
  pb.X.pack_indices(S.data(), q, nullptr, pb.intercept, w.pack.data(), cols);
  blas::trsm_lower(q1, q, st.chol.lower(), q1, w.pack.data(), q1);  // Z_S = L^{-1} X~_S^T
  // K_S = Z_S^T Z_S by a SYRK of the (q x q1) transpose
  w.zt.resize(static_cast<size_t>(q * q1));
  Eigen::Map<const Mat> Z(w.pack.data(), q1, q);
  Eigen::Map<Mat> Zt(w.zt.data(), q, q1);
  Zt = Z.transpose();
  w.kmat.resize(static_cast<size_t>(q * q));
  blas::syrk_lower(q, q1, w.zt.data(), q, 0.0, w.kmat.data(), q);
  Eigen::Map<Mat> Km(w.kmat.data(), q, q);
  Km.triangularView<Eigen::StrictlyUpper>() = Km.transpose();
  w.g.resize(q);
  w.s.resize(q);
  for (Index a = 0; a < q; ++a) {
    const Index i = S[static_cast<size_t>(a)];
    const double wi = pb.weight(i);
    w.g[a] = wi == 0.0 ? 0.0 : wi * loss.d1(pb.y[i], st.eta[i], pb.lp);
    w.s[a] = wi == 0.0 ? 0.0 : sqrt_curvature(wi * loss.d2(pb.y[i], st.eta[i], pb.lp));
  }
  w.c.noalias() = Km * w.g;  // c = K g
  // M = I - diag(s) K diag(s), factored in place of w.HS
  w.HS = -(w.s.asDiagonal() * Km * w.s.asDiagonal());
  w.HS.diagonal().array() += 1.0;
  try {
    w.chol.factor(w.HS.data(), q);
  } catch (const SingularHessian&) {
    throw_fold_singular(k, q, " (I - D^1/2 K D^1/2 is not positive definite)");
  }
  // M has unit scale (its eigenvalues lie in (0, 1]): a pivot at rounding level means
  // the fold-out Hessian is numerically singular (the q = 1 case is the LOO test
  // 1 - d_i h_i > 64 eps).
  const double tiny = 64 * std::numeric_limits<double>::epsilon();
  Eigen::Map<const Mat> LM(w.chol.lower(), q, q);
  for (Index a = 0; a < q; ++a) {
    const double piv2 = LM(a, a) * LM(a, a);
    if (!(piv2 > tiny)) {
      std::ostringstream d;
      d << " (pivot " << piv2 << " of I - D^1/2 K D^1/2)";
      throw_fold_singular(k, q, d.str());
    }
  }
  w.t = w.s.cwiseProduct(w.c);
  w.chol.solve(w.t.data());  // M^{-1} (s o c)
  w.t.array() *= w.s.array();
  w.c.noalias() += Km * w.t;  // K g + K S M^{-1} S K g = K (I - D K)^{-1} g
  for (Index a = 0; a < q; ++a) {
    const Index i = S[static_cast<size_t>(a)];
    const double e = st.eta[i] + w.c[a];
    pred[pos + a] = e;
    losses[pos + a] = loss.value(pb.y[i], e, pb.lp);
  }
}

// The fold S's blocks at beta_hat: G = X~_S^T D_S X~_S (lower triangle, q1 x q1, into
// G) and r = X~_S^T g_S, from one gather of its rows per row block.
void fold_blocks(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                 const Columns& cols, Index q1, const std::vector<Index>& S, FoldScratch& w,
                 double* G, Vec& r) {
  const Index q = static_cast<Index>(S.size());
  const Index B = block_rows(q1);
  w.pack.resize(static_cast<size_t>(q1 * std::min(B, q)));
  r = Vec::Zero(q1);
  for (Index a = 0; a < q; a += B) {
    const Index m = std::min(B, q - a);
    // one gather of the block's rows: X~_S^T g_S from them, then scaled in place by
    // sqrt(d_i) for X~_S^T D_S X~_S (the same products as a scaled gather)
    pb.X.pack_indices(S.data() + a, m, nullptr, pb.intercept, w.pack.data(), cols);
    Eigen::Map<Mat> Z(w.pack.data(), q1, m);
    for (Index t = 0; t < m; ++t) {
      const Index i = S[static_cast<size_t>(a + t)];
      const double wi = pb.weight(i);
      if (wi != 0.0) r.noalias() += (wi * loss.d1(pb.y[i], st.eta[i], pb.lp)) * Z.col(t);
    }
    for (Index t = 0; t < m; ++t) {
      const Index i = S[static_cast<size_t>(a + t)];
      const double wi = pb.weight(i);
      Z.col(t) *= wi == 0.0 ? 0.0 : sqrt_curvature(wi * loss.d2(pb.y[i], st.eta[i], pb.lp));
    }
    blas::syrk_lower(q1, m, w.pack.data(), q1, a == 0 ? 0.0 : 1.0, G, q1);
  }
}

// p x p form for the fold S, given w.HS = H_{-S} (lower triangle) and w.r = X~_S^T g_S:
// beta~_S = beta_hat + H_{-S}^{-1} X~_S^T g_S and the held-out predictions and losses.
void downdated_step(const detail::SampleLoss& loss, const Problem& pb, const Columns& cols,
                    Index q1, Index k, const std::vector<Index>& S, Index pos, const Vec& bq,
                    FoldScratch& w, Vec& pred, Vec& losses) {
  const Index q = static_cast<Index>(S.size());
  const Index B = block_rows(q1);
  w.HS.triangularView<Eigen::StrictlyUpper>() = w.HS.transpose();
  try {
    w.chol.factor(w.HS.data(), q1);
  } catch (const SingularHessian&) {
    throw_fold_singular(k, q, "");
  }
  w.chol.solve(w.r.data());
  w.bS = bq + w.r;  // beta~_S
  w.pack.resize(static_cast<size_t>(q1 * std::min(B, q)));
  for (Index a = 0; a < q; a += B) {
    const Index m = std::min(B, q - a);
    pb.X.pack_indices(S.data() + a, m, nullptr, pb.intercept, w.pack.data(), cols);
    Eigen::Map<const Mat> Z(w.pack.data(), q1, m);
    for (Index t = 0; t < m; ++t) {
      const Index i = S[static_cast<size_t>(a + t)];
      const double e = Z.col(t).dot(w.bS) + pb.offset_at(i);
      pred[pos + a + t] = e;
      losses[pos + a + t] = loss.value(pb.y[i], e, pb.lp);
    }
  }
}

// p x p form for the fold S with H, the Hessian at beta_hat: H_{-S} = H - X~_S^T D_S X~_S.
void downdate_fold(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                   const Columns& cols, Index q1, Index k, const std::vector<Index>& S, Index pos,
                   const Mat& H, const Vec& bq, FoldScratch& w, Vec& pred, Vec& losses) {
  w.HS.resize(q1, q1);  // X~_S^T D_S X~_S (lower), then H_{-S} = H - that
  fold_blocks(loss, pb, st, cols, q1, S, w, w.HS.data(), w.r);
  w.HS = H - w.HS;  // the lower triangle is what counts
  downdated_step(loss, pb, cols, q1, k, S, pos, bq, w, pred, losses);
}

// Whether the approximate route takes the fold-wise end (see foldwise_impl): held-out
// sets that partition the samples (then their blocks sum to H) and meet
// foldwise_end_sizes.
bool foldwise_end(const detail::SampleLoss& loss, const Problem& pb, const SampleSets& sets) {
  const Index n = pb.n();
  std::vector<Index> sizes;
  sizes.reserve(sets.size());
  std::vector<char> seen(static_cast<size_t>(n), 0);
  Index total = 0;
  for (const auto& S : sets) {
    for (Index i : S) {
      if (i < 0 || i >= n || seen[static_cast<size_t>(i)]) return false;
      seen[static_cast<size_t>(i)] = 1;
    }
    sizes.push_back(static_cast<Index>(S.size()));
    total += sizes.back();
  }
  return total == n && foldwise_end_sizes(loss.ops.constant_curvature, pb.has_l1(), pb.p1(),
                                          sizes.data(), static_cast<Index>(sizes.size()));
}

// The fold-wise end (holdout_foldwise_end): the fit's Hessian at beta_hat is the sum of
// the folds' blocks plus the penalty, H = sum_k X~_{S_k}^T D X~_{S_k} + P, so one pass over
// the folds' rows gives H and every downdate H_{-S_k} = H - X~_{S_k}^T D X~_{S_k}: the fit
// need not end on a fresh Hessian (that pass would be the same work again).
KFoldOutput foldwise_impl(const detail::SampleLoss& loss, const Problem& pb, FitState& st,
                          const SampleSets& groups, const std::vector<Index>& offset,
                          int n_threads) {
  const Index K = static_cast<Index>(groups.size()), q1 = pb.p1();
  const Columns cols;
  const double b = double(q1);
  const double work = double(pb.n()) * b * b + double(K) * b * b * b / 3;
  const int nt = static_cast<int>(std::min<Index>(threads_for(n_threads, work), K));
  std::vector<Mat> G(static_cast<size_t>(K));
  std::vector<Vec> r(static_cast<size_t>(K));
  KFoldOutput out;
  out.losses.resize(offset.back());
  out.predictions.resize(offset.back());
  for_each_fold(K, nt, [&](Index k, FoldScratch& w) {
    Mat& Gk = G[static_cast<size_t>(k)];
    Gk.setZero(q1, q1);  // SYRK writes the lower triangle
    fold_blocks(loss, pb, st, cols, q1, groups[static_cast<size_t>(k)], w, Gk.data(),
                r[static_cast<size_t>(k)]);
  });
  // H at beta_hat (lower triangle), summed in fold order: the same for any thread count
  Mat H = G[0];
  for (Index k = 1; k < K; ++k) H += G[static_cast<size_t>(k)];
  H.diagonal() += pb.pen;
  for_each_fold(K, nt, [&](Index k, FoldScratch& w) {
    w.HS = H - G[static_cast<size_t>(k)];
    w.r = r[static_cast<size_t>(k)];
    downdated_step(loss, pb, cols, q1, k, groups[static_cast<size_t>(k)],
                   offset[static_cast<size_t>(k)], st.beta, w, out.predictions, out.losses);
  });
  return out;
}

KFoldOutput approx_impl(const detail::SampleLoss& loss, const Problem& pb, FitState& st,
                        const SampleSets& groups, int n_threads) {
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const auto offset = check_sets(groups, n);
  const Index K = static_cast<Index>(groups.size());
  if (foldwise_end(loss, pb, groups)) return foldwise_impl(loss, pb, st, groups, offset, n_threads);
  detail::fresh_factor(loss.ops, pb, st, n_threads);
  const Columns cols = st.columns();
  const Index q1 = (cols.all() ? pb.X.p : cols.size) + off;
  std::vector<char> small(static_cast<size_t>(K));
  bool any_large = false;
  double work = 0.0;
  KFoldOutput out;
  for (Index k = 0; k < K; ++k) {
    const Index q = static_cast<Index>(groups[static_cast<size_t>(k)].size());
    const bool wb = kfold_use_woodbury(q, q1);
    small[static_cast<size_t>(k)] = wb;
    any_large = any_large || !wb;
    out.n_woodbury += wb ? 1 : 0;
    const double a = double(q), b = double(q1);
    work += wb ? a * b * b + a * a * b + a * a * a / 3 : a * b * b + b * b * b / 3;
  }
  // The p x p form needs H itself: rebuilt once from the factor (H = L L^T).
  Mat H;
  Vec bq;
  if (any_large) {
    Eigen::Map<const Mat> L(st.chol.lower(), q1, q1);
    H = L.triangularView<Eigen::Lower>() * L.transpose();
    bq.resize(q1);  // beta in the factor's coordinates
    if (pb.intercept) bq[0] = st.beta[0];
    for (Index j = 0; j < q1 - off; ++j)
      bq[off + j] = st.beta[off + (cols.all() ? j : cols.cols[j])];
  }
  out.losses.resize(offset.back());
  out.predictions.resize(offset.back());
  const int nt = static_cast<int>(std::min<Index>(threads_for(n_threads, work), K));
  for_each_fold(K, nt, [&](Index k, FoldScratch& w) {
    const auto& S = groups[static_cast<size_t>(k)];
    const Index pos = offset[static_cast<size_t>(k)];
    if (small[static_cast<size_t>(k)]) {
      woodbury_fold(loss, pb, st, cols, q1, k, S, pos, w, out.predictions, out.losses);
    } else {
      downdate_fold(loss, pb, st, cols, q1, k, S, pos, H, bq, w, out.predictions, out.losses);
    }
  });
  return out;
}

KFoldOutput exact_impl(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                       const SampleSets& groups, const FitOptions& opt) {
  const Index n = pb.n(), p1 = pb.p1();
  const auto offset = check_sets(groups, n);
  const Index K = static_cast<Index>(groups.size());
  KFoldOutput out;
  out.losses.resize(offset.back());
  out.predictions.resize(offset.back());
  Vec w(n);
  for (Index i = 0; i < n; ++i) w[i] = pb.weight(i);
  const int nt = resolve_threads(opt.n_threads);
  // Folds in parallel (each refit on one thread) when there are enough of them to keep
  // every thread busy and the refits' O(n) buffers fit a memory budget; otherwise one
  // after the other, each refit with all threads. Fits do not depend on their thread
  // count (fixed-chunk reductions), so neither does the result.
  const double per_fit = 12.0 * double(n) + 4.0 * double(p1) * double(p1);  // doubles
  // (and not for small problems: below kSerialFlops in all a team costs more than it saves)
  const double work = double(K) * double(n) * double(p1) * double(p1);
  const bool over_folds =
      threads_for(nt, work) > 1 && K >= nt && per_fit * nt <= 128.0 * 1024 * 1024;
  FitOptions fopt = opt;
  if (over_folds) fopt.n_threads = 1;
  auto refit = [&](Index k) -> bool {  // true when converged
    interrupt::check();
    const auto& S = groups[static_cast<size_t>(k)];
    Vec wk = w;
    for (Index i : S) wk[i] = 0.0;
    if (!(wk.sum() > 0.0)) {
      throw InvalidInput("the training part without fold " + std::to_string(k) +
                         " has zero total sample weight");
    }
    Problem pk = pb;
    pk.w = wk.data();
    FitState r;
    try {
      r = pb.has_l1() ? detail::enet_fit(loss.ops, pk, fopt, &st.beta, -1, false)
                      : detail::newton_fit(loss.ops, pk, fopt, &st.beta);
    } catch (const SingularHessian&) {  // the refit's Hessian, named by its fold
      throw_fold_singular(k, static_cast<Index>(S.size()), "");
    }
    Index pos = offset[static_cast<size_t>(k)];
    for (Index i : S) {
      out.predictions[pos] = r.eta[i];
      out.losses[pos] = loss.value(pb.y[i], r.eta[i], pb.lp);
      ++pos;
    }
    return r.converged;
  };
  Index not_converged = 0;
  if (!over_folds) {
    for (Index k = 0; k < K; ++k) not_converged += refit(k) ? 0 : 1;
    out.n_not_converged = not_converged;
    return out;
  }
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(+ : not_converged)
  for (Index k = 0; k < K; ++k) {
    if (guard.failed()) continue;
    interrupt::Share share(ictx);
    guard.run([&] { not_converged += refit(k) ? 0 : 1; });
  }
  guard.rethrow();
  out.n_not_converged = not_converged;
  return out;
}

}  // namespace

bool foldwise_end_sizes(bool constant_curvature, bool has_l1, Index p1, const Index* sizes,
                        Index K) {
  if (constant_curvature || has_l1 || K < 1) return false;
  if (double(K) * double(p1) * double(p1) * sizeof(double) > kFoldBlocksBudget) return false;
  for (Index k = 0; k < K; ++k) {
    if (sizes[k] < 1 || kfold_use_woodbury(sizes[k], p1)) return false;
  }
  return true;
}

bool foldwise_end_sizes(LossKind loss, bool has_l1, Index p1, const Index* sizes, Index K) {
  return dispatch_loss(loss, [&](auto L) {
    return foldwise_end_sizes(decltype(L)::constant_curvature, has_l1, p1, sizes, K);
  });
}

bool holdout_foldwise_end(const Problem& pb, LossKind loss, const SampleSets& sets) {
  return dispatch_loss(
      loss, [&](auto L) { return foldwise_end(detail::sample_loss<decltype(L)>(), pb, sets); });
}

bool kfold_foldwise_end(const Problem& pb, LossKind loss, const int* fold, Index K) {
  if (K < 2) return false;
  for (Index i = 0; i < pb.n(); ++i) {
    if (fold[i] < 0 || fold[i] >= K) return false;  // kfold_approx reports it
  }
  SampleSets sets(static_cast<size_t>(K));
  for (Index i = 0; i < pb.n(); ++i) sets[static_cast<size_t>(fold[i])].push_back(i);
  for (const auto& S : sets) {
    if (S.empty()) return false;
  }
  return holdout_foldwise_end(pb, loss, sets);
}

KFoldOutput holdout_approx(const Problem& pb, LossKind loss, FitState& st, const SampleSets& sets,
                           int n_threads) {
  return dispatch_loss(loss, [&](auto L) {
    return approx_impl(detail::sample_loss<decltype(L)>(), pb, st, sets, n_threads);
  });
}

KFoldOutput holdout_exact(const Problem& pb, LossKind loss, const FitState& st,
                          const SampleSets& sets, const FitOptions& opt) {
  return dispatch_loss(loss, [&](auto L) {
    return exact_impl(detail::sample_loss<decltype(L)>(), pb, st, sets, opt);
  });
}

KFoldOutput kfold_approx(const Problem& pb, LossKind loss, FitState& st, const int* fold, Index K,
                         int n_threads) {
  const SampleSets sets = members(fold, pb.n(), K);
  return scatter(sets, pb.n(), holdout_approx(pb, loss, st, sets, n_threads));
}

KFoldOutput kfold_exact(const Problem& pb, LossKind loss, const FitState& st, const int* fold,
                        Index K, const FitOptions& opt) {
  const SampleSets sets = members(fold, pb.n(), K);
  return scatter(sets, pb.n(), holdout_exact(pb, loss, st, sets, opt));
}

}  // namespace aloocv
