// The matrix-free route: products, PCG, Newton-CG and randomized leverages
// (matrix_free.hpp; docs/math/matrix_free.md).
#include "aloocv/matrix_free.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "aloocv/hessian.hpp"
#include "aloocv/newton.hpp"

namespace aloocv {

namespace mf {

namespace {

// Rows per task of the row-parallel block products.
constexpr Index kRowsPerTask = 512;

// C (r x m, row-major, leading dimension m) = M (r x p) V (p x m, row-major) through the
// registered DGEMM where M is a float64 block with unit inner stride; false otherwise.
template <class M>
bool block_gemm_forward(const M& A, const double* V, Index m, double* C) {
  if constexpr (std::is_base_of_v<Eigen::DenseBase<M>, M>) {
    if constexpr (std::is_same_v<typename M::Scalar, double>) {
      if (!blas::enabled() || A.innerStride() != 1 || A.rows() == 0 || A.cols() == 0) return false;
      // column-major view: C^T (m x r) = V^T (m x p) op(A)^T
      if constexpr (M::IsRowMajor) {
        blas::gemm_ex(false, false, m, A.rows(), A.cols(), 1.0, V, m, A.data(), A.outerStride(),
                      0.0, C, m);
      } else {
        blas::gemm_ex(false, true, m, A.rows(), A.cols(), 1.0, V, m, A.data(), A.outerStride(), 0.0,
                      C, m);
      }
      return true;
    } else {
      return false;
    }
  } else {
    return false;
  }
}

// acc (p x m, row-major) += M^T (p x r) U (r x m, row-major), as block_gemm_forward.
template <class M>
bool block_gemm_adjoint(const M& A, const double* U, Index m, double* acc) {
  if constexpr (std::is_base_of_v<Eigen::DenseBase<M>, M>) {
    if constexpr (std::is_same_v<typename M::Scalar, double>) {
      if (!blas::enabled() || A.innerStride() != 1 || A.rows() == 0 || A.cols() == 0) return false;
      // column-major view: acc^T (m x p) += U^T (m x r) A (r x p)
      if constexpr (M::IsRowMajor) {
        blas::gemm_ex(false, true, m, A.cols(), A.rows(), 1.0, U, m, A.data(), A.outerStride(), 1.0,
                      acc, m);
      } else {
        blas::gemm_ex(false, false, m, A.cols(), A.rows(), 1.0, U, m, A.data(), A.outerStride(),
                      1.0, acc, m);
      }
      return true;
    } else {
      return false;
    }
  } else {
    return false;
  }
}

using RowMap = Eigen::Map<RowMat>;
using ConstRowMap = Eigen::Map<const RowMat>;

// The block kernels below hold a row of M sums (or values) in registers. With GCC and
// Clang they are written on pairs of doubles (vector extensions: SSE2 on x86-64, NEON on
// aarch64, the baseline of every wheel), M / 2 pairs and a last column where M is odd: the
// same products and sums, in the same order, as the scalar loops (no contraction into FMA:
// -ffp-contract=off), so the same bits. GCC did not vectorize the scalar loops at widths other than
// powers of two (a block of 10 columns took 8 + 2, two passes over each row's entries).
// Measured on 20000 x 5000 Zipf rows (30 per row), X~^T D X~ V by rows, one thread: 0.73-0.77x
// the scalar time at 10 columns, 0.86-0.92x at 8, 0.78x at 16 (benchmarks/wide_sparse.md,
// "Session 19"); MSVC keeps the scalar loops.
#if defined(__GNUC__)
using Pair = double __attribute__((vector_size(16)));
inline Pair load_pair(const double* p) {
  Pair r;
  std::memcpy(&r, p, sizeof(Pair));
  return r;
}
inline void store_pair(double* p, Pair v) { std::memcpy(p, &v, sizeof(Pair)); }
#endif

// o[0..M) += sum_{a in [a0, a1)} val(a) B[idx(a) * ld + 0..M), the M sums in registers
// (a runtime width reloads and stores o at every entry: o may alias B), added in the
// order of a (the same sums as the entry-by-entry loop).
template <int M, class Val, class Idx>
inline void gather_fixed(Index a0, Index a1, const Val& val, const Idx& idx, const double* B,
                         Index ld, double* o) {
#if defined(__GNUC__)
  constexpr int P = M / 2;
  Pair acc[P > 0 ? P : 1];
  for (int k = 0; k < P; ++k) acc[k] = load_pair(o + 2 * k);
  double last = (M % 2) ? o[M - 1] : 0.0;
  for (Index a = a0; a < a1; ++a) {
    const double x = val(a);
    const Pair xx = {x, x};
    const double* b = B + Index(idx(a)) * ld;
    for (int k = 0; k < P; ++k) acc[k] += xx * load_pair(b + 2 * k);
    if (M % 2) last += x * b[M - 1];
  }
  for (int k = 0; k < P; ++k) store_pair(o + 2 * k, acc[k]);
  if (M % 2) o[M - 1] = last;
#else
  double acc[M];
  for (int k = 0; k < M; ++k) acc[k] = o[k];
  for (Index a = a0; a < a1; ++a) {
    const double x = val(a);
    const double* b = B + Index(idx(a)) * ld;
    for (int k = 0; k < M; ++k) acc[k] += x * b[k];
  }
  for (int k = 0; k < M; ++k) o[k] = acc[k];
#endif
}

// O[idx(a) * ld + 0..M) += val(a) v[0..M) for a in [a0, a1), v held in registers (the
// sums of each entry of O in the order of the calls, as the entry-by-entry loop); val and
// idx: the entries' values (float64 or float32) and rows or columns.
template <int M, class Val, class Idx>
inline void scatter_fixed(Index a0, Index a1, const Val& val, const Idx& idx, const double* v,
                          Index ld, double* O) {
#if defined(__GNUC__)
  constexpr int P = M / 2;
  Pair vr[P > 0 ? P : 1];
  for (int k = 0; k < P; ++k) vr[k] = load_pair(v + 2 * k);
  const double last = (M % 2) ? v[M - 1] : 0.0;
  for (Index a = a0; a < a1; ++a) {
    const double x = val(a);
    const Pair xx = {x, x};
    double* o = O + Index(idx(a)) * ld;
    for (int k = 0; k < P; ++k) store_pair(o + 2 * k, load_pair(o + 2 * k) + xx * vr[k]);
    if (M % 2) o[M - 1] += x * last;
  }
#else
  double vr[M];
  for (int k = 0; k < M; ++k) vr[k] = v[k];
  for (Index a = a0; a < a1; ++a) {
    const double x = val(a);
    double* o = O + Index(idx(a)) * ld;
    for (int k = 0; k < M; ++k) o[k] += x * vr[k];
  }
#endif
}

// f(0, width) with a compile-time width == m, for m in [1, W]; false for other m.
template <int W, class F>
inline bool exact_width(Index m, F& f) {
  if constexpr (W > 0) {
    if (m == W) {
      f(Index(0), std::integral_constant<int, W>{});
      return true;
    }
    return exact_width<W - 1>(m, f);
  } else {
    return false;
  }
}

// Columns of one slice of column_slices at most (8 pairs of sums: half of SSE2's 16 vector
// registers).
constexpr Index kSliceColumns = 16;

// f(c, width) over the slices [c, c + width) of a block of m columns: slices of
// kSliceColumns, then one of the columns that remain, each with a compile-time width.
template <class F>
inline void column_slices(Index m, F&& f) {
  Index c = 0;
  for (; m - c > kSliceColumns; c += kSliceColumns) {
    f(c, std::integral_constant<int, int(kSliceColumns)>{});
  }
  auto rest = [&](Index c0, auto w) { f(c + c0, w); };
  exact_width<int(kSliceColumns)>(m - c, rest);
}

// scatter_fixed over a block of m columns (v and O with leading dimension m).
template <class Val, class Idx>
inline void scatter_entries(Index a0, Index a1, const Val& val, const Idx& idx, const double* v,
                            Index m, double* O) {
  column_slices(m, [&](Index c, auto w) {
    scatter_fixed<decltype(w)::value>(a0, a1, val, idx, v + c, m, O + c);
  });
}

// scatter_entries of entries in arrays (a CSC index, DualHead's rows).
inline void scatter_block(Index a0, Index a1, const double* val, const int* idx, const double* v,
                          Index m, double* O) {
  scatter_entries(
      a0, a1, [val](Index a) { return val[a]; }, [idx](Index a) { return idx[a]; }, v, m, O);
}

// Columns of a block that Operator::gram fuses (its row of sums on the stack); wider blocks
// take adjoint and forward one after the other.
constexpr Index kMaxGramColumns = 64;

// gather_fixed over a block of m columns (B and o with leading dimension m).
template <class Val, class Idx>
inline void gather_block(Index a0, Index a1, const Val& val, const Idx& idx, const double* B,
                         Index m, double* o) {
  column_slices(m, [&](Index c, auto w) {
    gather_fixed<decltype(w)::value>(a0, a1, val, idx, B + c, m, o + c);
  });
}

}  // namespace

Operator::Operator(const Design& X, bool intercept, int n_threads)
    : X_(X), off_(intercept ? 1 : 0), nt_(resolve_threads(n_threads)) {}

Operator::Operator(const Operator& other, bool intercept)
    : X_(other.X_), off_(intercept ? 1 : 0), nt_(other.nt_), csc_(other.csc_) {}

bool Operator::csc(bool block) const {
  if (!X_.sparse || X_.nnz() < 4096 || (!block && nt_ <= 1)) return false;
  if (!csc_->ptr.empty()) return true;
  // A CSC index of the entries (nnz values and row indices, a copy of the structure, not of
  // a dense X), built on first use: X~^T U gathers column by column, in the row order of a
  // serial scatter (the same sums for any thread count), and its random reads go to the
  // rows of U; for a wide X (n < p1) a serial X~ V scatters column by column into the
  // n x m output, so that the random accesses of both block products hit the smaller of
  // the two blocks (measured at n = 2e4, p = 1e5, m = 32: the p1 x m block, 26 MB, does not
  // stay in a 32 MB L3 cache). One vector with one thread needs none (a p1 vector stays in
  // cache): a Newton-CG fit on one thread never builds it.
  const Design& X = X_;
  const CsrView& c = X.csr;
  const Index nnz = X.nnz();
  csc_->ptr.assign(static_cast<size_t>(X.p + 1), 0);
  for (Index a = c.indptr[0]; a < c.indptr[X.n]; ++a)
    ++csc_->ptr[static_cast<size_t>(c.indices[a]) + 1];
  for (Index j = 0; j < X.p; ++j) csc_->ptr[j + 1] += csc_->ptr[j];
  csc_->row.resize(static_cast<size_t>(nnz));
  csc_->val.resize(static_cast<size_t>(nnz));
  std::vector<Index> next(csc_->ptr.begin(), csc_->ptr.end() - 1);
  for (Index i = 0; i < X.n; ++i) {
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
      const Index k = next[static_cast<size_t>(c.indices[a])]++;
      csc_->row[static_cast<size_t>(k)] = static_cast<int>(i);
      csc_->val[static_cast<size_t>(k)] = c.val(a);
    }
  }
  return true;
}

void Operator::forward(const double* v, double* out) const {
  ++passes;
  if (!X_.sparse) {
    linear_predictor(X_, v, off_ == 1, out, nt_);
    return;
  }
  const CsrView& c = X_.csr;
  const double b = off_ ? v[0] : 0.0;
  const double* th = v + off_;
  const int nt = threads_for(nt_, 2.0 * double(X_.nnz()));
#pragma omp parallel for schedule(static) num_threads(nt)
  for (Index i = 0; i < X_.n; ++i) {
    double s = b;
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) s += c.val(a) * th[c.indices[a]];
    out[i] = s;
  }
}

