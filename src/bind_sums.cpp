// Binding of the sums-source Newton fit (cpp/include/aloocv/sums_model.hpp): the source
// is a Python callable (the dask driver's map-reduce pass). The driver runs with the GIL
// released; the trampoline takes it only around the callback. No math here.
#include <pybind11/stl.h>

#include "aloocv/enet.hpp"
#include "aloocv/multinomial.hpp"
#include "aloocv/sums_model.hpp"
#include "arrays.hpp"
#include "release.hpp"
#include "results.hpp"

namespace aloocv::bind {

namespace {

// source(beta, step=, hessian=, clip=[, cols=]) (the options as keywords)
//   -> (loss, grad, hess or None, step_max)
class PySource final : public SumsSource {
 public:
  PySource(py::object fn, Index p1) : fn_(std::move(fn)), p1_(p1) {}

  SumsValue eval(const Vec& beta, const SumsRequest& rq) override {
    py::gil_scoped_acquire gil;
    const py::object step = rq.step ? py::object(to_numpy(*rq.step)) : py::object(py::none());
    py::object res;
    if (rq.cols) {  // the elastic net's working-set Hessian: cols as a keyword
      py::array_t<Index> cols(static_cast<py::ssize_t>(rq.cols->size()));
      std::copy(rq.cols->begin(), rq.cols->end(), cols.mutable_data());
      res = fn_(to_numpy(beta), py::arg("step") = step, py::arg("hessian") = rq.hessian,
                py::arg("clip") = rq.clip, py::arg("cols") = cols);
    } else {
      res = fn_(to_numpy(beta), py::arg("step") = step, py::arg("hessian") = rq.hessian,
                py::arg("clip") = rq.clip);
    }
    if (!py::isinstance<py::tuple>(res) || py::len(res) != 4) {
      throw py::type_error(
          "the sums source must return a tuple (loss, grad, hess or None, step_max)");
    }
    const auto t = res.cast<py::tuple>();
    SumsValue v;
    v.loss = t[0].cast<double>();
    const Index m = rq.cols ? static_cast<Index>(rq.cols->size()) : p1_;
    v.grad = to_vec(require_array(t[1], "the source's grad"), m, "the source's grad");
    if (!t[2].is_none()) {
      const Mat H = to_mat(require_array(t[2], "the source's hess"), m, "the source's hess");
      if (H.cols() != m) throw py::value_error("the source's hess must be square");
      v.hess = Eigen::Map<const Vec>(H.data(), H.size());
    }
    v.step_max = t[3].cast<double>();
    return v;
  }

