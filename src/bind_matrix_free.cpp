// Bindings of the matrix-free route (cpp/include/aloocv/matrix_free.hpp).
#include <pybind11/stl.h>

#include <memory>
#include <mutex>

#include "aloocv/matrix_free.hpp"
#include "aloocv/matrix_free_multinomial.hpp"
#include "arrays.hpp"
#include "multinomial_args.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

LeverageOptions leverage_options(Index n_probes, Index n_groups, std::uint64_t seed,
                                 Index first_probe, double cg_rtol, Index max_cg, int n_threads) {
  LeverageOptions o;
  o.n_probes = n_probes;
  o.n_groups = n_groups;
  o.seed = seed;
  o.first_probe = first_probe;
  o.cg_rtol = cg_rtol;
  o.max_cg = max_cg;
  o.n_threads = n_threads;
  return o;
}

// A 1-d index array as a vector.
std::vector<Index> index_vector(const py::array_t<Index>& rows) {
  const auto rr = rows.unchecked<1>();
  std::vector<Index> idx(static_cast<size_t>(rr.shape(0)));
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = rr(static_cast<py::ssize_t>(k));
  return idx;
}

py::array_t<double> rows_to_numpy(const RowMat& M) {
  py::array_t<double> out({M.rows(), M.cols()});
  std::copy(M.data(), M.data() + M.size(), out.mutable_data());
  return out;
}

// mf::Point with the arrays its Problem reads in place (kept alive here) and a lock: the
// calls of one point take turns (they share its Operator's counters and lazy head block).
struct PointHandle {
  py::object X, y, w, pen, offset;
  Problem pb;
  std::unique_ptr<mf::Point> pt;
  std::mutex mutex;
};

}  // namespace