void Operator::adjoint(const double* u, double* out) const {
  ++passes;
  if (!X_.sparse) {
    gradient(X_, u, off_ == 1, out, nt_);
    return;
  }
  if (off_) {
    double s = 0.0;
    for (Index i = 0; i < X_.n; ++i) s += u[i];
    out[0] = s;
  }
  double* o = out + off_;
  if (csc(false)) {
#pragma omp parallel for schedule(static) num_threads(nt_)
    for (Index j = 0; j < X_.p; ++j) {
      double s = 0.0;
      for (Index a = csc_->ptr[j]; a < csc_->ptr[j + 1]; ++a) s += csc_->val[a] * u[csc_->row[a]];
      o[j] = s;
    }
    return;
  }
  std::fill(o, o + X_.p, 0.0);
  const CsrView& c = X_.csr;
  for (Index i = 0; i < X_.n; ++i) {
    const double ui = u[i];
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) o[c.indices[a]] += c.val(a) * ui;
  }
}

void Operator::forward(const RowMat& V, RowMat& out) const {
  ++passes;
  const Index m = V.cols(), n = X_.n, p = X_.p;
  out.resize(n, m);
  if (X_.sparse) {
    const CsrView& c = X_.csr;
    const int nt = threads_for(nt_, 2.0 * double(X_.nnz()) * double(m));
    const double* Vd = V.data();
    double* Od = out.data();
    if (nt == 1 && n < p + off_ && csc(true)) {
      for (Index i = 0; i < n; ++i) {
        double* o = Od + i * m;
        for (Index k = 0; k < m; ++k) o[k] = off_ ? Vd[k] : 0.0;
      }
      for (Index j = 0; j < p; ++j) {
        scatter_block(csc_->ptr[j], csc_->ptr[j + 1], csc_->val.data(), csc_->row.data(),
                      Vd + (off_ + j) * m, m, Od);
      }
      return;
    }
#pragma omp parallel for schedule(static) num_threads(nt)
    for (Index i = 0; i < n; ++i) {
      double* o = Od + i * m;
      if (off_) {
        for (Index k = 0; k < m; ++k) o[k] = Vd[k];
      } else {
        for (Index k = 0; k < m; ++k) o[k] = 0.0;
      }
      gather_block(
          c.indptr[i], c.indptr[i + 1], [&](Index a) { return c.val(a); },
          [&](Index a) { return c.indices[a]; }, Vd + off_ * m, m, o);
    }
    return;
  }
  const Partition part{n, std::max<Index>(1, n / kRowsPerTask)};
  const int nt = threads_for(nt_, 2.0 * double(n) * double(p) * double(m));
  const double* Vt = V.data() + off_ * m;
  ExceptionCatcher guard;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (Index t = 0; t < part.chunks; ++t) {
    guard.run([&] {
      X_.for_row_blocks(part.begin(t), part.begin(t + 1), [&](const auto& M, Index a) {
        double* C = out.data() + a * m;
        if (!block_gemm_forward(M, Vt, m, C)) {
          RowMap(C, M.rows(), m).noalias() = M * ConstRowMap(Vt, p, m);
        }
        if (off_) RowMap(C, M.rows(), m).rowwise() += V.row(0);
      });
    });
  }
  guard.rethrow();
}

bool Operator::hessian_rows(const RowMat& V, const Vec& d, RowMat& out) const {
  return hessian_rows_impl(V, [&](Index i, Index) { return d[i]; }, out);
}

bool Operator::hessian_rows(const RowMat& V, const RowMat& D, RowMat& out) const {
  const Index m = V.cols();
  const double* Dd = D.data();
  return hessian_rows_impl(V, [Dd, m](Index i, Index k) { return Dd[i * m + k]; }, out);
}

template <class Curv>
bool Operator::hessian_rows_impl(const RowMat& V, const Curv& curv, RowMat& out) const {
  const Index m = V.cols(), n = X_.n, p = X_.p;
  if (!X_.sparse || n < p + off_ || m > kMaxGramColumns ||
      threads_for(nt_, 4.0 * double(X_.nnz()) * double(m)) != 1) {
    return false;
  }
  passes += 2;
  out.setZero(p + off_, m);
  const CsrView& c = X_.csr;
  const double* Vd = V.data();
  double* Od = out.data();
  const auto val = [&](Index a) { return c.val(a); };
  const auto col = [&](Index a) { return c.indices[a]; };
  double t[kMaxGramColumns];
  for (Index i = 0; i < n; ++i) {
    for (Index k = 0; k < m; ++k) t[k] = off_ ? Vd[k] : 0.0;
    gather_block(c.indptr[i], c.indptr[i + 1], val, col, Vd + off_ * m, m, t);
    for (Index k = 0; k < m; ++k) t[k] *= std::max(0.0, curv(i, k));
    if (off_) {
      for (Index k = 0; k < m; ++k) Od[k] += t[k];
    }
    scatter_entries(c.indptr[i], c.indptr[i + 1], val, col, t, m, Od + off_ * m);
  }
  return true;
}

