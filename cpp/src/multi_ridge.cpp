#include "aloocv/multi_ridge.hpp"

#include <Eigen/Cholesky>
#include <Eigen/SVD>
#include <limits>
#include <sstream>
#include <vector>

#include "aloocv/blas.hpp"
#include "aloocv/hessian.hpp"
#include "aloocv/ridge_path.hpp"

namespace aloocv {

namespace {

constexpr Index kTargetTile = 256;  // responses per task
constexpr Index kRowBlock = 64;     // rows per fused GEMM + epilogue

double tiny_den() { return 64 * std::numeric_limits<double>::epsilon(); }

void check_lambda(const MultiRidge& mr, double lam) {
  const double smin = mr.s.size() ? mr.s.minCoeff() : 0.0;
  const double smax = mr.s.size() ? mr.s.maxCoeff() : 1.0;
  if (!(lam >= 0.0) || !(smin + lam > 1e-12 * std::max(1.0, smax))) {
    std::ostringstream msg;
    msg << "ridge with lambda = " << lam
        << " is singular on this data (p > n or collinear features); use lambda > 0";
    throw SingularHessian(msg.str());
  }
}

// 1 - w_i h_i for the columns of h (n x k); throws where a weighted sample has none left.
void downdate(const MultiRidge& mr, Mat& h, const double* lams) {
  const double tiny = tiny_den();
  for (Index j = 0; j < h.cols(); ++j) {
    for (Index i = 0; i < mr.n; ++i) {
      const double den = 1.0 - mr.w[i] * h(i, j);
      if (mr.w[i] != 0.0 && !(den > tiny)) {
        std::ostringstream msg;
        msg << "the leave-one-out Hessian is singular for sample " << i
            << " at lambda = " << lams[j] << "; use a larger penalty";
        throw SingularHessian(msg.str());
      }
      h(i, j) = mr.w[i] != 0.0 ? den : 1.0;
    }
  }
}

// h (n x k): leverages 1/sw + (Z o Z) inv
Mat leverages(const MultiRidge& mr, const Mat& inv) {
  Mat h(mr.n, inv.cols());
  const Mat Z2 = mr.Z.array().square().matrix();
  blas::gemm(mr.n, inv.cols(), mr.p, Z2.data(), mr.n, inv.data(), mr.p, h.data(), mr.n);
  if (mr.intercept) h.array() += 1.0 / mr.sw;
  return h;
}

struct Tiling {
  Index tiles = 0, chunks = 0, chunk_rows = 0;
};

// Target tiles x row chunks: enough tasks for the threads, row chunks only when the
// responses alone do not give them (partial sums per chunk are reduced in order).
Tiling tiling(Index n, Index T, int nt) {
  Tiling t;
  t.tiles = (T + kTargetTile - 1) / kTargetTile;
  const Index want = std::max<Index>(1, (2 * nt + t.tiles - 1) / t.tiles);
  const Index max_chunks = std::max<Index>(1, (n + kRowBlock - 1) / kRowBlock);
  t.chunks = std::min(want, max_chunks);
  t.chunk_rows = (n + t.chunks - 1) / t.chunks;
  return t;
}

}  // namespace

MultiRidge multi_ridge(const Design& X, const double* w, bool intercept, const DenseView& Y,
                       const double* pen, int n_threads) {
  const int nt = resolve_threads(n_threads);
  MultiRidge mr;
  mr.n = X.n;
  mr.p = X.p;
  mr.T = Y.p;
  mr.intercept = intercept;
  mr.Y = Y;
  const Index n = mr.n, p = mr.p, T = mr.T, off = intercept ? 1 : 0, p1 = p + off;
  if (Y.n != n) throw InvalidInput("Y must have as many rows as X");
  mr.w = Vec::Ones(n);
  if (w) mr.w = Eigen::Map<const Vec>(w, n);
  mr.sw = mr.w.sum();
  if (!(mr.sw > 0.0)) throw InvalidInput("the sample weights sum to zero");
  Mat H(p1, p1);
  hessian(X, mr.w.data(), intercept, H.data(), nt);
  Mat G = H.bottomRightCorner(p, p);
  mr.mu = Vec::Zero(p);
  if (intercept) {
    mr.mu = H.col(0).tail(p) / mr.sw;
    G.noalias() -= mr.sw * mr.mu * mr.mu.transpose();
  }
  Vec linv = Vec::Ones(p);
  if (pen) {
    for (Index j = 0; j < p; ++j) {
      if (!(pen[j] > 0.0)) throw InvalidInput("the penalty shape must be positive");
      linv[j] = 1.0 / std::sqrt(pen[j]);
    }
    G = linv.asDiagonal() * G * linv.asDiagonal();
  }
  Mat V;
  sym_eigen(G, mr.s, V, "eigendecomposition of X^T W X");
  mr.Vt = V.transpose() * linv.asDiagonal();
  // Z = (X - 1 mu^T) Vt^T, one row block at a time
  mr.Z.resize(n, p);
  const Index B = block_rows(p);
  const Index nb = (n + B - 1) / B;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(threads_for(nt, 2.0 * double(n) * double(p) * double(p)))
  {
    interrupt::Share share(ictx);
    std::vector<double> pack, zbuf;
    guard.run([&] {
      pack.resize(static_cast<size_t>(p * B));
      zbuf.resize(static_cast<size_t>(p * B));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index b = 0; b < nb; ++b) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index i0 = b * B, i1 = std::min(n, i0 + B), m = i1 - i0;
        X.pack_rows(i0, i1, nullptr, false, pack.data());
        Eigen::Map<Mat> Xb(pack.data(), p, m);
        if (intercept) Xb.colwise() -= mr.mu;
        blas::gemm(p, m, p, mr.Vt.data(), p, pack.data(), p, zbuf.data(), p);
        mr.Z.middleRows(i0, m) = Eigen::Map<const Mat>(zbuf.data(), p, m).transpose();
      });
    }
  }
  guard.rethrow();
  // ybar and C = Z^T W Y, per tile of responses, in row chunks
  mr.ybar = Vec::Zero(T);
  mr.C.resize(p, T);
  const Index tiles = (T + kTargetTile - 1) / kTargetTile;
  const Index R = std::min<Index>(n, 4096);
