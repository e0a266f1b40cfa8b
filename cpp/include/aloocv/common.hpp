// Common types, errors and the OpenMP helpers of the aloocv core.
#pragma once

#include <Eigen/Core>

#include "eigen_kernels.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "interrupt.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

// The core's x86-64 SIMD kernels (the row products of blas.cpp, the loss rows, the vector
// math): compiled with GCC/Clang target attributes (no -march) and chosen at run time by
// cpu_has_avx2_fma(); other compilers and CPUs take the plain loops.
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define ALOOCV_X86_SIMD 1
#endif

namespace aloocv {

// Whether this CPU runs those kernels (AVX2 and FMA), checked once; false where they are
// not compiled.
inline bool cpu_has_avx2_fma() {
#ifdef ALOOCV_X86_SIMD
  static const bool on = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return on;
#else
  return false;
#endif
}

using Index = Eigen::Index;
using Vec = Eigen::VectorXd;
using Mat = Eigen::MatrixXd;  // column-major

// Bad input or an ill-posed problem: surfaces in Python as ValueError.
struct InvalidInput : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The (leave-one-out) Hessian is singular or numerically not positive definite.
struct SingularHessian : InvalidInput {
  using InvalidInput::InvalidInput;
};

// Process-wide cap on the threads of the core's parallel regions, 0 for none: what
// threadpoolctl sets through the controller that aloocv registers (threadpool_limits,
// joblib's worker limits). One value for the whole process, as OpenBLAS's pthreads limit.
inline std::atomic<int> g_thread_limit{0};

inline int thread_limit() { return g_thread_limit.load(std::memory_order_relaxed); }
inline void set_thread_limit(int n) {
  g_thread_limit.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

// The threads of n_jobs=None: OpenMP's default for the calling thread (OMP_NUM_THREADS,
// omp_set_num_threads, threadpoolctl's OpenMP limit), capped by thread_limit().
inline int max_threads() {
#ifdef _OPENMP
  const int m = omp_get_max_threads();
#else
  const int m = 1;
#endif
  const int cap = thread_limit();
  return cap > 0 ? std::min(cap, m) : m;
}

inline int resolve_threads(int n_threads) { return n_threads >= 1 ? n_threads : max_threads(); }

// Threads for a loop of about `work` floating-point operations: small loops run on the
// calling thread. Waking a team costs microseconds on an idle machine and, measured on a
// loaded 2-core machine, up to milliseconds (spinning threads competing for the cores):
// an 800-iteration tuning run of a 150 x 50 ridge took 0.25 s on one thread and 1.8-9 s on
// two; a leave-one-out pass of breast-cancer size (569 x 30, ~5e5 flops) took 1 ms on one
// thread and 100-270 ms on two while another process kept both cores busy. Below a few
// million flops (about a millisecond on one core) a team cannot win much and can lose a
// lot. Results do not depend on the choice (reductions use fixed chunks).
constexpr double kSerialFlops = 4.0e6;
inline int threads_for(int n_threads, double work) {
  return work < kSerialFlops ? 1 : resolve_threads(n_threads);
}

// Catches the first exception thrown inside an OpenMP region so that it can be
// rethrown on the calling thread after the region ends: exceptions must never
// cross an OpenMP boundary.
class ExceptionCatcher {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  bool failed() const noexcept { return static_cast<bool>(error_); }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
  mutable std::mutex mutex_;
};

// A non-owning reference to a callable, called through one pointer: a pass over X (its
// parallel region, its blocks, its reductions) takes its per-block body as a FunctionRef
// and is compiled once, not once per body (per loss, per caller). Valid while the callable
// lives: a parameter type, bound to the caller's lambda for the call.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): binds lambdas
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// Splits [0, n) into `chunks` contiguous ranges; chunk c is [begin(c), begin(c+1)).
struct Partition {
  Index n = 0;
  Index chunks = 1;
  Index begin(Index c) const { return (n / chunks) * c + std::min(c, n % chunks); }
};

// The number of row chunks of a reduction over n rows whose partial result has
// `partial_size` doubles. It depends only on the problem's size, never on the thread
// count, so that results are bitwise identical for any number of threads: at most 64
// chunks, fewer when 64 partials would exceed 256 MiB (p1 above ~724 for a p1 x p1
// Hessian) or rows run short. A reduction therefore uses at most that many threads.
// (It used to raise the count to n_threads, which changed the sums above 64 threads.)
constexpr Index kMaxReductionChunks = 64;
inline Index reduction_chunks(Index n, Index partial_size, [[maybe_unused]] int n_threads,
                              Index min_rows = 256) {
  const Index budget = Index(32) * 1024 * 1024;  // doubles (256 MiB) for all partials
  Index k = std::max<Index>(1, budget / std::max<Index>(1, partial_size));
  k = std::min<Index>(k, kMaxReductionChunks);
  k = std::min<Index>(k, std::max<Index>(1, n / min_rows));
  return std::max<Index>(1, k);
}

}  // namespace aloocv