bool Operator::gram(const RowMat& U, const double* cscale, RowMat& out) const {
  const Index m = U.cols(), n = X_.n, p = X_.p;
  if (!X_.sparse || off_ || n >= p || m > kMaxGramColumns ||
      threads_for(nt_, 2.0 * double(X_.nnz()) * double(m)) != 1 || !csc(true)) {
    return false;
  }
  passes += 2;
  out.setZero(n, m);
  const double* Ud = U.data();
  double* Od = out.data();
  double w[kMaxGramColumns];
  for (Index j = 0; j < p; ++j) {
    for (Index k = 0; k < m; ++k) w[k] = 0.0;
    gather_block(
        csc_->ptr[j], csc_->ptr[j + 1], [&](Index a) { return csc_->val[a]; },
        [&](Index a) { return csc_->row[a]; }, Ud, m, w);
    for (Index k = 0; k < m; ++k) w[k] *= cscale[j];
    scatter_block(csc_->ptr[j], csc_->ptr[j + 1], csc_->val.data(), csc_->row.data(), w, m, Od);
  }
  return true;
}

void Operator::adjoint(const RowMat& U, RowMat& out) const {
  ++passes;
  const Index m = U.cols(), n = X_.n, p = X_.p;
  out.setZero(p + off_, m);
  if (off_) {  // the intercept's row, summed in row order (as hessian_rows)
    for (Index i = 0; i < n; ++i) {
      for (Index k = 0; k < m; ++k) out(0, k) += U(i, k);
    }
  }
  if (X_.sparse) {
    const double* Ud = U.data();
    double* Od = out.data() + off_ * m;
    // serial on a tall X: scattered by rows into the p x m output, the smaller of the two
    // blocks, with no CSC index (the same sums, in row order, as the CSC gather)
    const bool by_rows = nt_ <= 1 && n >= p + off_;
    if (!by_rows && csc(true)) {
#pragma omp parallel for schedule(static) num_threads(nt_)
      for (Index j = 0; j < p; ++j) {
        gather_block(
            csc_->ptr[j], csc_->ptr[j + 1], [&](Index a) { return csc_->val[a]; },
            [&](Index a) { return csc_->row[a]; }, Ud, m, Od + j * m);
      }
      return;
    }
    const CsrView& c = X_.csr;
    const auto val = [&](Index a) { return c.val(a); };
    const auto col = [&](Index a) { return c.indices[a]; };
    for (Index i = 0; i < n; ++i) {
      scatter_entries(c.indptr[i], c.indptr[i + 1], val, col, Ud + i * m, m, Od);
    }
    return;
  }
  const int nt = threads_for(nt_, 2.0 * double(n) * double(p) * double(m));
  const Partition part{n, reduction_chunks(n, p * m, nt, kRowsPerTask)};
  const Index wave = std::min<Index>(part.chunks, std::max(1, nt));
  std::vector<double> partial(static_cast<size_t>(wave * p * m));
  ExceptionCatcher guard;
  // waves of one chunk per thread, added in chunk order (sums independent of nt)
  for (Index c0 = 0; c0 < part.chunks; c0 += wave) {
    const Index c1 = std::min(part.chunks, c0 + wave);
#pragma omp parallel for schedule(static, 1) num_threads(nt)
    for (Index c = c0; c < c1; ++c) {
      guard.run([&] {
        interrupt::check();
        double* acc = partial.data() + (c - c0) * p * m;
        std::fill(acc, acc + p * m, 0.0);
        X_.for_row_blocks(part.begin(c), part.begin(c + 1), [&](const auto& M, Index a) {
          const double* Ub = U.data() + a * m;
          if (!block_gemm_adjoint(M, Ub, m, acc)) {
            RowMap(acc, p, m).noalias() += M.transpose() * ConstRowMap(Ub, M.rows(), m);
          }
        });
      });
    }
    guard.rethrow();
    for (Index c = c0; c < c1; ++c)
      out.bottomRows(p) += ConstRowMap(partial.data() + (c - c0) * p * m, p, m);
  }
}

void Operator::weighted_squares(const double* d, double* out) const {
  ++passes;
  const Index n = X_.n, p = X_.p;
  if (off_) {
    double s = 0.0;
    for (Index i = 0; i < n; ++i) s += d[i];
    out[0] = s;
  }
  double* o = out + off_;
  if (X_.sparse) {
    if (csc(false)) {
#pragma omp parallel for schedule(static) num_threads(nt_)
      for (Index j = 0; j < p; ++j) {
        double s = 0.0;
        for (Index a = csc_->ptr[j]; a < csc_->ptr[j + 1]; ++a)
          s += csc_->val[a] * csc_->val[a] * d[csc_->row[a]];
        o[j] = s;
      }
      return;
    }
    std::fill(o, o + p, 0.0);
    const CsrView& c = X_.csr;
    for (Index i = 0; i < n; ++i) {
      for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
        const double x = c.val(a);
        o[c.indices[a]] += x * x * d[i];
      }
    }
    return;
  }
  const int nt = threads_for(nt_, 2.0 * double(n) * double(p));
  const Partition part{n, reduction_chunks(n, p, nt, 1024)};
  std::vector<double> partial(static_cast<size_t>(part.chunks * p), 0.0);
  ExceptionCatcher guard;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (Index c = 0; c < part.chunks; ++c) {
    guard.run([&] {
      Eigen::Map<Vec> acc(partial.data() + c * p, p);
      X_.for_row_blocks(part.begin(c), part.begin(c + 1), [&](const auto& M, Index a) {
        acc.noalias() += M.cwiseAbs2().transpose() * Eigen::Map<const Vec>(d + a, M.rows());
      });
    });
  }
  guard.rethrow();
  Eigen::Map<Vec> ov(o, p);
  ov.setZero();
  for (Index c = 0; c < part.chunks; ++c) ov += Eigen::Map<const Vec>(partial.data() + c * p, p);
}

void Operator::squares_times(const double* cvec, double* out) const {
  ++passes;
  const Index n = X_.n, p = X_.p;
  const double b = off_ ? cvec[0] : 0.0;
  const double* th = cvec + off_;
  if (X_.sparse) {
    const CsrView& c = X_.csr;
#pragma omp parallel for schedule(static) num_threads(threads_for(nt_, 2.0 * double(X_.nnz())))
    for (Index i = 0; i < n; ++i) {
      double s = b;
      for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
        const double x = c.val(a);
        s += x * x * th[c.indices[a]];
      }
      out[i] = s;
    }
    return;
  }
  const Partition part{n, std::max<Index>(1, n / kRowsPerTask)};
  Eigen::Map<const Vec> t(th, p);
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(threads_for(nt_, 2.0 * double(n) * double(p)))
  for (Index c = 0; c < part.chunks; ++c) {
    X_.for_row_blocks(part.begin(c), part.begin(c + 1), [&](const auto& M, Index a) {
      Eigen::Map<Vec> o(out + a, M.rows());
      o.noalias() = M.cwiseAbs2() * t;
      o.array() += b;
    });
  }
}

void HessianOp::apply(const RowMat& V, RowMat& out, RowMat& work) const {
  const Index m = V.cols();
  if (m == 1) {  // one vector: the vector kernels (no per-entry loop over a block's width)
    work.resize(op.n(), 1);
    op.forward(V.data(), work.data());
    for (Index i = 0; i < work.rows(); ++i) work(i, 0) *= std::max(0.0, d[i]);
    out.resize(V.rows(), 1);
    op.adjoint(work.data(), out.data());
    for (Index j = 0; j < out.rows(); ++j) out(j, 0) += pen[j] * V(j, 0);
    return;
  }
  if (!op.hessian_rows(V, d, out)) {
    op.forward(V, work);
    for (Index i = 0; i < work.rows(); ++i) {
      const double di = std::max(0.0, d[i]);
      double* w = work.data() + i * m;
      for (Index k = 0; k < m; ++k) w[k] *= di;
    }
    op.adjoint(work, out);
  }
  for (Index j = 0; j < out.rows(); ++j) {
    const double pj = pen[j];
    const double* v = V.data() + j * m;
    double* o = out.data() + j * m;
    for (Index k = 0; k < m; ++k) o[k] += pj * v[k];
  }
}