#pragma omp parallel num_threads(threads_for(nt, 2.0 * double(n) * double(p) * double(T)))
  {
    interrupt::Share share(ictx);
    std::vector<double> wy;
    guard.run([&] { wy.resize(static_cast<size_t>(R * std::min(T, kTargetTile))); });
#pragma omp for schedule(dynamic, 1)
    for (Index tb = 0; tb < tiles; ++tb) {
      if (guard.failed()) continue;
      guard.run([&] {
        const Index t0 = tb * kTargetTile, t1 = std::min(T, t0 + kTargetTile), tt = t1 - t0;
        for (Index t = t0; t < t1; ++t) {
          double sy = 0.0;
          for (Index i = 0; i < n; ++i) sy += mr.w[i] * Y(i, t);
          mr.ybar[t] = intercept ? sy / mr.sw : 0.0;
        }
        for (Index r0 = 0; r0 < n; r0 += R) {
          interrupt::check();
          const Index r1 = std::min(n, r0 + R), m = r1 - r0;
          for (Index t = 0; t < tt; ++t)
            for (Index i = 0; i < m; ++i) wy[t * m + i] = mr.w[r0 + i] * Y(r0 + i, t0 + t);
          blas::gemm_ex(true, false, p, tt, m, 1.0, mr.Z.data() + r0, n, wy.data(), m,
                        r0 == 0 ? 0.0 : 1.0, mr.C.data() + t0 * p, p);
        }
      });
    }
  }
  guard.rethrow();
  return mr;
}

