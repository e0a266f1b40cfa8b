// Bindings of the per-chunk kernels (cpp/include/aloocv/chunk.hpp) that the dask driver
// (python/aloocv/_dask.py) calls on every chunk of X. No math here.
#include <pybind11/stl.h>

#include "aloocv/chunk.hpp"
#include "aloocv/enet.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

// The chunk's problem: no penalty (the driver adds it to the summed parts).
Problem chunk_problem(const py::object& X, const py::array& y, const std::optional<py::array>& w,
                      bool intercept, const std::optional<py::array>& offset) {
  const Index p = make_design(X).p;
  py::array_t<double> zeros(p);
  std::fill(zeros.mutable_data(), zeros.mutable_data() + p, 0.0);
  Problem pb = make_problem(X, y, w, zeros, intercept);
  apply_offset(offset, pb);
  return pb;
}

}  // namespace

void bind_chunk(py::module_& m) {
  m.def(
      "chunk_sums",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, bool intercept, const py::array& beta, bool hessian, bool check,
         int n_threads, const std::optional<py::array>& offset,
         const std::optional<py::array>& step, bool clip) {
        Problem pb = chunk_problem(X, y, w, intercept, offset);
        const LossKind kind = apply_loss(loss, pb);
        const Vec b = to_vec(beta, pb.p1(), "beta");
        std::optional<Vec> st;
        if (step) st = to_vec(*step, pb.p1(), "step");
        ChunkSums s;
        run_released([&] {
          s = chunk_sums(pb, kind, b, hessian, check, n_threads, st ? &*st : nullptr, clip);
        });
        ChunkSumsOut out;
        out.loss = s.loss;
        out.weight = s.weight;
        out.grad = to_numpy(s.grad);
        if (hessian) out.hess = square_to_numpy(s.hess, pb.p1());
        out.step_max = py::float_(s.step_max);
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("hessian"), py::arg("check"),
      py::arg("n_threads"), py::arg("offset") = py::none(), py::arg("step") = py::none(),
      py::arg("clip") = false,
      "One chunk at beta: sum w l, sum w, X~^T (w l'), (hessian=True) X~^T diag(w l'') X~ "
      "(clip=True: w l'' clipped at 0) and (step given) max |X~ step|.");

  m.def(
      "chunk_loo",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, bool intercept, const py::array& beta, const py::array& H,
         const std::string& method, bool gradient, double inv_sw, int n_threads,
         const std::optional<py::array>& offset) {
        Problem pb = chunk_problem(X, y, w, intercept, offset);
        const LossKind kind = apply_loss(loss, pb);
        const Index p1 = pb.p1();
        const Vec b = to_vec(beta, p1, "beta");
        const Mat Hm = to_mat(H, p1, "H");
        const LooMethod meth = loo_method_from_name(method);
        ChunkLoo r;
        run_released([&] { r = chunk_loo(pb, kind, b, Hm, meth, gradient, inv_sw, n_threads); });
        ChunkLooOut out;
        out.eta = move_to_numpy(std::move(r.eta));
        out.losses = move_to_numpy(std::move(r.res.losses));
        out.predictions = move_to_numpy(std::move(r.res.predictions));
        out.leverages = move_to_numpy(std::move(r.res.leverages));
        out.downdate = move_to_numpy(std::move(r.res.den));
        if (gradient) {
          out.r = to_numpy(r.r);
          out.S = square_to_numpy(r.S, p1);
        }
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("H"), py::arg("method"),
      py::arg("gradient"), py::arg("inv_sw"), py::arg("n_threads"), py::arg("offset") = py::none(),
      "One chunk's closed-form leave-one-out values from the full penalized Hessian H at beta; "
      "with gradient=True also X~^T (c A) and X~^T diag(c B) X~ of the exact hypergradient.");

  m.def(
      "chunk_adjoint",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, bool intercept, const py::array& beta, const py::array& M,
         int n_threads, const std::optional<py::array>& offset) {
        Problem pb = chunk_problem(X, y, w, intercept, offset);
        const LossKind kind = apply_loss(loss, pb);
        const Vec b = to_vec(beta, pb.p1(), "beta");
        const Mat Mm = to_mat(M, pb.p1(), "M");
        Vec s;
        run_released([&] { s = chunk_adjoint(pb, kind, b, Mm, n_threads); });
        return to_numpy(s);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("M"), py::arg("n_threads"),
      py::arg("offset") = py::none(),
      "One chunk's X~^T (w l''' q) with q_j = x~_j^T M x~_j (second hypergradient pass).");

  m.def(
      "chunk_folds",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, bool intercept, const py::array& beta, const py::array& fold,
         Index K, int n_threads, const std::optional<py::array>& offset) {
        Problem pb = chunk_problem(X, y, w, intercept, offset);
        const LossKind kind = apply_loss(loss, pb);
        const Index p1 = pb.p1();
        const Vec b = to_vec(beta, p1, "beta");
        const int* f = int32_ptr(fold, pb.n(), "fold");
        ChunkFolds r;
        run_released([&] { r = chunk_folds(pb, kind, b, f, K, n_threads); });
        py::array_t<double, py::array::f_style> H({p1, p1, K});
        std::copy(r.hess.data(), r.hess.data() + r.hess.size(), H.mutable_data());
        py::array_t<double, py::array::f_style> G({p1, K});
        std::copy(r.grad.data(), r.grad.data() + r.grad.size(), G.mutable_data());
        return py::make_tuple(H, G);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("fold"), py::arg("n_folds"),
      py::arg("n_threads"), py::arg("offset") = py::none(),
      "One chunk's per-fold X~_S^T D_S X~_S (p1, p1, K) and X~_S^T g_S (p1, K).");

  m.def(
      "chunk_refits",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, bool intercept, const py::array& beta, const py::array& exclude,
         const py::array& hess_cols, int n_threads, const std::optional<py::array>& offset) {
        Problem pb = chunk_problem(X, y, w, intercept, offset);
        const LossKind kind = apply_loss(loss, pb);
        const Index p1 = pb.p1();
        const Mat b = to_mat(beta, p1, "beta");
        const Index B = b.cols(), m = static_cast<Index>(hess_cols.size());
        const int* ex = int32_ptr(exclude, B, "exclude");
        const int* hc = int32_ptr(hess_cols, m, "hess_cols");
        ChunkRefits r;
        run_released([&] { r = chunk_refits(pb, kind, b, ex, hc, m, n_threads); });
        ChunkRefitsOut out;
        out.loss = to_numpy(r.loss);
        py::array_t<double, py::array::f_style> G({p1, B});
        std::copy(r.grad.data(), r.grad.data() + r.grad.size(), G.mutable_data());
        out.grad = G;
        py::array_t<double, py::array::f_style> H({p1, p1, m});
        std::copy(r.hess.data(), r.hess.data() + r.hess.size(), H.mutable_data());
        out.hess = H;
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("exclude"), py::arg("hess_cols"),
      py::arg("n_threads"), py::arg("offset") = py::none(),
      "One chunk's sums for B leave-one-out refits at the columns of beta (p1, B), each without "
      "its row exclude[j] (int32, -1: none here): loss (B,), grad (p1, B) and, for the refits "
      "hess_cols (int32), the Hessians (p1, p1, len(hess_cols)).");

  m.def(
      "quadratic_cd",
      [](const py::array& H, const py::array& g, const py::array& beta, const py::array& l1,
         double tol) {
        const Index m = static_cast<Index>(g.size());
        const Mat Hm = to_mat(H, m, "H");
        if (Hm.cols() != m) throw py::value_error("H must be square, of the size of g");
        const Vec gv = to_vec(g, m, "g"), bv = to_vec(beta, m, "beta"), lv = to_vec(l1, m, "l1");
        Vec d;
        run_released([&] { d = aloocv::detail::quadratic_cd(Hm, gv, bv, lv, tol); });
        return to_numpy(d);
      },
      py::arg("H"), py::arg("g"), py::arg("beta"), py::arg("l1"), py::arg("tol"),
      "The elastic-net fit's working-set model solve (enet.hpp detail::quadratic_cd): the "
      "step delta minimizing g^T delta + 1/2 delta^T H delta + sum l1 |beta + delta|.");
}

}  // namespace aloocv::bind
