#include "aloocv/loo.hpp"
#include "aloocv/hypergrad.hpp"

#include <limits>

namespace aloocv {

// The one compiled copy of the closed forms per loss (declared extern in loo.hpp).
#define ALOOCV_LOO_DEFINE(T) ALOOCV_LOO_INSTANCES(, T)
ALOOCV_FOR_EACH_LOSS(ALOOCV_LOO_DEFINE)
#undef ALOOCV_LOO_DEFINE

namespace detail {
Vec blocked_reduce(const Problem& pb, Columns cols, Index q1, int nt, Index stride,
                   double flops_per_row, BlockBody body) {
  const Index n = pb.n();
  const Partition part{n, reduction_chunks(n, std::max<Index>(stride, 1), nt, 256)};
  const Index B = std::min(block_rows(q1), std::max<Index>(1, n));
  const int threads = threads_for(nt, flops_per_row * double(n));
  Vec out = Vec::Zero(stride);
  // The chunks run in waves of one chunk per thread (as hessian()'s): a wave's partials
  // are added to `out` in chunk order before the next wave starts, so that `threads`
  // partials are held (not one per chunk: 64 x 650 KB, zeroed and faulted in on every
  // exact hypergradient at p = 200), with the sums of the chunks in chunk order.
  const Index wave = std::min<Index>(part.chunks, std::max(1, threads));
  std::vector<double> partial(static_cast<size_t>(wave * stride));
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(threads)
  {
    interrupt::Share share(ictx);
    Scratch s;
    guard.run([&] { s.ensure(q1, B); });
    for (Index w0 = 0; w0 < part.chunks; w0 += wave) {
      const Index w1 = std::min(part.chunks, w0 + wave);
#pragma omp for schedule(dynamic, 1)
      for (Index c = w0; c < w1; ++c) {
        if (guard.failed()) continue;
        guard.run([&] {
          interrupt::check();
          double* P = partial.data() + (c - w0) * stride;
          std::fill(P, P + stride, 0.0);
          for (Index i0 = part.begin(c); i0 < part.begin(c + 1); i0 += B) {
            const Index i1 = std::min(part.begin(c + 1), i0 + B), m = i1 - i0;
            pb.X.pack_rows(i0, i1, nullptr, pb.intercept, s.pack, cols);
            body(P, i0, m, s.pack, s);
          }
        });
      }
      // (implicit barrier) the wave's partials into out in chunk order, parallel over
      // the entries
#pragma omp for schedule(static)
      for (Index j = 0; j < stride; ++j) {
        if (guard.failed()) continue;
        for (Index c = w0; c < w1; ++c)
          out[j] += partial[static_cast<size_t>((c - w0) * stride + j)];
      }
    }
  }
  guard.rethrow();
  return out;
}

HyperGradient sample_gradient_impl(const Problem& pb, const FitState& st, const Index* idx, Index m,
                                   double& acv, bool curved, BatchTermsFn terms) {
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size, q1 = q + off;
  const double inv_sw = 1.0 / pb.weight_sum();
  for (Index t = 0; t < m; ++t) {
    if (idx[t] < 0 || idx[t] >= n) throw InvalidInput("sample index out of range");
  }
  if (curved && m < 2) {
    throw InvalidInput(
        "an unbiased minibatch gradient of a non-quadratic loss needs at least 2 samples "
        "(its bilinear term takes two independent draws)");
  }
  Mat Xb(q1, std::max<Index>(m, 1));
  pb.X.pack_indices(idx, m, nullptr, pb.intercept, Xb.data(), cols);
  Mat Ab = Xb.leftCols(m);
  for (Index k = 0; k < m; ++k) st.chol.solve(Ab.col(k).data());
  BatchTerms t;
  terms(pb, st, idx, m, Xb, Ab, inv_sw, t);
  const Vec &cA = t.cA, &cB = t.cB, &l3w = t.l3w;
  const double loss = t.loss, sw = t.sw;
  const double scale = double(n) / double(m);
  Vec rs = scale * (Xb.leftCols(m) * cA);
  Vec diagM = scale * (Ab.array().square().matrix() * cB);
  if (curved) {
    const Index m1 = m / 2, m2 = m - m1;
    // q_j estimate from the first half: sum_{i in half 1} (n/m1) c_i B_i (a_i^T x~_j)^2
    const Mat G = Ab.leftCols(m1).transpose() * Xb.middleCols(m1, m2);  // m1 x m2
    const Vec qj =
        (double(n) / double(m1)) * (G.array().square().matrix().transpose() * cB.head(m1));
    rs -= (double(n) / double(m2)) *
          (Xb.middleCols(m1, m2) * (l3w.tail(m2).array() * qj.array()).matrix());
  }
  Vec u = rs;
  st.chol.solve(u.data());
  HyperGradient g;
  g.l2 = Vec::Zero(pb.X.p);
  g.l1 = Vec::Zero(pb.X.p);
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k], kk = off + k;
    const double b = st.beta[off + j];
    g.l2[j] = -(u[kk] * b + diagM[kk]);
    g.l1[j] = -u[kk] * (b > 0.0 ? 1.0 : (b < 0.0 ? -1.0 : 0.0));
  }
  acv = sw > 0.0 ? loss / sw : 0.0;
  return g;
}