MultiRidgeScores multi_ridge_scores(const MultiRidge& mr, const double* lams, Index k,
                                    int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = mr.n, p = mr.p, T = mr.T;
  for (Index j = 0; j < k; ++j) check_lambda(mr, lams[j]);
  Mat inv(p, k);
  for (Index j = 0; j < k; ++j) inv.col(j) = (mr.s.array() + lams[j]).inverse().matrix();
  Mat den = leverages(mr, inv);
  downdate(mr, den, lams);
  const Mat dinv = den.cwiseInverse();
  // Spectral filters. Direct: basis = inv (one GEMM of inner dimension p per lambda).
  // Compressed: the eigenvalues (ascending) are cut into equal-count bands; on each band
  // the filters f_j = s / (s + lam_j) are reproduced to kFilterTol by an SVD of rank r_B
  // (a band far below or far above a lambda sees a nearly polynomial filter), so basis
  // column l lives on the band [lo_l, hi_l) and costs a GEMM of inner dimension
  // hi_l - lo_l; the k filters are recombined by one GEMM with R (k x r). The band count
  // minimizes sum_l (hi_l - lo_l + k) (GEMM plus recombination) against k p.
  Mat basis = inv, R = Mat::Identity(k, k);
  std::vector<Index> lo(static_cast<size_t>(k), 0), hi(static_cast<size_t>(k), p);
  bool direct = true;
  bool positive = true;
  for (Index j = 0; j < k; ++j) positive = positive && lams[j] > 0.0;
  // dividing by s is safe only where no filter is used at a tiny eigenvalue with lam = 0
  if (k > 2 && p > 0 && positive) {
    const double cut = 1e-13 * std::max(mr.s.maxCoeff(), 1e-300);
    Mat F(p, k);
    for (Index j = 0; j < k; ++j) F.col(j) = (mr.s.array() / (mr.s.array() + lams[j])).matrix();
    double best = double(k) * double(p);
    for (Index nbands = 1; nbands <= std::min<Index>(p, 64); nbands *= 2) {
      std::vector<Vec> cols;
      std::vector<Index> clo, chi;
      Mat Rc(k, 0);
      double cost = 0.0;
      for (Index band = 0; band < nbands; ++band) {
        const Index b0 = band * p / nbands, b1 = (band + 1) * p / nbands, bs = b1 - b0;
        if (bs == 0) continue;
        Eigen::JacobiSVD<Mat> svd(F.middleRows(b0, bs), Eigen::ComputeThinU | Eigen::ComputeThinV);
        const Vec& sig = svd.singularValues();
        Index rb = 0;
        while (rb < sig.size() && sig[rb] > kFilterTol) ++rb;
        for (Index l = 0; l < rb; ++l) {
          Vec c = Vec::Zero(p);
          for (Index q = b0; q < b1; ++q)
            c[q] = mr.s[q] > cut ? svd.matrixU()(q - b0, l) * sig[l] / mr.s[q] : 0.0;
          cols.push_back(std::move(c));
          clo.push_back(b0);
          chi.push_back(b1);
        }
        Rc.conservativeResize(k, Rc.cols() + rb);
        Rc.rightCols(rb) = svd.matrixV().leftCols(rb);
        cost += double(rb) * double(bs + k);
      }
      if (cost < 0.8 * best) {
        best = cost;
        direct = false;
        basis.resize(p, static_cast<Index>(cols.size()));
        for (Index l = 0; l < basis.cols(); ++l) basis.col(l) = cols[static_cast<size_t>(l)];
        R = Rc;
        lo = clo;
        hi = chi;
      }
    }
  }
  const Index r = basis.cols();
  MultiRidgeScores out;
  out.rank = r;
  out.passes = 0.0;
  for (Index l = 0; l < r; ++l)
    out.passes += double(hi[static_cast<size_t>(l)] - lo[static_cast<size_t>(l)]) / double(p);
  const Tiling tl = tiling(n, T, nt);
  std::vector<Mat> part2(static_cast<size_t>(tl.chunks)), part4(static_cast<size_t>(tl.chunks));
  for (Index c = 0; c < tl.chunks; ++c) {
    part2[static_cast<size_t>(c)] = Mat::Zero(k, T);
    part4[static_cast<size_t>(c)] = Mat::Zero(k, T);
  }
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
  const Index tasks = tl.tiles * tl.chunks;
  const double work = 2.0 * double(n) * double(p) * double(T) * double(r);
#pragma omp parallel num_threads(threads_for(nt, work))
  {
    interrupt::Share share(ictx);
    std::vector<double> gbuf, fbuf, comb, ybuf;
    guard.run([&] {
      const Index tt = std::min(T, kTargetTile);
      gbuf.resize(static_cast<size_t>(p * tt));
      fbuf.resize(static_cast<size_t>(r * kRowBlock * tt));
      if (!direct) comb.resize(static_cast<size_t>(k * kRowBlock * tt));
      ybuf.resize(static_cast<size_t>(kRowBlock * tt));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index task = 0; task < tasks; ++task) {
      if (guard.failed()) continue;
      guard.run([&] {
        const Index tb = task % tl.tiles, c = task / tl.tiles;
        const Index t0 = tb * kTargetTile, t1 = std::min(T, t0 + kTargetTile), tt = t1 - t0;
        const Index c0 = c * tl.chunk_rows, c1 = std::min(n, c0 + tl.chunk_rows);
        Mat& s2 = part2[static_cast<size_t>(c)];
        Mat& s4 = part4[static_cast<size_t>(c)];
        for (Index i0 = c0; i0 < c1; i0 += kRowBlock) {
          interrupt::check();
          const Index m = std::min(c1, i0 + kRowBlock) - i0, mt = m * tt;
          // the centered responses of the block, contiguous (Y may be in C order)
          for (Index q = 0; q < m; ++q)
            for (Index t = 0; t < tt; ++t) ybuf[t * m + q] = mr.Y(i0 + q, t0 + t) - mr.ybar[t0 + t];
          for (Index l = 0; l < r; ++l) {
            const Index b0 = lo[static_cast<size_t>(l)], bs = hi[static_cast<size_t>(l)] - b0;
            Eigen::Map<Mat> Gb(gbuf.data(), bs, tt);
            Gb = basis.col(l).segment(b0, bs).asDiagonal() * mr.C.block(b0, t0, bs, tt);
            blas::gemm(m, tt, bs, mr.Z.data() + i0 + b0 * n, n, gbuf.data(), bs,
                       fbuf.data() + l * mt, m);
          }
          // compressed: F_j = sum_l R_jl F_l for every j at once, one (m tt x r) x (r x k) GEMM
          if (!direct)
            blas::gemm_ex(false, true, mt, k, r, 1.0, fbuf.data(), mt, R.data(), k, 0.0,
                          comb.data(), mt);
          const double* F = direct ? fbuf.data() : comb.data();
          for (Index j = 0; j < k; ++j) {
            const double* Fj = F + j * mt;
            const double* dj = dinv.data() + j * n + i0;
            const double* wj = mr.w.data() + i0;
            for (Index t = 0; t < tt; ++t) {
              const double* yt = ybuf.data() + t * m;
              const double* ft = Fj + t * m;
              double a2 = 0.0, a4 = 0.0;
              for (Index q = 0; q < m; ++q) {
                const double e = (yt[q] - ft[q]) * dj[q];
                const double we2 = wj[q] * e * e;
                a2 += we2;
                a4 += we2 * e * e;
              }
              s2(j, t0 + t) += a2;
              s4(j, t0 + t) += a4;
            }
          }
        }
      });
    }
  }
  guard.rethrow();
  out.s2 = part2[0];
  out.s4 = part4[0];
  for (Index c = 1; c < tl.chunks; ++c) {
    out.s2 += part2[static_cast<size_t>(c)];
    out.s4 += part4[static_cast<size_t>(c)];
  }
  return out;
}

MultiRidgeSolution multi_ridge_solve(const MultiRidge& mr, const double* lam, bool predictions,
                                     int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = mr.n, p = mr.p, T = mr.T;
  // distinct lambdas: leverages per distinct value
  std::vector<double> uniq(lam, lam + T);
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  for (double l : uniq) check_lambda(mr, l);
  Mat Gsel(p, T);
  for (Index t = 0; t < T; ++t)
    Gsel.col(t) = mr.C.col(t).cwiseQuotient((mr.s.array() + lam[t]).matrix());
  MultiRidgeSolution out;
  out.coef.resize(p, T);
  blas::gemm_ex(true, false, p, T, p, 1.0, mr.Vt.data(), p, Gsel.data(), p, 0.0, out.coef.data(),
                p);
  out.intercept = mr.ybar - out.coef.transpose() * mr.mu;
  if (!mr.intercept) out.intercept.setZero();
  if (!predictions) return out;
  const Index U = static_cast<Index>(uniq.size());
  Mat inv(p, U);
  for (Index u = 0; u < U; ++u) inv.col(u) = (mr.s.array() + uniq[u]).inverse().matrix();
  const Mat h = leverages(mr, inv);
  Mat den = h;
  downdate(mr, den, uniq.data());
  std::vector<Index> col(static_cast<size_t>(T));
  for (Index t = 0; t < T; ++t)
    col[static_cast<size_t>(t)] = std::lower_bound(uniq.begin(), uniq.end(), lam[t]) - uniq.begin();
  out.predictions.resize(n, T);
  const Tiling tl = tiling(n, T, nt);
  const Index tasks = tl.tiles * tl.chunks;
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(threads_for(nt, 2.0 * double(n) * double(p) * double(T)))
  {
    interrupt::Share share(ictx);
#pragma omp for schedule(dynamic, 1)
    for (Index task = 0; task < tasks; ++task) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index tb = task % tl.tiles, c = task / tl.tiles;
        const Index t0 = tb * kTargetTile, t1 = std::min(T, t0 + kTargetTile), tt = t1 - t0;
        const Index c0 = c * tl.chunk_rows, c1 = std::min(n, c0 + tl.chunk_rows), m = c1 - c0;
        if (m <= 0) return;
        double* P = out.predictions.data() + t0 * n + c0;
        blas::gemm(m, tt, p, mr.Z.data() + c0, n, Gsel.data() + t0 * p, p, P, n);
        for (Index t = 0; t < tt; ++t) {
          const Index u = col[static_cast<size_t>(t0 + t)];
          const double yb = mr.ybar[t0 + t];
          double* Pt = P + t * n;
          for (Index q = 0; q < m; ++q) {
            const Index i = c0 + q;
            const double eta = yb + Pt[q];
            Pt[q] = eta + mr.w[i] * (eta - mr.Y(i, t0 + t)) * h(i, u) / den(i, u);
          }
        }
      });
    }
  }
  guard.rethrow();
  return out;
}