void bind_matrix_free(py::module_& m) {
  m.def(
      "cg_fit",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, double tol, Index max_iter,
         int n_threads, const std::optional<py::array>& beta0,
         const std::optional<py::array>& offset, Index max_cg) {
        Problem pb = make_problem(X, y, w, pen, intercept);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        CgFitOptions opt;
        opt.fit = FitOptions{tol, max_iter, n_threads};
        opt.max_cg = max_cg;
        std::optional<Vec> b0;
        if (beta0) b0 = to_vec(*beta0, pb.p1(), "beta0");
        FitState st;
        run_released([&] { st = cg_fit(pb, kind, opt, b0 ? &*b0 : nullptr); });
        return fit_out(st, intercept);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("tol"), py::arg("max_iter"),
      py::arg("n_threads"), py::arg("beta0") = py::none(), py::arg("offset") = py::none(),
      py::arg("max_cg") = 250,
      "Newton-CG fit of an L2-penalized GLM from Hessian-vector products (no p x p matrix).");

  m.def(
      "cg_state",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w,
         const py::object& loss, const py::array& pen, bool intercept, const py::array& beta,
         double tol, int n_threads, const std::optional<py::array>& offset) {
        Problem pb = make_problem(X, y, w, pen, intercept);
        const LossKind kind = apply_loss(loss, pb);
        apply_offset(offset, pb);
        const Vec b = to_vec(beta, pb.p1(), "beta");
        FitState st;
        run_released([&] {
          FitOptions fo;
          fo.tol = tol;
          fo.n_threads = n_threads;
          st = cg_prepare(pb, kind, b, fo);
        });
        return fit_out(st, intercept);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"), py::arg("penalty"),
      py::kw_only(), py::arg("fit_intercept"), py::arg("beta"), py::arg("tol"),
      py::arg("n_threads"), py::arg("offset") = py::none(),
      "The objective and gradient at a given beta from two products (no p x p matrix).");

  py::class_<PointHandle, std::shared_ptr<PointHandle>>(
      m, "MatrixFreePoint",
      "The matrix-free route's state at one beta (mf::Point): eta, the loss's derivatives and "
      "the preconditioner, made once and shared by the leverage estimates, the exact "
      "leverages of some samples, the self-check's refits and the hypergradient there. Holds "
      "its arrays (read in place); its calls take turns.")
      .def(py::init([](const py::object& X, const py::array& y, const std::optional<py::array>& w,
                       const py::object& loss, const py::array& pen, bool intercept,
                       const py::array& beta, const std::optional<py::array>& offset,
                       int n_threads) {
             auto h = std::make_shared<PointHandle>();
             h->X = X;
             h->y = y;
             h->w = w ? py::object(*w) : py::none();
             h->pen = pen;
             h->offset = offset ? py::object(*offset) : py::none();
             h->pb = make_problem(X, y, w, pen, intercept);
             const LossKind kind = apply_loss(loss, h->pb);
             apply_offset(offset, h->pb);
             const Vec b = to_vec(beta, h->pb.p1(), "beta");
             run_released([&] { h->pt = std::make_unique<mf::Point>(h->pb, kind, b, n_threads); });
             return h;
           }),
           py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("loss"),
           py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"),
           py::arg("offset") = py::none(), py::arg("n_threads"))
      .def_property_readonly("eta", [](const PointHandle& h) { return to_numpy(h.pt->eta); })
      .def(
          "random_leverages",
          [](PointHandle& h, Index n_probes, Index n_groups, std::uint64_t seed, double cg_rtol,
             Index max_cg, Index first_probe, bool dual) {
            LeverageOptions o =
                leverage_options(n_probes, n_groups, seed, first_probe, cg_rtol, max_cg, h.pt->nt);
            o.dual = dual;
            RandomLeverages r;
            run_released([&] {
              const std::lock_guard<std::mutex> lock(h.mutex);
              r = random_leverages(*h.pt, o);
            });
            RandomLeveragesOut out;
            out.plain = rows_to_numpy(r.plain);
            out.control = rows_to_numpy(r.control);
            out.diag0 = move_to_numpy(std::move(r.diag0));
            out.eta = to_numpy(h.pt->eta);
            out.g = move_to_numpy(std::move(r.g));
            out.d = move_to_numpy(std::move(r.d));
            out.cg_iterations = r.cg_iterations;
            out.passes = r.passes;
            out.converged = r.converged;
            out.worst_residual = r.worst_residual;
            out.dual = r.dual;
            out.exact_rows = r.exact_rows;
            return out;
          },
          py::kw_only(), py::arg("n_probes"), py::arg("n_groups"), py::arg("seed"),
          py::arg("cg_rtol"), py::arg("max_cg"), py::arg("first_probe") = 0,
          py::arg("dual") = false,
          "Per-group Hutchinson estimates of the leverages by PCG probe solves.")
      .def(
          "row_leverages",
          [](PointHandle& h, const py::array_t<Index>& rows, double cg_rtol, Index max_cg,
             bool return_solves) -> py::object {
            const std::vector<Index> idx = index_vector(rows);
            Vec lev;
            RowMat S;
            run_released([&] {
              const std::lock_guard<std::mutex> lock(h.mutex);
              lev = row_leverages(*h.pt, idx.data(), static_cast<Index>(idx.size()), cg_rtol,
                                  max_cg, return_solves ? &S : nullptr);
            });
            if (!return_solves) return move_to_numpy(std::move(lev));
            return py::make_tuple(move_to_numpy(std::move(lev)), rows_to_numpy(S));
          },
          py::arg("rows"), py::kw_only(), py::arg("cg_rtol"), py::arg("max_cg"),
          py::arg("return_solves") = false,
          "Exact leverages of some samples by one block PCG solve; return_solves: also the "
          "solves H^{-1} x~_i, one row each.")
      .def(
          "cg_refits",
          [](PointHandle& h, const py::array_t<Index>& rows, const std::optional<py::array>& starts,
             double tol, Index max_iter, Index max_cg) {
            const std::vector<Index> idx = index_vector(rows);
            const Index r = static_cast<Index>(idx.size());
            std::optional<RowMat> S;
            if (starts) S = RowMat(to_mat(*starts, r, "starts"));
            CgFitOptions opt;
            opt.fit = FitOptions{tol, max_iter, h.pt->nt};
            opt.max_cg = max_cg;
            CgRefits out;
            run_released([&] {
              const std::lock_guard<std::mutex> lock(h.mutex);
              out = cg_refits(*h.pt, opt, idx.data(), r, S ? &*S : nullptr);
            });
            py::array_t<bool> conv(static_cast<py::ssize_t>(r));
            py::array_t<Index> iters(static_cast<py::ssize_t>(r));
            for (Index k = 0; k < r; ++k) {
              conv.mutable_at(k) = out.converged[static_cast<size_t>(k)] != 0;
              iters.mutable_at(k) = out.n_iter[static_cast<size_t>(k)];
            }
            return py::make_tuple(move_to_numpy(std::move(out.predictions)), conv, iters,
                                  out.cg_iterations, out.passes);
          },
          py::arg("rows"), py::kw_only(), py::arg("starts") = py::none(), py::arg("tol"),
          py::arg("max_iter"), py::arg("max_cg") = 250,
          "Exact leave-one-out refits of some samples by Newton-CG, advanced in lockstep (one "
          "block product per step for all): (predictions, converged, n_iter, cg_iterations, "
          "passes); starts: (len(rows), p1) starting points (None: beta).")
      .def(
          "random_leverages_gradient",
          [](PointHandle& h, Index n_probes, Index n_groups, std::uint64_t seed, double cg_rtol,
             Index max_cg, Index first_probe, bool control, const py::array& rho,
             const py::array& alpha, const py::array& gamma) {
            const Problem& pb = h.pb;
            const Mat rho_c = to_mat(rho, pb.n(), "rho");
            const RowMat rho_r = rho_c;
            const Vec a = to_vec(alpha, pb.n(), "alpha");
            const Vec gm = to_vec(gamma, pb.n(), "gamma");
            const LeverageOptions o =
                leverage_options(n_probes, n_groups, seed, first_probe, cg_rtol, max_cg, h.pt->nt);
            Vec grad;
            run_released([&] {
              const std::lock_guard<std::mutex> lock(h.mutex);
              grad = random_leverages_gradient(*h.pt, o, control, rho_r, a, gm);
            });
            const Index off = pb.intercept ? 1 : 0;
            return to_numpy(Vec(grad.tail(grad.size() - off)));
          },
          py::kw_only(), py::arg("n_probes"), py::arg("n_groups"), py::arg("seed"),
          py::arg("cg_rtol"), py::arg("max_cg"), py::arg("first_probe") = 0, py::arg("control"),
          py::arg("rho"), py::arg("alpha"), py::arg("gamma"),
          "d mean / d (per-feature L2 weights) of an ALO mean on randomized leverages, given "
          "the mean's coefficients on the group estimates (rho), on eta (alpha) and on h "
          "(gamma).");

  m.def(
      "alo_jackknife",
      [](const py::object& loss, const py::array& y, const std::optional<py::array>& w,
         const py::array& eta, const py::array& g, const py::array& d,
         const py::array_t<double, py::array::c_style>& groups, double dh_clip, int n_threads) {
        Problem pb;
        const LossKind kind = apply_loss(loss, pb);
        if (groups.ndim() != 2) throw py::value_error("groups must be 2-dimensional (n, G)");
        const Index n = groups.shape(0), G = groups.shape(1);
        const double* yp = vector_ptr(y, n, "y");
        const double* wp = w ? vector_ptr(*w, n, "sample_weight") : nullptr;
        const Eigen::Map<const Vec> e(vector_ptr(eta, n, "eta"), n), gv(vector_ptr(g, n, "g"), n),
            dv(vector_ptr(d, n, "d"), n);
        const Eigen::Map<const RowMat> gr(groups.data(), n, G);
        AloJackknife r;
        run_released(
            [&] { r = alo_jackknife(kind, pb.lp, yp, wp, e, gv, dv, gr, dh_clip, n_threads); });
        return py::make_tuple(
            move_to_numpy(std::move(r.losses)), move_to_numpy(std::move(r.plain)),
            move_to_numpy(std::move(r.predictions)), move_to_numpy(std::move(r.leverages)),
            move_to_numpy(std::move(r.group_means)), move_to_numpy(std::move(r.leverage_se)));
      },
      py::arg("loss"), py::arg("y"), py::arg("sample_weight"), py::arg("eta"), py::arg("g"),
      py::arg("d"), py::arg("groups"), py::kw_only(), py::arg("dh_clip"), py::arg("n_threads"),
      "ALO from per-group leverage estimates (n, G) and its delete-one-group jackknife: "
      "(losses, plug-in losses, predictions, clipped leverages, the G deleted-group means, "
      "the leverages' standard errors).");

  m.def(
      "multinomial_cg_fit",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, double tol, Index max_iter, int n_threads,
         const std::optional<py::array>& beta0, const std::optional<py::array>& offset,
         Index max_cg) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        const double* off = offset ? vector_ptr(*offset, pb.n() * K, "offset") : nullptr;
        std::optional<Vec> b0;
        if (beta0) b0 = to_vec(*beta0, pb.dim(), "beta0");
        MnCgOptions opt;
        opt.fit = FitOptions{tol, max_iter, n_threads};
        opt.max_cg = max_cg;
        MnState st;
        run_released([&] { st = mn_cg_fit(pb, opt, b0 ? &*b0 : nullptr, off); });
        MnFitOut out;
        fill_mn_fit(out, pb, st);
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("tol"),
      py::arg("max_iter"), py::arg("n_threads"), py::arg("beta0") = py::none(),
      py::arg("offset") = py::none(), py::arg("max_cg") = 250,
      "Newton-CG fit of an L2-penalized multinomial logistic regression from Hessian-vector "
      "products (no K p1 x K p1 matrix); beta0 class-major (K p1), offset (n K) row-major.");

  m.def(
      "multinomial_random_blocks",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const py::array& beta,
         const std::optional<py::array>& offset, Index n_probes, Index n_groups, std::uint64_t seed,
         double cg_rtol, Index max_cg, int n_threads, Index first_probe) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        const double* off = offset ? vector_ptr(*offset, pb.n() * K, "offset") : nullptr;
        const Vec b = to_vec(beta, pb.dim(), "beta");
        const LeverageOptions o =
            leverage_options(n_probes, n_groups, seed, first_probe, cg_rtol, max_cg, n_threads);
        MnRandomBlocks r;
        run_released([&] { r = mn_random_blocks(pb, b, off, o); });
        const Index n = pb.n(), T = mn_packed(K);
        py::array_t<double> plain({n, n_groups, T}), control({n, n_groups, T});
        std::copy(r.plain.data(), r.plain.data() + r.plain.size(), plain.mutable_data());
        std::copy(r.control.data(), r.control.data() + r.control.size(), control.mutable_data());
        return py::make_tuple(plain, control, rows_to_numpy(r.diag0), rows_to_numpy(r.eta),
                              r.cg_iterations, r.passes, r.converged, r.worst_residual);
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"),
      py::arg("offset") = py::none(), py::arg("n_probes"), py::arg("n_groups"), py::arg("seed"),
      py::arg("cg_rtol"), py::arg("max_cg"), py::arg("n_threads"), py::arg("first_probe") = 0,
      "Per-group block Hutchinson estimates of the multinomial leverage blocks K_i at beta "
      "(class-major): (plain (n, G, T), control (n, G, T), diag0 (n, T), eta (n, K), "
      "cg_iterations, passes, converged, worst_residual), T = K (K + 1) / 2 packed upper "
      "triangles.");

  m.def(
      "multinomial_row_blocks",
      [](const py::object& X, const py::array& y, const std::optional<py::array>& w, Index K,
         const py::array& pen, bool intercept, const py::array& beta,
         const std::optional<py::array>& offset, const py::array_t<Index>& rows, double cg_rtol,
         Index max_cg, int n_threads) {
        const MnProblem pb = make_mn_problem(X, y, w, K, pen, intercept);
        const double* off = offset ? vector_ptr(*offset, pb.n() * K, "offset") : nullptr;
        const Vec b = to_vec(beta, pb.dim(), "beta");
        const std::vector<Index> idx = index_vector(rows);
        const Index r = Index(idx.size());
        Vec blocks;
        run_released(
            [&] { blocks = mn_row_blocks(pb, b, off, idx.data(), r, cg_rtol, max_cg, n_threads); });
        py::array_t<double> out({r, K, K});
        std::copy(blocks.data(), blocks.data() + blocks.size(), out.mutable_data());
        return out;
      },
      py::arg("X"), py::arg("y"), py::arg("sample_weight"), py::arg("n_classes"),
      py::arg("penalty"), py::kw_only(), py::arg("fit_intercept"), py::arg("beta"),
      py::arg("offset") = py::none(), py::arg("rows"), py::arg("cg_rtol"), py::arg("max_cg"),
      py::arg("n_threads"),
      "The exact multinomial leverage blocks K_i (len(rows), K, K) of some samples at beta by "
      "block PCG.");
}

}  // namespace aloocv::bind
