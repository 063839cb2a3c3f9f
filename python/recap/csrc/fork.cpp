// SPDX-License-Identifier: Apache-2.0
// recap.megatron's CudaRNGStatesTracker.fork() as a context manager in C++: entering and leaving
// a fork are one call each from Python into this object and one into librecap, where the
// generator-based context manager cost a Python frame, ctypes conversions and two copies of
// torch's CPU generator state as tensors. Semantics are Megatron's: the named state is installed
// for the block and the outer one put back (recap_tracker_fork/unfork), and a block that moved
// torch's CPU generator is warned about (Megatron compares torch.get_rng_state() before and
// after; this compares the same state, the Mersenne twister's words and the cached normal
// samples, under the generator's lock).
//
// One object per (tracker, name), kept by the tracker: entering pushes the fork's token and the
// CPU state, leaving pops them, so nested forks of one name (A, B, A) use the same object and
// nothing is allocated per fork once the stacks have grown. Failures call back into Python
// (`fail`), which raises recap's typed errors as the ctypes path does.
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/Context.h>
#include <torch/csrc/utils/pybind.h>

#include "recap.h"

namespace py = pybind11;

namespace recap_torch {
namespace {

using fork_fn = recap_status_t (*)(recap_tracker_h, const char *, recap_fork_token_t *);
using unfork_fn = recap_status_t (*)(recap_tracker_h, recap_fork_token_t);

fork_fn c_fork;     // librecap's recap_tracker_fork and recap_tracker_unfork, bound by
unfork_fn c_unfork; // recap.megatron (bind_tracker_calls) from the library it loaded

struct CpuState {
    at::mt19937_data_pod mt;
    std::optional<float> normal_f;
    std::optional<double> normal_d;

    bool operator==(const CpuState &o) const
    {
        return mt.seed_ == o.mt.seed_ && mt.left_ == o.mt.left_ && mt.seeded_ == o.mt.seeded_ &&
               mt.next_ == o.mt.next_ && mt.state_ == o.mt.state_ && normal_f == o.normal_f &&
               normal_d == o.normal_d;
    }
};

void read_cpu(CpuState *s)
{
    auto gen = at::detail::getDefaultCPUGenerator();
    auto *impl = gen.get<at::CPUGeneratorImpl>();
    std::lock_guard<std::mutex> lock(gen.mutex());
    s->mt = impl->engine().data();
    s->normal_f = impl->next_float_normal_sample();
    s->normal_d = impl->next_double_normal_sample();
}

class Fork {
  public:
    Fork(uintptr_t tracker, std::string name, py::object fail, py::object warn)
        : tracker_(reinterpret_cast<recap_tracker_h>(tracker)), name_(std::move(name)),
          fail_(std::move(fail)), warn_(std::move(warn))
    {
        TORCH_CHECK(tracker != 0, "recap._C.Fork: a null tracker handle");
        TORCH_CHECK(c_fork != nullptr && c_unfork != nullptr,
                    "recap._C.Fork: bind_tracker_calls was not called");
    }

    void enter()
    {
        recap_fork_token_t tok = 0;

        if (depth_ == tokens_.size()) { // both grow or neither (reserve is what may throw)
            tokens_.reserve(depth_ + 1);
            cpu_.reserve(depth_ + 1);
            tokens_.emplace_back();
            cpu_.emplace_back();
        }
        read_cpu(&cpu_[depth_]); // first: nothing to undo should it throw
        recap_status_t st = c_fork(tracker_, name_.c_str(), &tok);
        if (st != RECAP_OK) {
            fail_(static_cast<int>(st), "recap_tracker_fork"); // raises recap's typed error
            throw std::runtime_error("recap_tracker_fork failed"); // (a fail that returned)
        }
        tokens_[depth_++] = tok;
    }

    bool exit(py::handle, py::handle, py::handle)
    {
        TORCH_CHECK(depth_ > 0, "recap._C.Fork: leaving a fork that was not entered");
        CpuState now;
        size_t k = --depth_;

        read_cpu(&now);
        recap_status_t st = c_unfork(tracker_, tokens_[k]);
        if (st != RECAP_OK) {
            depth_++; // still open: the caller may retry, as the C call allows
            fail_(static_cast<int>(st), "recap_tracker_unfork"); // raises
            throw std::runtime_error("recap_tracker_unfork failed");
        }
        if (!(now == cpu_[k])) // after the unfork: a warning turned error leaves no fork open
            warn_("CPU RNG state changed within GPU RNG context");
        return false; // an exception inside the block propagates
    }

    size_t depth() const { return depth_; }

  private:
    recap_tracker_h tracker_;
    std::string name_;
    py::object fail_, warn_;
    std::vector<recap_fork_token_t> tokens_;
    std::vector<CpuState> cpu_;
    size_t depth_ = 0;
};

} // namespace

void define_fork(py::module_ &m)
{
    m.def(
        "bind_tracker_calls",
        [](uintptr_t fork, uintptr_t unfork) {
            TORCH_CHECK(fork != 0 && unfork != 0, "recap._C.bind_tracker_calls: null address");
            c_fork = reinterpret_cast<fork_fn>(fork);
            c_unfork = reinterpret_cast<unfork_fn>(unfork);
        },
        "the addresses of librecap's recap_tracker_fork and recap_tracker_unfork (the library "
        "recap._lib loaded)");
    py::class_<Fork>(m, "Fork", py::dynamic_attr())
        .def(py::init<uintptr_t, std::string, py::object, py::object>(), py::arg("tracker"),
             py::arg("name"), py::arg("fail"), py::arg("warn"))
        .def("__enter__", &Fork::enter) // None, as Megatron's fork yields
        .def("__exit__", &Fork::exit)
        .def_property_readonly("depth", &Fork::depth, "forks of this object open now");
}

} // namespace recap_torch