HyperTangents tangents_block(const Problem& pb, const FitState& st, const LooResult& alo,
                             const AdjointState& a, const Mat& D2, const Mat& D1, int n_threads,
                             const std::vector<TangentTerms>& terms, bool curved) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size, q1 = q + off;
  const Index md = D2.cols();
  const double inv_sw = a.inv_sw;
  // directions on the factor's coordinates
  Mat del = Mat::Zero(q1, md), eps = Mat::Zero(q1, md);
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k];
    del.row(off + k) = D2.row(j);
    eps.row(off + k) = D1.row(j);
  }
  // dbeta = -H^{-1} (delta o beta + epsilon o sign)
  Mat dB = -(del.array().colwise() * a.bq.array() + eps.array().colwise() * a.sgn.array()).matrix();
  detail::solve_cols(st, dB);
  // F1: deta = X~ dbeta, dH_k = X~^T diag(w l''' deta_k) X~ (+ diag(delta_k) below)
  Mat dEta(n, md);
  const Index s1 = curved ? 2 * q1 * q1 * md : 0;
  Vec red1 = detail::blocked_reduce(
      pb, cols, q1, nt, s1, (curved ? double(md) : 0.0) * double(q1 * q1) + 2.0 * double(q1 * md),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        Eigen::Map<const Mat> Zm(Z, q1, m);
        dEta.middleRows(i0, m).noalias() = Zm.transpose() * dB;
        if (!curved) return;
        for (Index k = 0; k < md; ++k) {
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            s.wa[r] = pb.weight(i) * terms[static_cast<size_t>(i)].l3 * dEta(i, k);
          }
          double* Pk = P + k * 2 * q1 * q1;
          detail::signed_syrk(q1, m, Z, s.wa, Pk, Pk + q1 * q1, s);
        }
      });
  std::vector<Mat> dH(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) {
    dH[k] = curved ? detail::signed_sum(red1.data() + k * 2 * q1 * q1, q1) : Mat::Zero(q1, q1);
    dH[k].diagonal() += del.col(k);
  }
  // F2: z_i = L^{-1} x~_i, dh_i = -a_i^T dH a_i = -z_i^T E z_i (E = L^{-1} dH L^{-T}), d(cA)_i,
  // N_k = sum d(cB)_i a_i a_i^T (accumulated in z-space)
  std::vector<Mat> E(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) E[k] = detail::to_z_space(st, dH[k]);
  Mat dcA(n, md);
  const Index s2 = 2 * q1 * q1 * md;
  const Mat Linv = lower_inverse_for_trmm(st.chol);  // the leverage pass's DTRMM rule
  Vec red2 = detail::blocked_reduce(
      pb, cols, q1, nt, s2, (4.0 + 3.0 * double(md)) * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        double* wt = s.wb;
        detail::solve_rows(st, q1, m, Z, s.wa, false, Linv);
        for (Index k = 0; k < md; ++k) {
          blas::gemm(q1, m, q1, E[k].data(), q1, Z, q1, s.copy, q1);
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            const double w = pb.weight(i);
            const double hi = alo.leverages[i];
            const double dh = -Eigen::Map<const Vec>(Z + r * q1, q1)
                                   .dot(Eigen::Map<const Vec>(s.copy + r * q1, q1));
            double dca = 0.0, dcb = 0.0;
            detail::alo_tangent(terms[static_cast<size_t>(i)], w, hi, inv_sw, dEta(i, k), dh, dca,
                                dcb);
            dcA(i, k) = dca;
            wt[r] = dcb;
          }
          double* Pk = P + k * 2 * q1 * q1;
          detail::signed_syrk(q1, m, Z, wt, Pk, Pk + q1 * q1, s);
        }
      });
  // dM_k = N_k - T_k - T_k^T with T_k = H^{-1} dH_k M
  std::vector<Mat> dM(static_cast<size_t>(md));
  for (Index k = 0; k < md; ++k) {
    Mat T = dH[k] * a.M;
    detail::solve_cols(st, T);
    dM[k] = detail::to_a_space(st, detail::signed_sum(red2.data() + k * 2 * q1 * q1, q1)) - T -
            T.transpose();
  }
  // F3: dq_i = x~_i^T dM x~_i, dz = d(cA) - w (l'''' deta q + l''' dq), X~^T dz
  Vec red3 = detail::blocked_reduce(
      pb, cols, q1, nt, q1 * md, (curved ? 2.0 * double(md) : 0.0) * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, detail::Scratch& s) {
        Eigen::Map<const Mat> Zm(Z, q1, m);
        for (Index k = 0; k < md; ++k) {
          double* dz = s.wa;
          if (curved) blas::gemm(q1, m, q1, dM[k].data(), q1, Z, q1, s.copy, q1);
          for (Index r = 0; r < m; ++r) {
            const Index i = i0 + r;
            dz[r] = dcA(i, k);
            if (!curved) continue;
            const double w = pb.weight(i);
            const TangentTerms& tt = terms[static_cast<size_t>(i)];
            const double dq = Zm.col(r).dot(Eigen::Map<const Vec>(s.copy + r * q1, q1));
            dz[r] -= w * (tt.l4 * dEta(i, k) * a.q[i] + tt.l3 * dq);
          }
          Eigen::Map<Vec>(P + k * q1, q1).noalias() += Zm * Eigen::Map<const Vec>(dz, m);
        }
      });
  HyperTangents out;
  out.l2 = Mat::Zero(pb.X.p, md);
  out.l1 = Mat::Zero(pb.X.p, md);
  for (Index k = 0; k < md; ++k) {
    Mat du = Eigen::Map<const Vec>(red3.data() + k * q1, q1) - dH[k] * a.u;
    detail::solve_cols(st, du);
    for (Index c = 0; c < q; ++c) {
      const Index j = cols.all() ? c : cols.cols[c], kk = off + c;
      out.l2(j, k) = -(du(kk, 0) * a.bq[kk] + a.u[kk] * dB(kk, k) + dM[k](kk, kk));
      out.l1(j, k) = -du(kk, 0) * a.sgn[kk];
    }
  }
  return out;
}
LooResult alo_with_gradient_impl(const Problem& pb, const FitState& st, int n_threads,
                                 HyperGradient& grad, GradientKind kind, AdjointState* adj,
                                 const AloRows& loss, const HyperDirection* dir) {
  const int nt = resolve_threads(n_threads);
  const Index n = pb.n(), off = pb.intercept ? 1 : 0;
  const Columns cols = st.columns();
  const Index q = cols.all() ? pb.X.p : cols.size;  // penalized coordinates in the factor
  const Index q1 = q + off;
  const bool curved = loss.curved;
  const bool exact = kind == GradientKind::Exact;
  AdjointState local;
  AdjointState& a = adj ? *adj : local;
  a.inv_sw = 1.0 / pb.weight_sum();
  a.bq.resize(q1);
  a.sgn.resize(q1);
  for (Index k = 0; k < q1; ++k) {
    const Index j = k < off ? 0 : off + (cols.all() ? k - off : cols.cols[k - off]);
    a.bq[k] = st.beta[j];
    // ACV holds the active set and its signs fixed: sign(beta_hat) is the derivative.
    a.sgn[k] = k < off ? 0.0 : (a.bq[k] > 0.0 ? 1.0 : (a.bq[k] < 0.0 ? -1.0 : 0.0));
  }
  LooResult out;
  out.losses.resize(n);
  out.predictions.resize(n);
  out.leverages.resize(n);
  // partials: [r or g2 (q1) | g1 (q1) | G pos (q1^2) | G neg (q1^2)], G = sum c B z z^T;
  // for a constant-curvature loss without a second-order pass only diag(M) is needed:
  // [r (q1) | unused (q1) | diag M (q1)] from a_i itself (the second triangular solve)
  const bool diag_only = exact && !curved && adj == nullptr;
  // One direction (delta, epsilon) on the factor's coordinates: its derivative is
  // -(u^T b + sum_k delta_k M_kk) with b = delta o beta + epsilon o sign and
  // u^T b = (r - s)^T v, v = H^{-1} b; s^T v = <M, K> with K = X~^T diag(w l''' X~ v) X~,
  // a signed rank-k update in the leverage pass instead of the pass for q.
  const bool along = exact && dir != nullptr && adj == nullptr;
  const bool with_k = along && curved;
  Vec del, v;
  if (along) {
    del = Vec::Zero(q1);
    v = Vec::Zero(q1);
    for (Index k = off; k < q1; ++k) {
      const Index j = cols.all() ? k - off : cols.cols[k - off];
      del[k] = dir->l2[j];
      v[k] = dir->l2[j] * a.bq[k] + dir->l1[j] * a.sgn[k];
    }
    st.chol.solve(v.data());
  }
  const Index k_at = 2 * q1 + 2 * q1 * q1;  // K's pos/neg partials follow G's
  const Index stride =
      2 * q1 + (diag_only ? q1 : (exact ? 2 * q1 * q1 : 0)) + (with_k ? 2 * q1 * q1 : 0);
  const double inv_sw = a.inv_sw;
  const Mat Linv = lower_inverse_for_trmm(st.chol);  // the leverage pass's DTRMM rule
  Vec red = blocked_reduce(
      pb, cols, q1, nt, stride, (with_k ? 6.0 : 4.0) * double(q1 * q1),
      [&](double* P, Index i0, Index m, double* Z, Scratch& s) {
        if (exact) std::copy(Z, Z + q1 * m, s.copy);
        solve_rows(st, q1, m, Z, out.leverages.data() + i0, !exact || diag_only, Linv);
        double* cA = s.wa;
        double* cB = s.wb;
        loss.rows(pb, st, i0, m, out.leverages.data() + i0, inv_sw, exact, out.predictions.data(),
                  out.losses.data(), s.wa, s.wb);
        if (!exact) {
          for (Index k = 0; k < m; ++k) {
            if (pb.weight(i0 + k) == 0.0) continue;
            // eq. 16 with H_{-i} at beta_hat (wa: -c / t, wb: s)
            const double ci = s.wa[k], sk = s.wb[k];
            const double* ak = Z + k * q1;
            for (Index j = off; j < q1; ++j) {
              P[j] += ci * ak[j] * (a.bq[j] + sk * ak[j]);
              P[q1 + j] += ci * ak[j] * a.sgn[j];
            }
          }
        }
        if (exact) {
          Eigen::Map<Vec>(P, q1).noalias() +=
              Eigen::Map<const Mat>(s.copy, q1, m) * Eigen::Map<const Vec>(cA, m);
          if (diag_only) {
            Eigen::Map<Vec>(P + 2 * q1, q1).noalias() +=
                Eigen::Map<const Mat>(Z, q1, m).cwiseAbs2() * Eigen::Map<const Vec>(cB, m);
          } else {
            signed_syrk(q1, m, Z, cB, P + 2 * q1, P + 2 * q1 + q1 * q1, s);
          }
          if (with_k) {  // (cA and cB are spent) e_i = w_i l'''_i x~_i^T v
            Eigen::Map<Vec>(cB, m).noalias() = Eigen::Map<const Mat>(s.copy, q1, m).transpose() * v;
            loss.l3w(pb, st, i0, m, cA);
            for (Index k = 0; k < m; ++k) cA[k] *= cB[k];
            signed_syrk(q1, m, s.copy, cA, P + k_at, P + k_at + q1 * q1, s);
          }
        }
      });
  grad.l2 = Vec::Zero(pb.X.p);
  grad.l1 = Vec::Zero(pb.X.p);
  Vec g2(q1), g1(q1);
  if (!exact) {
    g2 = red.head(q1);
    g1 = red.segment(q1, q1);
  } else {
    Vec diagM;
    if (diag_only) {
      diagM = red.segment(2 * q1, q1);
    } else {
      a.M = to_a_space(st, signed_sum(red.data() + 2 * q1, q1));
      diagM = a.M.diagonal();
    }
    if (along) {
      const double sv = with_k ? a.M.cwiseProduct(signed_sum(red.data() + k_at, q1)).sum() : 0.0;
      grad.along = -(red.head(q1).dot(v) - sv + del.dot(diagM));
      grad.l2.resize(0);
      grad.l1.resize(0);
      return out;
    }
    Vec rs = red.head(q1);
    a.q.resize(0);
    if (curved) {  // q_j = x~_j^T M x~_j and s = X~^T (w l''' q)
      a.q.resize(n);
      rs -= blocked_reduce(pb, cols, q1, nt, q1, 2.0 * double(q1 * q1),
                           [&](double* P, Index i0, Index m, double* Z, Scratch& s) {
                             blas::gemm(q1, m, q1, a.M.data(), q1, Z, q1, s.work, q1);
                             loss.l3w(pb, st, i0, m, s.wa);
                             for (Index k = 0; k < m; ++k) {
                               const Index i = i0 + k;
                               const double qi =
                                   Eigen::Map<const Vec>(Z + k * q1, q1)
                                       .dot(Eigen::Map<const Vec>(s.work + k * q1, q1));
                               a.q[i] = qi;
                               s.wa[k] *= qi;
                             }
                             Eigen::Map<Vec>(P, q1).noalias() +=
                                 Eigen::Map<const Mat>(Z, q1, m) * Eigen::Map<const Vec>(s.wa, m);
                           });
    }
    a.u = rs;
    st.chol.solve(a.u.data());
    for (Index k = 0; k < q1; ++k) {
      g2[k] = -(a.u[k] * a.bq[k] + diagM[k]);
      g1[k] = -a.u[k] * a.sgn[k];
    }
  }
  for (Index k = 0; k < q; ++k) {
    const Index j = cols.all() ? k : cols.cols[k];
    grad.l2[j] = g2[off + k];
    grad.l1[j] = g1[off + k];
  }
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

// exact_loo and enet_exact_loo (loo.hpp), compiled once: the loss through SampleLoss.
LooResult exact_loo(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                    const FitOptions& opt, SampleSet set) {
  const int nt = resolve_threads(opt.n_threads);
  const Index n = pb.n(), p1 = pb.p1(), ns = set.size(n);
  set.check(n);
  const double sw = pb.weight_sum();
  LooResult out;
  out.losses.resize(ns);
  out.predictions.resize(ns);
  Index not_converged = 0;
  std::vector<char> singular(static_cast<size_t>(ns), 0);
  const RefreshPolicy pol = detail::exact_refit_policy();
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt) reduction(+ : not_converged)
  {
    interrupt::Share share(ictx);
    Vec xi(p1), a(p1);
    FitState r;
#pragma omp for schedule(dynamic, 4)
    for (Index k = 0; k < ns; ++k) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index i = set(k);
        const double y = pb.y[i], w = pb.weight(i);
        if (w == 0.0) {  // a zero-weight sample does not change the fit
          out.predictions[k] = st.eta[i];
          out.losses[k] = loss.value(y, st.eta[i], pb.lp);
          return;
        }
        r.beta = st.beta;
        r.eta = st.eta;
        r.chol = Cholesky();
        r.stale_eta = 0.0;
        pb.row(i, xi.data());
        const double gi = w * loss.d1(y, st.eta[i], pb.lp), di = w * loss.d2(y, st.eta[i], pb.lp);
        r.grad = st.grad - gi * xi;  // gradient of the leave-one-out objective at beta_hat
        a = xi;
        st.chol.solve(a.data());
        const double dh = di * xi.dot(a);
        const double den = 1.0 - dh;
        if (detail::downdate_singular(den)) {
          ++not_converged;
          detail::mark_singular(out, singular, k);
          return;
        }
        detail::LooRefitModel m(loss.ops, pb, r, i, st.chol, xi, a, di, den);
        const DriveOptions o = detail::exact_refit_options(opt.tol, sw - w, opt.max_iter);
        DriveResult res;
        try {
          res = newton_drive(m, o, pol);
        } catch (const SingularHessian&) {  // a fresh leave-one-out Hessian refused
          ++not_converged;
          detail::mark_singular(out, singular, k);
          return;
        }
        if (!res.converged) ++not_converged;
        out.predictions[k] = r.eta[i];
        out.losses[k] = loss.value(y, r.eta[i], pb.lp);
      });
    }
  }
  guard.rethrow();
  out.n_not_converged = not_converged;
  detail::collect_singular(out, singular, set);
  return out;
}