Vec multi_ridge_leverages(const MultiRidge& mr, double lam) {
  check_lambda(mr, lam);
  const Mat inv = (mr.s.array() + lam).inverse().matrix();
  return leverages(mr, inv).col(0);
}

Mat multi_ridge_folds(const MultiRidge& mr, double lam, const int* folds, Index n_folds,
                      int n_threads) {
  const int nt = resolve_threads(n_threads);
  const Index n = mr.n, p = mr.p, T = mr.T;
  check_lambda(mr, lam);
  std::vector<std::vector<Index>> rows(static_cast<size_t>(n_folds));
  for (Index i = 0; i < n; ++i) {
    if (folds[i] < 0 || folds[i] >= n_folds) throw InvalidInput("fold index out of range");
    rows[static_cast<size_t>(folds[i])].push_back(i);
  }
  const Vec inv = (mr.s.array() + lam).inverse().matrix();
  Mat G = inv.asDiagonal() * mr.C;  // (p x T)
  Mat out(n, T);
  ExceptionCatcher guard;
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(threads_for(nt, 2.0 * double(n) * double(p) * double(T)))
  {
    interrupt::Share share(ictx);
#pragma omp for schedule(dynamic, 1)
    for (Index f = 0; f < n_folds; ++f) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const std::vector<Index>& S = rows[static_cast<size_t>(f)];
        const Index q = static_cast<Index>(S.size());
        if (q == 0) return;
        Mat Zs(q, p);
        Vec sq(q);
        Mat eta(q, T), res(q, T);
        for (Index a = 0; a < q; ++a) {
          Zs.row(a) = mr.Z.row(S[static_cast<size_t>(a)]);
          sq[a] = std::sqrt(mr.w[S[static_cast<size_t>(a)]]);
        }
        blas::gemm(q, T, p, Zs.data(), q, G.data(), p, eta.data(), q);
        for (Index t = 0; t < T; ++t)
          for (Index a = 0; a < q; ++a) {
            const Index i = S[static_cast<size_t>(a)];
            eta(a, t) += mr.ybar[t];
            res(a, t) = sq[a] * (eta(a, t) - mr.Y(i, t));
          }
        Mat K = Zs * inv.asDiagonal() * Zs.transpose();
        if (mr.intercept) K.array() += 1.0 / mr.sw;
        Mat A = -(sq.asDiagonal() * K * sq.asDiagonal());
        A.diagonal().array() += 1.0;
        Eigen::LLT<Mat> llt(A);
        if (llt.info() != Eigen::Success ||
            !(llt.matrixLLT().diagonal().minCoeff() > std::sqrt(tiny_den()))) {
          std::ostringstream msg;
          msg << "the Hessian without fold " << f << " is singular at lambda = " << lam
              << "; use a larger penalty";
          throw SingularHessian(msg.str());
        }
        const Mat sol = llt.solve(res);
        const Mat upd = K * (sq.asDiagonal() * sol);
        for (Index t = 0; t < T; ++t)
          for (Index a = 0; a < q; ++a) out(S[static_cast<size_t>(a)], t) = eta(a, t) + upd(a, t);
      });
    }
  }
  guard.rethrow();
  return out;
}

}  // namespace aloocv