 private:
  py::object fn_;
  Index p1_;
};

// The arguments every sums fit of a loss checks first: a callable source, the loss, the
// (p,) L2 weights, and p1 = p (+ 1 with an intercept).
struct SumsArgs {
  LossKind kind;
  Vec lam;
  Index p1;
};
SumsArgs sums_args(const py::object& source, const py::object& loss, const py::array& penalty,
                   bool intercept) {
  if (!PyCallable_Check(source.ptr())) throw py::type_error("source must be callable");
  Problem lp_only;
  SumsArgs a;
  a.kind = apply_loss(loss, lp_only);
  const Index p = penalty.ndim() == 1 ? penalty.shape(0) : -1;
  a.lam = to_vec(penalty, p, "penalty");
  a.p1 = p + (intercept ? 1 : 0);
  return a;
}

SumsFitOut sums_fit_out(const SumsFit& r) {
  const Index p1 = r.beta.size();
  SumsFitOut out;
  out.beta = to_numpy(r.beta);
  out.grad = to_numpy(r.grad);
  out.hessian = square_to_numpy(r.hessian, p1);
  out.unpenalized_hessian = square_to_numpy(r.hx, p1);
  out.hessian_at_point = r.hessian_at_point;
  out.objective = r.objective;
  out.n_iter = r.n_iter;
  out.hessian_passes = r.hessian_passes;
  out.n_evals = r.n_evals;
  out.converged = r.converged;
  out.stalled = r.stalled;
  out.grad_norm = r.grad_norm;
  out.loss = r.loss;
  out.loss_grad = to_numpy(r.loss_grad);
  if (r.end_guard_step.size() > 0) out.end_guard_step = to_numpy(r.end_guard_step);
  out.end_guard_dec = r.end_guard_dec;
  return out;
}

EnetSumsFitOut enet_sums_fit_out(const EnetSumsFit& r) {
  EnetSumsFitOut out;
  out.beta = to_numpy(r.beta);
  out.grad = to_numpy(r.grad);
  out.hessian = mat_to_numpy(r.hessian);
  py::array_t<Index> a(static_cast<py::ssize_t>(r.active.size()));
  std::copy(r.active.begin(), r.active.end(), a.mutable_data());
  out.active = a;
  out.objective = r.objective;
  out.n_iter = r.n_iter;
  out.hessian_passes = r.hessian_passes;
  out.n_evals = r.n_evals;
  out.converged = r.converged;
  out.grad_norm = r.grad_norm;
  return out;
}

}  // namespace

void bind_sums(py::module_& m) {
  // a fused end stands where the end Hessian's Newton step moves no x~_i^T beta by more
  m.attr("FUSED_END_ETA") = aloocv::detail::kFusedEndEta;
  m.def(
      "sums_fit",
      [](const py::object& source, const py::object& loss, const py::array& penalty, bool intercept,
         const py::array& beta0, double weight_sum, double tol, Index max_iter, bool fresh_end,
         const std::optional<py::array>& previous_hessian, bool secant, bool defer_end_guard,
         const std::optional<double>& start_loss, const std::optional<py::array>& start_grad) {
        const SumsArgs a = sums_args(source, loss, penalty, intercept);
        const LossKind kind = a.kind;
        const Vec& lam = a.lam;
        const Index p1 = a.p1;
        const Vec b0 = to_vec(beta0, p1, "beta0");
        std::optional<Vec> prev;
        if (previous_hessian) {
          const Mat H = to_mat(*previous_hessian, p1, "previous_hessian");
          if (H.cols() != p1) throw py::value_error("previous_hessian must be square");
          prev = Eigen::Map<const Vec>(H.data(), H.size());
        }
        SumsFitOptions opt;
        opt.fit.tol = tol;
        opt.fit.max_iter = max_iter;
        opt.fit.fresh_end = fresh_end;
        opt.fit.secant = secant;
        opt.weight_sum = weight_sum;
        opt.previous_hx = prev ? &*prev : nullptr;
        opt.defer_end_guard = defer_end_guard;
        std::optional<SumsValue> start;
        if (start_loss.has_value() != start_grad.has_value()) {
          throw py::value_error("start_loss and start_grad go together");
        }
        if (start_grad) {
          start.emplace();
          start->loss = *start_loss;
          start->grad = to_vec(*start_grad, p1, "start_grad");
        }
        opt.start = start ? &*start : nullptr;
        PySource src(source, p1);
        SumsFit r;
        run_released([&] { r = sums_fit(src, kind, lam, intercept, b0, opt); });
        return sums_fit_out(r);
      },
      py::arg("source"), py::arg("loss"), py::arg("penalty"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta0"), py::arg("weight_sum"), py::arg("tol"),
      py::arg("max_iter"), py::arg("fresh_end") = false, py::arg("previous_hessian") = py::none(),
      py::arg("secant") = false, py::arg("defer_end_guard") = false,
      py::arg("start_loss") = py::none(), py::arg("start_grad") = py::none(),
      "Damped Newton (the core's one driver) on a problem reached through its sums: "
      "source(beta, step=, hessian=, clip=) returns (sum w l, X~^T (w l'), X~^T D X~ or None, "
      "max |X~ step| or 0).");

  m.def(
      "sums_settle_end",
      [](const py::object& source, const py::object& loss, const py::array& penalty, bool intercept,
         const py::array& beta, const py::array& unpenalized_hessian, const py::array& step,
         double dec, double weight_sum, double tol, double loss_at_beta,
         const py::array& grad_at_beta) {
        const SumsArgs a = sums_args(source, loss, penalty, intercept);
        const LossKind kind = a.kind;
        const Vec& lam = a.lam;
        const Index p1 = a.p1;
        SumsFit fit;
        fit.beta = to_vec(beta, p1, "beta");
        const Mat H = to_mat(unpenalized_hessian, p1, "unpenalized_hessian");
        if (H.cols() != p1) throw py::value_error("unpenalized_hessian must be square");
        fit.hx = Eigen::Map<const Vec>(H.data(), H.size());
        fit.end_guard_step = to_vec(step, p1, "step");
        fit.end_guard_dec = dec;
        SumsValue at;
        at.loss = loss_at_beta;
        at.grad = to_vec(grad_at_beta, p1, "grad_at_beta");
        PySource src(source, p1);
        SumsFit r;
        bool taken = false;
        run_released([&] {
          r = sums_settle_end(src, kind, lam, intercept, fit, tol, weight_sum, taken, &at);
        });
        return sums_fit_out(r);
      },
      py::arg("source"), py::arg("loss"), py::arg("penalty"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta"), py::arg("unpenalized_hessian"), py::arg("step"),
      py::arg("dec"), py::arg("weight_sum"), py::arg("tol"), py::arg("loss_at_beta"),
      py::arg("grad_at_beta"),
      "Settles a deferred guard whose move exceeded FUSED_END_ETA (sums_settle_end in "
      "sums_model.hpp; loss_at_beta, grad_at_beta: the unpenalized sums at beta, which take "
      "no evaluation): the step from beta with the shared line search, kept with the "
      "Hessian at the new point where it halves max|grad| (n_iter 1, hessian_passes 1, 2 "
      "where that Hessian was clipped and the real one was taken), "
      "else the point and its Hessian (n_iter 0).");

  m.def(
      "multinomial_sums_fit",
      [](const py::object& source, Index n_classes, const py::array& penalty, bool intercept,
         const py::array& beta0, double weight_sum, double tol, Index max_iter, bool fresh_end) {
        if (!PyCallable_Check(source.ptr())) throw py::type_error("source must be callable");
        const Index p = penalty.ndim() == 1 ? penalty.shape(0) : -1;
        const Vec lam = to_vec(penalty, p, "penalty");
        const Index dim = n_classes * (p + (intercept ? 1 : 0));
        const Vec b0 = to_vec(beta0, dim, "beta0");
        SumsFitOptions opt;
        opt.fit.tol = tol;
        opt.fit.max_iter = max_iter;
        opt.fit.fresh_end = fresh_end;
        opt.weight_sum = weight_sum;
        PySource src(source, dim);
        SumsFit r;
        run_released([&] { r = mn_sums_fit(src, n_classes, lam, intercept, b0, opt); });
        return sums_fit_out(r);
      },
      py::arg("source"), py::arg("n_classes"), py::arg("penalty"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta0"), py::arg("weight_sum"), py::arg("tol"),
      py::arg("max_iter"), py::arg("fresh_end") = false,
      "The multinomial fit (mn_fit's penalty with the gauge term, policy and stopping rule) "
      "on a problem reached through its sums (class-major beta of K p1 entries); the "
      "source is as sums_fit's (step and clip are not asked for).");

  m.def(
      "enet_sums_fit",
      [](const py::object& source, const py::object& loss, const py::array& penalty,
         const py::array& l1, bool intercept, const py::array& beta0, double weight_sum, double tol,
         Index max_iter) {
        const SumsArgs a = sums_args(source, loss, penalty, intercept);
        const LossKind kind = a.kind;
        const Vec& lam = a.lam;
        const Vec l1v = to_vec(l1, lam.size(), "l1");
        const Index p1 = a.p1;
        const Vec b0 = to_vec(beta0, p1, "beta0");
        FitOptions opt;
        opt.tol = tol;
        opt.max_iter = max_iter;
        PySource src(source, p1);
        EnetSumsFit r;
        run_released(
            [&] { r = enet_sums_fit(src, kind, lam, l1v, intercept, b0, weight_sum, opt); });
        return enet_sums_fit_out(r);
      },
      py::arg("source"), py::arg("loss"), py::arg("penalty"), py::arg("l1"), py::kw_only(),
      py::arg("fit_intercept"), py::arg("beta0"), py::arg("weight_sum"), py::arg("tol"),
      py::arg("max_iter"),
      "The elastic-net fit (enet_fit's working-set proximal Newton, enet_drive) on a problem "
      "reached through its sums; the source is as sums_fit's, and is also called with "
      "cols= (the working set's coordinates of beta, beta zero elsewhere) for the Hessian "
      "and gradient on those coordinates only.");
}

}  // namespace aloocv::bind