Vec jacobi(const Operator& op, const Vec& d, const Vec& pen) {
  Vec dc = d.cwiseMax(0.0);
  Vec diag(op.p1());
  op.weighted_squares(dc.data(), diag.data());
  diag += pen;
  Vec minv(diag.size());
  for (Index j = 0; j < diag.size(); ++j) minv[j] = diag[j] > 0.0 ? 1.0 / diag[j] : 1.0;
  return minv;
}

HeadBlock head_block(const Design& X, bool intercept, const Vec& d, const Vec& pen,
                     const Vec& minv) {
  HeadBlock hb;
  const Index off = intercept ? 1 : 0;
  const Index kh = std::min(kHeadColumns, X.p / 2);
  if (!X.sparse || kh < kMinHeadColumns) return hb;
  // the columns of largest H_jj (smallest minv), the intercept first
  std::vector<Index> cols(static_cast<size_t>(X.p));
  for (Index j = 0; j < X.p; ++j) cols[static_cast<size_t>(j)] = j;
  std::partial_sort(cols.begin(), cols.begin() + kh, cols.end(),
                    [&](Index a, Index b) { return minv[off + a] < minv[off + b]; });
  cols.resize(static_cast<size_t>(kh));
  std::sort(cols.begin(), cols.end());
  const Index k = kh + off;
  std::vector<int> pos(static_cast<size_t>(X.p), -1);
  for (Index a = 0; a < kh; ++a) pos[static_cast<size_t>(cols[a])] = int(a + off);
  Mat Hh = Mat::Zero(k, k);
  // a row's head entries (at most k: a canonical row holds each column once), in arrays
  // sized once (push_back per entry took a third of the time)
  std::vector<Index> at(static_cast<size_t>(k));
  std::vector<double> val(static_cast<size_t>(k));
  const CsrView& c = X.csr;
  for (Index i = 0; i < X.n; ++i) {
    const double di = std::max(0.0, d[i]);
    if (!(di > 0.0)) continue;
    Index* atp = at.data();
    double* vp = val.data();
    size_t r = 0;
    if (intercept) {
      atp[r] = 0;
      vp[r++] = 1.0;
    }
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
      const int q = pos[static_cast<size_t>(c.indices[a])];
      if (q < 0) continue;
      atp[r] = q;
      vp[r++] = c.val(a);
    }
    // each entry's products with the entries before it, into its own column of the
    // column-major Hh: the upper triangle, contiguous (a canonical CSR row's columns are
    // sorted, so are their head positions)
    for (size_t u = 0; u < r; ++u) {
      const double s = di * vp[u];
      double* hu = Hh.data() + atp[u] * k;
      for (size_t v = 0; v <= u; ++v) hu[atp[v]] += s * vp[v];
    }
  }
  hb.idx.resize(static_cast<size_t>(k));
  if (intercept) hb.idx[0] = 0;
  for (Index a = 0; a < kh; ++a) hb.idx[static_cast<size_t>(a + off)] = cols[a] + off;
  for (Index a = 0; a < k; ++a) Hh(a, a) += pen[hb.idx[static_cast<size_t>(a)]];
  hb.llt.compute(Hh.selfadjointView<Eigen::Upper>());
  if (hb.llt.info() != Eigen::Success) hb.idx.clear();
  return hb;
}

Point::Point(const Problem& pb_, LossKind loss_, const Vec& beta_, int n_threads)
    : pb(pb_),
      loss(loss_),
      nt(resolve_threads(n_threads)),
      op(pb_.X, pb_.intercept, nt),
      beta(beta_) {
  if (beta.size() != pb.p1()) throw InvalidInput("beta has the wrong length");
  const Index n = pb.n();
  eta.resize(n);
  g.resize(n);
  d.resize(n);
  dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, n, pb.lp);
    op.forward(beta.data(), eta.data());
    pb.add_offset(eta.data());
    detail::derivatives<Loss>(pb, eta.data(), g.data(), d.data(), nt);
  });
  minv = jacobi(op, d, pb.pen);
}

const HeadBlock& Point::head() const {
  if (!head_built_) {
    head_ = head_block(pb.X, pb.intercept, d, pb.pen, minv);
    head_built_ = true;
  }
  return head_;
}

void HeadBlock::apply(const RowMat& R, RowMat& Z) const {
  const Index k = Index(idx.size()), m = R.cols();
  Mat B(k, m);
  for (Index a = 0; a < k; ++a) B.row(a) = R.row(idx[static_cast<size_t>(a)]);
  llt.solveInPlace(B);
  for (Index a = 0; a < k; ++a) Z.row(idx[static_cast<size_t>(a)]) = B.row(a);
}

DualHead dual_head(const Design& X, const Vec& sd, const Vec& pinv, bool intercept, const Vec& kinv,
                   int n_threads) {
  DualHead dh;
  const Index n = X.n, p = X.p;
  if (!X.sparse || n == 0) return dh;
  const CsrView& c = X.csr;
  // the columns of A = D^{1/2} X P^{-1/2} of largest squared norm
  Vec col = Vec::Zero(p);
  for (Index i = 0; i < n; ++i) {
    const double di = sd[i] * sd[i];
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
      const double v = c.val(a);
      col[c.indices[a]] += di * v * v;
    }
  }
  col.array() *= pinv.array();
  Index k = std::min({kDualHeadColumns, p / 4, Index((col.array() > kDualHeadNorm).count())});
  if (k < 1) return dh;
  std::vector<Index> cols(static_cast<size_t>(p));
  for (Index j = 0; j < p; ++j) cols[static_cast<size_t>(j)] = j;
  std::partial_sort(cols.begin(), cols.begin() + k, cols.end(),
                    [&](Index a, Index b) { return col[a] > col[b]; });
  std::vector<int> pos(static_cast<size_t>(p), -1);  // a head column's rank by norm
  for (Index a = 0; a < k; ++a) pos[static_cast<size_t>(cols[static_cast<size_t>(a)])] = int(a);
  // the k x k matrix costs the pairs of each row's head entries: k halved while they exceed
  // kDualHeadPairs per entry of X (long rows, most of whose entries are head columns)
  const double budget = kDualHeadPairs * double(c.indptr[n] - c.indptr[0]);
  for (; k > 1; k /= 2) {
    double pairs = 0.0;
    for (Index i = 0; i < n; ++i) {
      double h = 0.0;
      for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
        const int q = pos[static_cast<size_t>(c.indices[a])];
        h += (q >= 0 && q < k) ? 1.0 : 0.0;
      }
      pairs += 0.5 * h * (h + 1.0);
    }
    if (pairs <= budget) break;
  }
  for (int& q : pos) q = q < k ? q : -1;
  dh.ptr.assign(static_cast<size_t>(n + 1), 0);
  dh.einv.resize(n);
  // I + A_h^T E^{-1} A_h: its lower triangle by rows (row a at a * k: each row's head
  // entries sorted by column update one row of it at a time)
  std::vector<double> Gr(static_cast<size_t>(k * k), 0.0);
  std::vector<std::pair<int, double>> row;
  for (Index i = 0; i < n; ++i) {
    row.clear();
    for (Index a = c.indptr[i]; a < c.indptr[i + 1]; ++a) {
      const int q = pos[static_cast<size_t>(c.indices[a])];
      if (q >= 0) row.emplace_back(q, sd[i] * c.val(a) * std::sqrt(pinv[c.indices[a]]));
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    double head = 0.0;
    const size_t first = dh.val.size();
    for (const auto& [q, v] : row) {
      if (dh.val.size() > first && dh.idx.back() == q) {
        dh.val.back() += v;  // a repeated column: one entry, their sum
      } else {
        dh.idx.push_back(q);
        dh.val.push_back(v);
      }
    }
    for (size_t u = first; u < dh.val.size(); ++u) head += dh.val[u] * dh.val[u];
    dh.ptr[static_cast<size_t>(i + 1)] = Index(dh.val.size());
    // 1 + t_i: the whole row's 1 / kinv_i less its head columns', at least 1
    const double e = 1.0 / std::max(1.0, 1.0 / kinv[i] - head);
    dh.einv[i] = e;
    for (size_t u = first; u < dh.val.size(); ++u) {
      const double eu = e * dh.val[u];
      double* g = Gr.data() + Index(dh.idx[u]) * k;
      for (size_t v = first; v <= u; ++v) g[dh.idx[v]] += eu * dh.val[v];
    }
  }
  Mat G(k, k);
  for (Index a = 0; a < k; ++a) {
    for (Index b = 0; b <= a; ++b) G(a, b) = Gr[static_cast<size_t>(a * k + b)];
    G(a, a) += 1.0;
  }
  const double uu = sd.squaredNorm();
  if (intercept && uu > 0.0) {
    // C = M A_h = A_h - sd c^T: C^T E^{-1} C = A_h^T E^{-1} A_h - t c^T - c t^T
    // + c c^T (sd^T E^{-1} sd), t = A_h^T E^{-1} sd
    dh.c = Vec::Zero(k);
    Vec t = Vec::Zero(k);
    for (Index i = 0; i < n; ++i) {
      for (Index a = dh.ptr[i]; a < dh.ptr[i + 1]; ++a) {
        dh.c[dh.idx[a]] += sd[i] * dh.val[a];
        t[dh.idx[a]] += dh.einv[i] * sd[i] * dh.val[a];
      }
    }
    dh.c /= uu;
    const double ses = sd.dot(dh.einv.cwiseProduct(sd));
    G.triangularView<Eigen::Lower>() -= t * dh.c.transpose() + dh.c * t.transpose();
    G.triangularView<Eigen::Lower>() += ses * dh.c * dh.c.transpose();
  }
  dh.llt.compute(G);
  if (dh.llt.info() != Eigen::Success) dh.ptr.clear();  // empty: Jacobi alone
  dh.sd = sd;
  dh.n_threads = n_threads;
  return dh;
}

