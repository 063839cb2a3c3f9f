// SPDX-License-Identifier: Apache-2.0
// recap._C: recap.torch's compiled extension (recap/torch.py says what each part is for), built
// as recap._C_torch and imported through recap/_C.py, which refuses it under another torch before
// the dynamic linker sees it. Built against one torch (setup.py passes its version as
// RECAP_TORCH_BUILT_FOR); imported directly under another that it links with, it raises
// ImportError too, and recap.torch then runs its Python operations.
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "torch_access.h"

#ifndef RECAP_TORCH_BUILT_FOR
#error "setup.py defines RECAP_TORCH_BUILT_FOR (torch.__version__ at build time)"
#endif

namespace py = pybind11;
using namespace recap_torch;

namespace recap_torch {
#ifdef RECAP_TEST_ENTRIES
// The _test_ entries (test_entries.cpp: compiled in only for the package's own tests).
void define_test_entries(py::module_ &m);
#endif
// Fork, bind_tracker_calls (fork.cpp).
void define_fork(py::module_ &m);
// get_values, get_objects, set_values (tracker_states.cpp).
void define_tracker_states(py::module_ &m);
// Plan, replay_method and the capture hooks of recap's graph replay (graph_replay.cpp).
void define_replay(py::module_ &m);
} // namespace recap_torch

PYBIND11_MODULE(_C_torch, m)
{
    std::string running = py::module_::import("torch").attr("__version__").cast<std::string>();
    if (running != RECAP_TORCH_BUILT_FOR)
        throw py::import_error("recap._C was built for torch " RECAP_TORCH_BUILT_FOR
                               ", not the running torch " + running);
    m.attr("TORCH_VERSION") = RECAP_TORCH_BUILT_FOR;
    m.def(
        "framework",
        [](int device) {
            void *c = framework_context(device);
            return py::make_tuple(reinterpret_cast<uintptr_t>(framework_ops_of(c)),
                                  reinterpret_cast<uintptr_t>(c));
        },
        "(table, context) addresses of torch's default CUDA generator of a device, for "
        "recap_generator_create_framework");
    m.def(
        "state_generator",
        [](uintptr_t handle) {
            TORCH_CHECK(handle != 0, "recap._C.state_generator: a null state handle");
            return py::reinterpret_steal<py::object>(
                THPGenerator_Wrap(state_generator(reinterpret_cast<void *>(handle))));
        },
        "the torch.Generator of a recap state handle (a new reference to the same object)");
    m.def("take_error", &take_error,
          "the message of the last C++ exception an operation caught in this thread");
    m.def(
        "state_id",
        [](py::handle gen) {
            at::Generator g = THPGenerator_Unwrap(gen.ptr());
            TORCH_CHECK(g.device().is_cuda(), "recap._C.state_id: not a CUDA generator");
            auto *impl = static_cast<at::CUDAGeneratorImpl *>(g.unsafeGetGeneratorImpl());
            return reinterpret_cast<uintptr_t>(state_of(impl));
        },
        "the address of the at::CUDAGeneratorState a CUDA generator draws from now");
    define_replay(m);
    define_tracker_states(m);
    define_fork(m);
#ifdef RECAP_TEST_ENTRIES
    define_test_entries(m);
#endif
}
