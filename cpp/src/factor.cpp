#include "aloocv/factor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "aloocv/blas.hpp"
#include "aloocv/hessian.hpp"

namespace aloocv {

void Cholesky::factor(const double* H, Index p1) {
  p1_ = 0;
  L_.assign(static_cast<size_t>(p1 * p1), 0.0);
  for (Index j = 0; j < p1; ++j) {
    const double hjj = H[j * p1 + j];
    if (!std::isfinite(hjj)) {
      throw InvalidInput(
          "the Hessian has non-finite entries (overflow of the loss curvature at extreme linear "
          "predictors); rescale X or increase the penalty");
    }
    for (Index i = j; i < p1; ++i) L_[j * p1 + i] = H[j * p1 + i];
  }
  const int info = blas::potrf_lower(p1, L_.data(), p1);
  // Scale-aware singularity test: each squared pivot relative to its own diagonal entry
  // (the pivots of D^{-1/2} H D^{-1/2}, D = diag(H)), so that penalties or weights of any
  // magnitude (lam = 1e15 next to an intercept, weights of 1e-17) do not look singular.
  const double eps = std::numeric_limits<double>::epsilon();
  const double tol = 10.0 * static_cast<double>(p1) * eps;
  Index bad = -1;
  double bad_ratio = 0.0;
  if (info == 0) {
    for (Index j = 0; j < p1; ++j) {
      const double l = L_[j * p1 + j], hjj = H[j * p1 + j];
      const double ratio = hjj > 0.0 ? (l * l) / hjj : 0.0;
      if (!(ratio > tol)) {
        bad = j;
        bad_ratio = ratio;
        break;
      }
    }
  }
  if (info != 0 || bad >= 0) {
    std::ostringstream msg;
    msg << "the Hessian (" << p1 << " x " << p1
        << ") is singular or not numerically positive definite";
    if (info > 0) msg << " (Cholesky failed at pivot " << info << ")";
    if (bad >= 0) {
      msg << " (at index " << bad << " the relative pivot is " << bad_ratio << " <= " << tol << ")";
    }
    msg << ": a direction has no curvature from the data and no penalty (collinear or constant "
           "features, p > n, or features seen only by zero-weight samples); a penalty lam > 0 "
           "on every feature removes it";
    L_.clear();
    throw SingularHessian(msg.str());
  }
  p1_ = p1;
  rcond_ = 1.0;
  for (Index j = 0; j < p1; ++j) {
    const double l = L_[j * p1 + j], hjj = H[j * p1 + j];
    if (hjj > 0.0) rcond_ = std::min(rcond_, l * l / hjj);
  }
}

void Cholesky::solve_lower(double* b) const {
  Eigen::Map<const Mat> L(L_.data(), p1_, p1_);
  Eigen::Map<Vec> v(b, p1_);
  L.triangularView<Eigen::Lower>().solveInPlace(v);
}

void Cholesky::solve(double* b) const {
  Eigen::Map<const Mat> L(L_.data(), p1_, p1_);
  Eigen::Map<Vec> v(b, p1_);
  L.triangularView<Eigen::Lower>().solveInPlace(v);
  L.transpose().triangularView<Eigen::Upper>().solveInPlace(v);
}

Mat Cholesky::inverse() const {
  Mat Z = Mat::Identity(p1_, p1_);
  blas::trsm_lower(p1_, p1_, L_.data(), p1_, Z.data(), p1_);  // Z = L^{-1}
  const Mat Zt = Z.transpose();                               // column-major copy of Z^T
  Mat out(p1_, p1_);
  blas::syrk_lower(p1_, p1_, Zt.data(), p1_, 0.0, out.data(), p1_);
  out.triangularView<Eigen::StrictlyUpper>() = out.transpose();
  return out;  // L^{-T} L^{-1}
}

// Float32 designs: the leverage pass in float32 (L^{-1} rounded to float32 once, STRMM on
// the rows as stored, the squared norms summed in float64) where rcond() is at least
// kSingleLeverageMinRcond; a leverage's relative error is then about eps32 / rcond (the
// rows themselves are exact in float32). Below it, the float64 pass.
constexpr double kSingleLeverageMinRcond = 1e-2;

Mat lower_inverse_for_trmm(const Cholesky& chol) {
  const Index p1 = chol.size();
  if (!blas::has_trmm() || !(chol.rcond() >= kTrmmMinRcond)) return Mat();
  Mat Linv = Mat::Identity(p1, p1);
  blas::trsm_lower(p1, p1, chol.lower(), p1, Linv.data(), p1);
  return Linv;
}

void leverages(const Design& X, bool intercept, const Cholesky& chol, double* h, int n_threads,
               Columns cols, const Vec* probe, double* probe_max) {
  const Index off = intercept ? 1 : 0;
  const Index p1 = (cols.all() ? X.p : cols.size) + off;
  if (probe && probe->size() != p1)
    throw InvalidInput("the probe of the leverage pass has the wrong size");
  // max_i |x~_i^T probe| (probe given): a max, so the same for any thread count
  double pmax = 0.0;
  const int nt = threads_for(n_threads, double(X.n) * double(p1) * double(p1));
  ExceptionCatcher guard;
  if (X.sparse) {
    const Mat Hinv = chol.inverse();
    std::vector<int> pos;
    if (!cols.all()) {
      pos.assign(static_cast<size_t>(X.p), -1);
      for (Index k = 0; k < cols.size; ++k)
        pos[static_cast<size_t>(cols.cols[k])] = static_cast<int>(k);
    }
    const CsrView& S = X.csr;
    interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt) reduction(max : pmax)
    {
      interrupt::Share share(ictx);
      std::vector<Index> jj;
      std::vector<double> vv;
#pragma omp for schedule(dynamic, 256)
      for (Index i = 0; i < X.n; ++i) {
        if (guard.failed()) continue;
        guard.run([&] {
          if ((i & 255) == 0) interrupt::check();
          jj.clear();
          vv.clear();
          for (Index a = S.indptr[i]; a < S.indptr[i + 1]; ++a) {
            const int j = pos.empty() ? S.indices[a] : pos[static_cast<size_t>(S.indices[a])];
            if (j < 0) continue;
            jj.push_back(off + j);
            vv.push_back(S.val(a));
          }
          double acc = intercept ? Hinv(0, 0) : 0.0;
          for (size_t a = 0; a < jj.size(); ++a) {
            const double* col = Hinv.data() + jj[a] * p1;
            double s = intercept ? 2.0 * col[0] : 0.0;
            for (size_t b = 0; b < jj.size(); ++b) s += col[jj[b]] * vv[b];
            acc += vv[a] * s;
          }
          h[i] = acc;
          if (probe) {
            double s = intercept ? (*probe)[0] : 0.0;
            for (size_t a = 0; a < jj.size(); ++a) s += vv[a] * (*probe)[jj[a]];
            pmax = std::max(pmax, std::abs(s));
          }
        });
      }
    }
    guard.rethrow();
    if (probe_max) *probe_max = pmax;
    return;
  }
  const Index B = block_rows(p1);
  const Index nblocks = (X.n + B - 1) / B;
  // Narrow float64 rows: L^{-1} formed once and padded for the small kernel
  // (blas::norms_lower_small: ||L^{-1} x~_i||^2 in register tiles, L^{-1} X~^T never
  // stored), rows with unit column stride and every column read in place (the intercept's
  // 1 inside the kernel), others packed per block.
  const bool small = X.dense.data != nullptr && p1 <= blas::kSmallSyrkMax &&
                     blas::has_small_syrk() && chol.rcond() >= kTrmmMinRcond;
  const bool in_place = small && cols.all() && X.dense.col_stride == 1;
  blas::PaddedLower Lpad;
  if (small) {
    Mat L = Mat::Identity(p1, p1);
    blas::trsm_lower(p1, p1, chol.lower(), p1, L.data(), p1);
    Lpad = blas::pad_lower(p1, L.data(), p1);
  }
  // L^{-1} formed once (p^3 / 3), then one DTRMM per block (kTrmmMinRcond)
  const Mat Linv = small ? Mat() : lower_inverse_for_trmm(chol);
  // float32 rows, float32 L^{-1} (kSingleLeverageMinRcond)
  Eigen::MatrixXf Linv32;
  if (Linv.size() != 0 && X.dense.is_f32() && blas::has_strmm() &&
      chol.rcond() >= kSingleLeverageMinRcond) {
    Linv32 = Linv.cast<float>();
  }
  interrupt::Context* const ictx = interrupt::current();
#pragma omp parallel num_threads(nt) reduction(max : pmax)
  {
    interrupt::Share share(ictx);
    std::vector<double> pack;
    std::vector<float> pack32;
    Vec xp;
    guard.run([&] {
      if (!in_place) pack.resize(static_cast<size_t>(p1 * B));
    });
#pragma omp for schedule(dynamic, 1)
    for (Index blk = 0; blk < nblocks; ++blk) {
      if (guard.failed()) continue;
      guard.run([&] {
        interrupt::check();
        const Index i0 = blk * B, i1 = std::min(X.n, i0 + B), m = i1 - i0;
        if (small) {
          const bool head_one = in_place && intercept;
          const double* T = in_place ? X.dense.data + i0 * X.dense.row_stride : pack.data();
          const Index ldt = in_place ? X.dense.row_stride : p1;
          if (!in_place) X.pack_rows(i0, i1, nullptr, intercept, pack.data(), cols);
          if (probe) {  // max_i |x~_i^T probe| while the rows are in cache
            const Index hd = head_one ? 1 : 0;
            for (Index k = 0; k < m; ++k) {
              const double* x = T + k * ldt;
              double s = head_one ? (*probe)[0] : 0.0;
              for (Index j = hd; j < p1; ++j) s += x[j - hd] * (*probe)[j];
              pmax = std::max(pmax, std::abs(s));
            }
          }
          if (!blas::norms_lower_small(Lpad, m, T, ldt, head_one, h + i0)) {
            throw std::logic_error("the small leverage kernel refused its block");
          }
          return;
        }
        if (Linv32.size() != 0) {
          pack32.resize(static_cast<size_t>(p1 * m));
          X.pack_rows(i0, i1, nullptr, intercept, pack32.data(), cols);
          if (probe) {
            for (Index k = 0; k < m; ++k) {
              const float* x = pack32.data() + k * p1;
              double s = 0.0;
              for (Index j = 0; j < p1; ++j) s += double(x[j]) * (*probe)[j];
              pmax = std::max(pmax, std::abs(s));
            }
          }
          if (blas::trmm_lower_f32(p1, m, Linv32.data(), p1, pack32.data(), p1)) {
            for (Index k = 0; k < m; ++k) {
              const float* z = pack32.data() + k * p1;
              double s = 0.0;
              for (Index j = 0; j < p1; ++j) s += double(z[j]) * double(z[j]);
              h[i0 + k] = s;
            }
            return;
          }
        }
        X.pack_rows(i0, i1, nullptr, intercept, pack.data(), cols);
        if (probe) {
          xp.noalias() = Eigen::Map<const Mat>(pack.data(), p1, m).transpose() * *probe;
          pmax = std::max(pmax, xp.cwiseAbs().maxCoeff());
        }
        if (Linv.size() == 0 || !blas::trmm_lower(p1, m, Linv.data(), p1, pack.data(), p1)) {
          blas::trsm_lower(p1, m, chol.lower(), p1, pack.data(), p1);
        }
        Eigen::Map<const Mat> Z(pack.data(), p1, m);
        Eigen::Map<Vec>(h + i0, m) = Z.colwise().squaredNorm().transpose();
      });
    }
  }
  guard.rethrow();
  if (probe_max) *probe_max = pmax;
}

}  // namespace aloocv