void DualHead::apply(RowMat& Z) const {
  const Index n = Z.rows(), m = Z.cols(), k = llt.rows();
  RowMat Wr = RowMat::Zero(k, m);  // A_h^T Z
  for (Index i = 0; i < n; ++i) {
    scatter_block(ptr[i], ptr[i + 1], val.data(), idx.data(), Z.data() + i * m, m, Wr.data());
  }
  Mat W = Wr;
  if (c.size() > 0) W.noalias() -= c * (sd.transpose() * Z);  // C^T Z
  llt.solveInPlace(W);
  Wr = W;
  Vec cw = c.size() > 0 ? Vec(W.transpose() * c) : Vec::Zero(m);
  const int nt = threads_for(n_threads, 2.0 * double(val.size()) * double(m));
#pragma omp parallel num_threads(nt)
  {
    std::vector<double> o(static_cast<size_t>(m));  // row i of C W
#pragma omp for schedule(static)
    for (Index i = 0; i < n; ++i) {
      for (Index q = 0; q < m; ++q) o[static_cast<size_t>(q)] = -sd[i] * cw[q];
      gather_block(
          ptr[i], ptr[i + 1], [&](Index a) { return val[static_cast<size_t>(a)]; },
          [&](Index a) { return idx[static_cast<size_t>(a)]; }, Wr.data(), m, o.data());
      double* z = Z.data() + i * m;
      for (Index q = 0; q < m; ++q) z[q] -= einv[i] * o[static_cast<size_t>(q)];
    }
  }
}

void DualHatOp::project(RowMat& V) const {
  if (!intercept) return;
  const Index n = V.rows(), m = V.cols();
  const double uu = sd.squaredNorm();
  if (!(uu > 0.0)) return;
  Vec c = Vec::Zero(m);
  for (Index i = 0; i < n; ++i) {
    const double* v = V.data() + i * m;
    for (Index k = 0; k < m; ++k) c[k] += sd[i] * v[k];
  }
  c /= uu;
  for (Index i = 0; i < n; ++i) {
    double* v = V.data() + i * m;
    for (Index k = 0; k < m; ++k) v[k] -= sd[i] * c[k];
  }
}

void DualHatOp::apply(const RowMat& V, RowMat& out, RowMat& work) const {
  const Index n = V.rows(), m = V.cols();
  out = V;
  project(out);
  for (Index i = 0; i < n; ++i) {
    double* o = out.data() + i * m;
    for (Index k = 0; k < m; ++k) o[k] *= sd[i];
  }
  if (op.gram(out, pinv.data(), work)) {
    out.swap(work);
  } else {
    op.adjoint(out, work);  // A^T M V (up to P^{-1/2})
    for (Index j = 0; j < work.rows(); ++j) {
      double* w = work.data() + j * m;
      for (Index k = 0; k < m; ++k) w[k] *= pinv[j];
    }
    op.forward(work, out);
  }
  for (Index i = 0; i < n; ++i) {
    double* o = out.data() + i * m;
    for (Index k = 0; k < m; ++k) o[k] *= sd[i];
  }
  project(out);
  out += V;
}

namespace {

template <class Op>
CgReport block_pcg_impl(const Op& H, const Vec& minv, const RowMat& B, RowMat& S,
                        const CgOptions& o) {
  // Row-major blocks: every update runs over the rows with the m columns' coefficients
  // side by side (a column at a time would stride through the whole block).
  const Index p1 = B.rows(), m = B.cols();
  CgReport rep;
  S.setZero(p1, m);
  const Vec tol = o.col_rtol.size() == m ? o.col_rtol : Vec::Constant(m, o.rtol);
  RowMat R = B, Z(p1, m), P(p1, m), Q(p1, m), work;
  Vec rz = Vec::Zero(m), bnorm = Vec::Zero(m), rnorm(m), pq(m), alpha(m), beta(m), rz_new(m);
  for (Index j = 0; j < p1; ++j) {
    for (Index k = 0; k < m; ++k) {
      const double r = R(j, k);
      Z(j, k) = r * minv[j];
      bnorm[k] += r * r;
    }
  }
  if (o.head) o.head->apply(R, Z);
  if (o.dual_head) o.dual_head->apply(Z);
  P = Z;
  for (Index j = 0; j < p1; ++j)
    for (Index k = 0; k < m; ++k) rz[k] += R(j, k) * Z(j, k);
  bnorm = bnorm.cwiseSqrt();
  rnorm = bnorm;
  std::vector<char> active(static_cast<size_t>(m), 0);
  Index n_active = 0;
  for (Index k = 0; k < m; ++k) {
    if (bnorm[k] > 0.0) {
      active[k] = 1;
      ++n_active;
    } else {
      P.col(k).setZero();
    }
  }
  while (n_active > 0 && rep.iterations < o.max_iter) {
    interrupt::check();
    H.apply(P, Q, work);
    ++rep.iterations;
    pq.setZero();
    for (Index j = 0; j < p1; ++j)
      for (Index k = 0; k < m; ++k) pq[k] += P(j, k) * Q(j, k);
    for (Index k = 0; k < m; ++k) {
      alpha[k] = 0.0;
      if (!active[k]) continue;
      if (!(pq[k] > 0.0)) {  // no curvature left along p (a singular H): stop this column
        active[k] = 0;
        --n_active;
        continue;
      }
      alpha[k] = rz[k] / pq[k];
    }
    rnorm.setZero();
    rz_new.setZero();
    for (Index j = 0; j < p1; ++j) {
      for (Index k = 0; k < m; ++k) {
        S(j, k) += alpha[k] * P(j, k);
        const double r = R(j, k) - alpha[k] * Q(j, k);
        R(j, k) = r;
        Z(j, k) = r * minv[j];
        rnorm[k] += r * r;
      }
    }
    if (o.head) o.head->apply(R, Z);
    if (o.dual_head) o.dual_head->apply(Z);
    for (Index j = 0; j < p1; ++j)
      for (Index k = 0; k < m; ++k) rz_new[k] += R(j, k) * Z(j, k);
    for (Index k = 0; k < m; ++k) {
      rnorm[k] = std::sqrt(rnorm[k]);
      beta[k] = 0.0;
      if (!active[k]) continue;
      if (rnorm[k] <= tol[k] * bnorm[k]) {
        active[k] = 0;
        --n_active;
        continue;
      }
      beta[k] = rz_new[k] / rz[k];
      rz[k] = rz_new[k];
    }
    for (Index j = 0; j < p1; ++j) {
      for (Index k = 0; k < m; ++k) P(j, k) = active[k] ? Z(j, k) + beta[k] * P(j, k) : 0.0;
    }
  }
  for (Index k = 0; k < m; ++k) {
    if (!(bnorm[k] > 0.0)) continue;
    rep.worst = std::max(rep.worst, rnorm[k] / bnorm[k]);
    rep.converged = rep.converged && rnorm[k] <= tol[k] * bnorm[k];
  }
  return rep;
}

}  // namespace

