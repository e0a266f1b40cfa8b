// Running core work with the GIL released and Ctrl-C honoured. No math here.
//
// run_released(f) installs an interrupt context (cpp/include/aloocv/interrupt.hpp) whose
// poll callback, called by the core on this (the calling, OpenMP master) thread at most
// every 50 ms, takes the GIL and runs Python's pending signal handlers
// (PyErr_CheckSignals). When a handler raises (KeyboardInterrupt for SIGINT), the
// exception is kept, every core thread stops at its next check, and the exception is
// raised here once the GIL is back.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "aloocv/interrupt.hpp"

namespace aloocv::bind {

namespace py = pybind11;

namespace detail {

struct PendingSignal {
  std::unique_ptr<py::error_already_set> error;
};

inline bool poll_signals(void* arg) {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return false;
  static_cast<PendingSignal*>(arg)->error = std::make_unique<py::error_already_set>();
  return true;
}

}  // namespace detail

// Calls f() without the GIL; a pending signal stops it and raises the handler's exception.
template <class F>
void run_released(F&& f) {
  detail::PendingSignal pending;
  interrupt::Scope scope(&detail::poll_signals, &pending);
  try {
    py::gil_scoped_release release;
    f();
  } catch (const Interrupted&) {
    if (pending.error) throw py::error_already_set(*pending.error);
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
}

}  // namespace aloocv::bind