LooResult enet_exact_loo(const detail::SampleLoss& loss, const Problem& pb, const FitState& st,
                         const FitOptions& opt, SampleSet set) {
  const int nt = resolve_threads(opt.n_threads);
  const Index ns = set.size(pb.n());
  set.check(pb.n());
  LooResult out;
  out.losses.resize(ns);
  out.predictions.resize(ns);
  Index not_converged = 0;
  std::vector<char> singular(static_cast<size_t>(ns), 0);
  FitOptions serial = opt;
  serial.n_threads = 1;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(+ : not_converged)
  for (Index k = 0; k < ns; ++k) {
    if (guard.failed()) continue;
    interrupt::Share share(ictx);
    guard.run([&] {
      interrupt::check();
      const Index i = set(k);
      double e = st.eta[i];
      if (pb.weight(i) != 0.0) {
        FitState r;
        try {
          r = detail::enet_fit(loss.ops, pb, serial, &st.beta, i, false);
        } catch (const SingularHessian&) {
          ++not_converged;
          detail::mark_singular(out, singular, k);
          return;
        }
        if (!r.converged) ++not_converged;
        e = r.eta[i];
      }
      out.predictions[k] = e;
      out.losses[k] = loss.value(pb.y[i], e, pb.lp);
    });
  }
  guard.rethrow();
  out.n_not_converged = not_converged;
  detail::collect_singular(out, singular, set);
  return out;
}

LooResult loo(const Problem& pb, LossKind loss, LooMethod method, FitState& st,
              const FitOptions& opt, SampleSet set) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    if (method == LooMethod::Exact) {
      settle_deferred_end<Loss>(pb, st, opt.n_threads);
      if (pb.has_l1()) return enet_exact_loo(detail::sample_loss<Loss>(), pb, st, opt, set);
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
      return exact_loo(detail::sample_loss<Loss>(), pb, st, opt, set);
    }
    return settled_approx_loo<Loss>(pb, st, method, opt.n_threads);
  });
}

LooResult loo_gradient(const Problem& pb, LossKind loss, FitState& st, int n_threads,
                       HyperGradient& grad, GradientKind kind, const HyperDirection* dir) {
  if (dir && (dir->l2.size() != pb.X.p || dir->l1.size() != pb.X.p)) {
    throw InvalidInput("a hyperparameter direction must have n_features entries for l2 and l1");
  }
  if (dir && kind != GradientKind::Exact) {
    throw InvalidInput("a derivative along a direction is the exact gradient's only");
  }
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    fresh_factor<Loss>(pb, st, n_threads);
    LooResult res = alo_with_gradient<Loss>(pb, st, n_threads, grad, kind, nullptr, dir);
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