CgReport block_pcg(const HessianOp& H, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o) {
  return block_pcg_impl(H, minv, B, S, o);
}

CgReport block_pcg(const DualHatOp& K, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o) {
  return block_pcg_impl(K, minv, B, S, o);
}

CgReport block_pcg(const MultiHessianOp& H, const Vec& minv, const RowMat& B, RowMat& S,
                   const CgOptions& o) {
  return block_pcg_impl(H, minv, B, S, o);
}

void MultiHessianOp::apply(const RowMat& V, RowMat& out, RowMat& work) const {
  const Index m = V.cols();
  if (op.hessian_rows(V, D, out)) {
    for (Index j = 0; j < out.rows(); ++j) {
      const double pj = pen[j];
      const double* v = V.data() + j * m;
      double* o = out.data() + j * m;
      for (Index k = 0; k < m; ++k) o[k] += pj * v[k];
    }
    return;
  }
  op.forward(V, work);
  for (Index i = 0; i < work.rows(); ++i) {
    const double* di = D.data() + i * m;
    double* w = work.data() + i * m;
    for (Index k = 0; k < m; ++k) w[k] *= std::max(0.0, di[k]);
  }
  op.adjoint(work, out);
  for (Index j = 0; j < out.rows(); ++j) {
    const double pj = pen[j];
    const double* v = V.data() + j * m;
    double* o = out.data() + j * m;
    for (Index k = 0; k < m; ++k) o[k] += pj * v[k];
  }
}

}  // namespace mf

namespace detail {

// A smooth primal problem as a model of newton_drive without any p1 x p1 matrix: the
// direction by PCG on Hessian-vector products to the forcing tolerance
// min(0.5, sqrt(max|grad| / sum(w))) (superlinear convergence of truncated Newton), floored
// at kResidualShare of the stopping test, the
// move by the shared Armijo test on eta + t X~ step (one pass for X~ step, one for the
// gradient at the accepted point). Compiled once: the loss enters through its O(n)
// passes (LossPasses).
class CgModel {
 public:
  CgModel(const LossPasses& loss, YPartCache ypart, const Problem& pb, FitState& st,
          const mf::Operator& op, int nt, Index max_cg, double tol)
      : loss_(loss),
        pb_(pb),
        st_(st),
        op_(op),
        nt_(nt),
        max_cg_(max_cg),
        tol_(tol),
        ypart_(std::move(ypart)) {
    const Index n = pb.n();
    g_.resize(n);
    d_.resize(n);
    f_ = loss_.derivatives_objective(pb, st.eta.data(), g_.data(), d_.data(), st.beta, nt_, -1,
                                     cache_of(ypart_));
    gradient_at_point();
    sw_ = pb.weight_sum();
  }
  double gnorm() const { return st_.grad.cwiseAbs().maxCoeff(); }
  double objective() const { return f_; }
  // The preconditioner at the point: Jacobi and the head block of the frequent columns (CSR
  // designs; docs/math/matrix_free.md, "Preconditioner"), as the leverage solves'. Measured
  // on 20000 x 100000 text-like rows (wide_sparse.py's sparse-target), fits from the default
  // start, CG iterations / CPU s without -> with the head block: lambda 2.78 45 -> 15 (0.40
  // -> 0.25 s), 0.046 167 -> 64 (1.29 -> 0.57 s), 0.006 471 -> 223 (4.0 -> 2.0 s), 1e-4 320
  // -> 171 (2.5 -> 1.5 s); 20000 x 5000 at lambda 1: 32 -> 19 (80 -> 54 passes over X).
  void refactor() {
    minv_ = mf::jacobi(op_, d_, pb_.pen);
    head_ = mf::head_block(pb_.X, pb_.intercept, d_, pb_.pen, minv_);
    at_point_ = true;
  }
  bool factor_at_point() const { return at_point_; }
  bool newton_at_point() const { return at_point_; }
  bool chord_ok() const { return false; }
  double direction(Vec& step) {
    const mf::HessianOp H{op_, d_, pb_.pen};
    RowMat B = -st_.grad, S;
    mf::CgOptions o;
    const double gn2 = st_.grad.norm();
    const double floor = gn2 > 0.0 ? kResidualShare * tol_ * sw_ / gn2 : 0.0;
    o.rtol = std::min(0.5, std::max(std::sqrt(gnorm() / sw_), floor));
    o.max_iter = max_cg_;
    if (!head_.empty()) o.head = &head_;
    const mf::CgReport rep = mf::block_pcg(H, minv_, B, S, o);
    st_.cg_iterations += rep.iterations;
    step = S.col(0);
    if (!(-st_.grad.dot(step) > 0.0)) step = -st_.grad.cwiseProduct(minv_);  // no curvature
    return -st_.grad.dot(step);
  }
  double move(const Vec& step, double dec) {
    if (!(dec > 0.0)) return 0.0;
    Vec xs(pb_.n()), eta_try(pb_.n());
    op_.forward(step.data(), xs.data());
    double f_try = f_;
    const double t = armijo(f_, dec, [&](double s) {
      eta_try = st_.eta + s * xs;
      f_try = loss_.objective(pb_, eta_try.data(), st_.beta + s * step, nt_, -1, cache_of(ypart_));
      return f_try;
    });
    if (t == 0.0) return 0.0;
    st_.beta += t * step;
    st_.eta.swap(eta_try);
    // the objective there is the accepted trial's (derivatives_objective's value: the same
    // terms and sums); the loss's derivatives without its value
    f_ = f_try;
    loss_.derivatives(pb_, st_.eta.data(), g_.data(), d_.data(), nt_, -1);
    gradient_at_point();
    at_point_ = false;
    return t;
  }
  void finish(const DriveResult& r) {
    st_.n_iter += r.n_iter;
    st_.hessian_passes = 0;
    st_.objective = f_;
    st_.grad_norm = gnorm() / sw_;
    st_.converged = r.converged;
    st_.matvec_passes = op_.passes;
  }

 private:
  void gradient_at_point() {
    st_.grad.resize(pb_.p1());
    op_.adjoint(g_.data(), st_.grad.data());
    st_.grad.array() += pb_.pen.array() * st_.beta.array();
    if (!st_.grad.allFinite()) {
      throw InvalidInput(
          "the gradient is not finite (overflow of the loss at extreme linear predictors); "
          "rescale X or increase the penalty");
    }
    st_.grad_pen = pb_.pen;
  }
  const LossPasses loss_;
  const Problem& pb_;
  FitState& st_;
  const mf::Operator& op_;
  int nt_;
  Index max_cg_;
  double tol_;
  YPartCache ypart_;
  Vec g_, d_, minv_;
  mf::HeadBlock head_;
  double f_ = 0.0, sw_ = 1.0;
  bool at_point_ = false;
};

// beta0: the starting point (the caller's, or initial_beta's); ypart: the loss's cache.
FitState cg_fit_impl(const LossPasses& loss, YPartCache ypart, const Problem& pb,
                     const CgFitOptions& opt, const Vec& beta0) {
  const int nt = resolve_threads(opt.fit.n_threads);
  const mf::Operator op(pb.X, pb.intercept, nt);
  FitState st;
  st.beta = beta0;
  st.eta.resize(pb.n());
  if (st.beta.tail(pb.X.p).isZero(0.0)) {
    st.eta.setConstant(pb.intercept ? st.beta[0] : 0.0);
  } else {
    op.forward(st.beta.data(), st.eta.data());
  }
  pb.add_offset(st.eta.data());
  CgModel m(loss, std::move(ypart), pb, st, op, nt, opt.max_cg, opt.fit.tol);
  if (!std::isfinite(m.objective())) {
    throw InvalidInput("the objective is not finite at the starting point");
  }
  DriveOptions o;
  o.tol = o.target = opt.fit.tol;
  o.scale = pb.weight_sum();
  o.max_iter = std::max<Index>(1, opt.fit.max_iter);
  o.check_first = true;
  const DriveResult r = newton_drive(m, o, RefreshPolicy{});
  m.finish(r);
  return st;
}

}  // namespace detail

FitState cg_fit(const Problem& pb, LossKind loss, const CgFitOptions& opt, const Vec* beta0) {
  if (pb.has_l1()) {
    throw InvalidInput(
        "the matrix-free route fits smooth (L2) penalties; an L1 term uses solver='primal'");
  }
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    return detail::cg_fit_impl(detail::loss_passes<Loss>(), detail::y_part_cache<Loss>(pb), pb, opt,
                               beta0 ? *beta0 : detail::initial_beta<Loss>(pb));
  });
}

FitState cg_prepare(const Problem& pb, LossKind loss, const Vec& beta, const FitOptions& opt) {
  return dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    check_response<Loss>(pb.y, pb.n(), pb.lp);
    const int nt = resolve_threads(opt.n_threads);
    const mf::Operator op(pb.X, pb.intercept, nt);
    FitState st;
    st.beta = beta;
    st.eta.resize(pb.n());
    op.forward(beta.data(), st.eta.data());
    pb.add_offset(st.eta.data());
    Vec g(pb.n()), d(pb.n());
    st.objective =
        detail::derivatives_objective<Loss>(pb, st.eta.data(), g.data(), d.data(), beta, nt);
    st.grad.resize(pb.p1());
    op.adjoint(g.data(), st.grad.data());
    st.grad.array() += pb.pen.array() * beta.array();
    st.grad_pen = pb.pen;
    st.matvec_passes = op.passes;
    st.grad_norm = st.grad.cwiseAbs().maxCoeff() / pb.weight_sum();
    st.converged = st.grad_norm <= opt.tol;
    return st;
  });
}

namespace {

// Whether the dual form serves this call (LeverageOptions::dual); `exact` gets the rows
// whose leverages it computes exactly (kDualGainRatio).
bool dual_applies(const Problem& pb, const Vec& g, const Vec& d, const LeverageOptions& o,
                  std::vector<Index>& exact) {
  const Index n = pb.n(), p1 = pb.p1(), off = pb.intercept ? 1 : 0;
  if (!o.dual || n >= p1) return false;
  for (Index j = off; j < p1; ++j) {
    if (!(pb.pen[j] > 0.0)) return false;
  }
  for (Index i = 0; i < n; ++i) {
    if (std::abs(g[i]) > kDualGainRatio * std::max(0.0, d[i])) {
      exact.push_back(i);
      if (Index(exact.size()) > kDualExactRows) return false;
    }
  }
  return true;
}

// The probes of random_leverages in the dual form (docs/math/matrix_free.md, "The dual
// form"): per batch of unweighted Rademacher probes r, T = (M A A^T M + I)^{-1} r by PCG on
// n-vectors (Jacobi: 1 + d_i sum_j x_ij^2 / P_j), S r = P_u r + r - T (S the weighted hat
// matrix), and h_i estimated by r_i (S r)_i / d_i; the control variate subtracts
// r_i (D^{1/2} A0 D^{1/2} r)_i / d_i as in the primal form. Rows with d_i = 0 and g_i = 0 have
// no use for a leverage (they keep A0's); the rows in `exact` get theirs by one PCG solve.
void dual_probes(const mf::Point& pt, const LeverageOptions& o, const std::vector<Index>& exact,
                 RandomLeverages& out) {
  const Problem& pb = pt.pb;
  const mf::Operator& op = pt.op;
  const Vec& minv = pt.minv;
  const Index n = pb.n(), p1 = pb.p1(), off = pb.intercept ? 1 : 0, G = o.n_groups;
  const Index per = o.n_probes / G;
  const int nt = pt.nt;
  const Index passes0 = op.passes;
  const mf::Operator op0(op, false);
  const Vec sd = out.d.cwiseMax(0.0).cwiseSqrt();
  const Vec pinv = pb.pen.tail(p1 - off).cwiseInverse();
  Vec kinv(n);
  op0.squares_times(pinv.data(), kinv.data());
  for (Index i = 0; i < n; ++i) kinv[i] = 1.0 / (1.0 + sd[i] * sd[i] * kinv[i]);
  const mf::DualHatOp K{op0, sd, pinv, pb.intercept};
  const double uu = sd.squaredNorm();
  mf::CgOptions co;
  co.rtol = o.cg_rtol;
  co.max_iter = o.max_cg;
  const mf::DualHead head = mf::dual_head(pb.X, sd, pinv, pb.intercept, kinv, nt);
  if (!head.empty()) {
    kinv = head.einv;
    co.dual_head = &head;
  }
  out.dual = true;
  const Index gpb = std::max<Index>(1, kBatchProbes / per);
  RowMat Z, T, SZ, B, A0Z;
  for (Index g0 = 0; g0 < G; g0 += gpb) {
    const Index g1 = std::min(G, g0 + gpb), m = (g1 - g0) * per;
    Z.resize(n, m);
#pragma omp parallel for schedule(static) num_threads(threads_for(nt, double(n) * double(m)))
    for (Index i = 0; i < n; ++i) {
      for (Index k = 0; k < m; ++k) Z(i, k) = rademacher(o.seed, i, o.first_probe + g0 * per + k);
    }
    const mf::CgReport rep = mf::block_pcg(K, kinv, Z, T, co);
    out.cg_iterations += rep.iterations;
    out.converged = out.converged && rep.converged;
    out.worst_residual = std::max(out.worst_residual, rep.worst);
    SZ = Z - T;  // S r = P_u r + r - T
    if (pb.intercept && uu > 0.0) {
      const Vec c = (Z.transpose() * sd) / uu;
      SZ.noalias() += sd * c.transpose();
    }
    B = Z.array().colwise() * sd.array();
    RowMat XB;
    op.adjoint(B, XB);  // X~^T D^{1/2} r
    XB.array().colwise() *= minv.array();
    op.forward(XB, A0Z);  // A0 D^{1/2} r
    for (Index i = 0; i < n; ++i) {
      const double di = sd[i] * sd[i];
      for (Index gg = g0; gg < g1; ++gg) {
        if (!(di > 0.0)) {
          out.plain(i, gg) = out.diag0[i];
          out.control(i, gg) = 0.0;
          continue;
        }
        double sp = 0.0, sc = 0.0;
        for (Index k = (gg - g0) * per; k < (gg - g0 + 1) * per; ++k) {
          sp += Z(i, k) * SZ(i, k);
          sc += Z(i, k) * (SZ(i, k) - sd[i] * A0Z(i, k));
        }
        out.plain(i, gg) = sp / (double(per) * di);
        out.control(i, gg) = sc / (double(per) * di);
      }
    }
  }
  out.passes = op.passes - passes0 + op0.passes;
  if (exact.empty()) return;
  const Vec h = row_leverages(pt, exact.data(), Index(exact.size()), o.cg_rtol, o.max_cg);
  out.exact_rows = Index(exact.size());
  for (Index k = 0; k < out.exact_rows; ++k) {
    const Index i = exact[k];
    out.plain.row(i).setConstant(h[k]);
    out.control.row(i).setConstant(h[k] - out.diag0[i]);
  }
}

}  // namespace

RandomLeverages random_leverages(const mf::Point& pt, const LeverageOptions& o) {
  if (o.n_groups < 1 || o.n_probes < o.n_groups || o.n_probes % o.n_groups != 0) {
    throw InvalidInput("n_probes must be a positive multiple of n_groups");
  }
  const Problem& pb = pt.pb;
  const mf::Operator& op = pt.op;
  const Vec& minv = pt.minv;
  const Index n = pb.n(), G = o.n_groups, per = o.n_probes / o.n_groups;
  const int nt = pt.nt;
  const Index passes0 = op.passes;
  RandomLeverages out;
  out.g = pt.g;
  out.d = pt.d;
  // Probes weighted by s_i = sqrt(d_i + floor): the estimated matrix W A W (W = diag(s))
  // is about the hat matrix D^{1/2} A D^{1/2}, whose eigenvalues lie in [0, 1], so that
  // sum_j (W A W)_ij^2 <= (W A W)_ii bounds each estimate's variance; h_i is then
  // (W A W)_ii / s_i^2. The floor keeps s_i > 0 where l''_i = 0.
  const double dmean = out.d.cwiseMax(0.0).mean();
  const double floor = dmean > 0.0 ? kProbeWeightFloor * dmean : 1.0;
  const Vec s = (out.d.cwiseMax(0.0).array() + floor).sqrt().matrix();
  out.diag0.resize(n);
  op.squares_times(minv.data(), out.diag0.data());
  out.plain.setZero(n, G);
  out.control.setZero(n, G);
  const mf::HessianOp H{op, out.d, pb.pen};
  mf::CgOptions co;
  co.rtol = o.cg_rtol;
  co.max_iter = o.max_cg;
  // groups side by side in batches of about kBatchProbes probes
  const Index gpb = std::max<Index>(1, kBatchProbes / per);
  std::vector<Index> exact;
  if (dual_applies(pb, out.g, out.d, o, exact)) {
    dual_probes(pt, o, exact, out);
    return out;
  }
  const mf::HeadBlock& head = pt.head();
  if (!head.empty()) co.head = &head;
  RowMat Z, B, S, AZ, A0Z, MB;
  for (Index g0 = 0; g0 < G; g0 += gpb) {
    const Index g1 = std::min(G, g0 + gpb), m = (g1 - g0) * per;
    Z.resize(n, m);
#pragma omp parallel for schedule(static) num_threads(threads_for(nt, double(n) * double(m)))
    for (Index i = 0; i < n; ++i) {
      for (Index k = 0; k < m; ++k)
        Z(i, k) = s[i] * rademacher(o.seed, i, o.first_probe + g0 * per + k);
    }
    op.adjoint(Z, B);  // X~^T W z
    const mf::CgReport rep = mf::block_pcg(H, minv, B, S, co);
    out.cg_iterations += rep.iterations;
    out.converged = out.converged && rep.converged;
    out.worst_residual = std::max(out.worst_residual, rep.worst);
    op.forward(S, AZ);  // A W z
    MB = B.array().colwise() * minv.array();
    op.forward(MB, A0Z);  // A0 W z
    // z_ik (W A W z_k)_i / s_i^2 = (W z_k)_i (A W z_k)_i / s_i^2
    for (Index i = 0; i < n; ++i) {
      const double s2 = s[i] * s[i];
      for (Index gg = g0; gg < g1; ++gg) {
        double sp = 0.0, sc = 0.0;
        for (Index k = (gg - g0) * per; k < (gg - g0 + 1) * per; ++k) {
          sp += Z(i, k) * AZ(i, k);
          sc += Z(i, k) * (AZ(i, k) - A0Z(i, k));
        }
        out.plain(i, gg) = sp / (double(per) * s2);
        out.control(i, gg) = sc / (double(per) * s2);
      }
    }
  }
  out.passes = op.passes - passes0;
  return out;
}

Vec row_leverages(const mf::Point& pt, const Index* rows, Index r, double rtol, Index max_cg,
                  RowMat* solves) {
  const Problem& pb = pt.pb;
  const Index n = pb.n(), p1 = pb.p1();
  for (Index k = 0; k < r; ++k) {
    if (rows[k] < 0 || rows[k] >= n) throw InvalidInput("row_leverages: a row is out of range");
  }
  RowMat B = RowMat::Zero(p1, r), S;
  Vec x(p1);
  for (Index k = 0; k < r; ++k) {
    pb.row(rows[k], x.data());
    B.col(k) = x;
  }
  mf::CgOptions co;
  co.rtol = rtol;
  co.max_iter = max_cg;
  const mf::HeadBlock& head = pt.head();
  if (!head.empty()) co.head = &head;
  mf::block_pcg(mf::HessianOp{pt.op, pt.d, pb.pen}, pt.minv, B, S, co);
  Vec h(r);
  for (Index k = 0; k < r; ++k) h[k] = B.col(k).dot(S.col(k));
  if (solves != nullptr) *solves = S.transpose();  // (r x p1): H^{-1} x~_i per row
  return h;
}

AloJackknife alo_jackknife(LossKind loss, const LossParams& lp, const double* y, const double* w,
                           const Eigen::Ref<const Vec>& eta, const Eigen::Ref<const Vec>& g,
                           const Eigen::Ref<const Vec>& d, const Eigen::Ref<const RowMat>& groups,
                           double dh_clip, int n_threads) {
  const Index n = groups.rows(), G = groups.cols();
  if (G < 2) throw InvalidInput("alo_jackknife: at least two groups");
  if (eta.size() != n || g.size() != n || d.size() != n) {
    throw InvalidInput("alo_jackknife: eta, g, d and the groups' rows do not match");
  }
  AloJackknife out;
  out.losses.resize(n);
  out.plain.resize(n);
  out.predictions.resize(n);
  out.leverages.resize(n);
  out.leverage_se.resize(n);
  const Index chunks = reduction_chunks(n, G, n_threads);
  const Partition part{n, chunks};
  Mat sums = Mat::Zero(G, chunks);  // per chunk: sum_i w_i L(h_(k))_i
  Vec wsum = Vec::Zero(chunks);
  const double Gd = double(G);
  dispatch_loss(loss, [&](auto L) {
    using Loss = decltype(L);
    // ALO at a leverage estimate of sample i: (loss, prediction, clipped h)
    const auto at = [&](Index i, double h, double& pred, double& hc) {
      const double dp = std::max(d[i], 0.0);
      h = std::max(h, 0.0);
      const double dh = std::min(dp * h, dh_clip);
      hc = dp > 0.0 ? dh / dp : h;
      pred = eta[i] + g[i] * hc / (1.0 - dh);
      return Loss::value(y[i], pred, lp);
    };
    const int nt = threads_for(n_threads, 40.0 * double(n) * double(G));
#pragma omp parallel for schedule(static) num_threads(nt)
    for (Index c = 0; c < chunks; ++c) {
      double* sc = sums.col(c).data();
      double ws = 0.0;
      for (Index i = part.begin(c); i < part.begin(c + 1); ++i) {
        const double* row = groups.row(i).data();
        double s = 0.0;
        for (Index k = 0; k < G; ++k) s += row[k];
        const double hm = s / Gd;
        double var = 0.0;
        for (Index k = 0; k < G; ++k) var += (row[k] - hm) * (row[k] - hm);
        out.leverage_se[i] = std::sqrt(var / (Gd - 1.0)) / std::sqrt(Gd);
        double pred, hc;
        const double l_all = at(i, hm, pred, hc);
        out.plain[i] = l_all;
        out.predictions[i] = pred;
        out.leverages[i] = hc;
        const double wi = w ? w[i] : 1.0;
        double del = 0.0;
        for (Index k = 0; k < G; ++k) {
          double pk, hk;
          const double lk = at(i, (Gd * hm - row[k]) / (Gd - 1.0), pk, hk);
          del += lk;
          sc[k] += wi * lk;
        }
        out.losses[i] = Gd * l_all - (Gd - 1.0) / Gd * del;
        ws += wi;
      }
      wsum[c] = ws;
    }
  });
  out.group_means = Vec::Zero(G);
  double W = 0.0;
  for (Index c = 0; c < chunks; ++c) {
    out.group_means += sums.col(c);
    W += wsum[c];
  }
  out.group_means /= W;
  return out;
}

}  // namespace aloocv
