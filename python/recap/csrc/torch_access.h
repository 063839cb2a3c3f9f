// SPDX-License-Identifier: Apache-2.0
// Names torch keeps out of its public interface, taken from torch's own headers: the compiler
// places every field, so nothing is searched for or read out of process memory.
//
// - CUDAGeneratorImpl::state_ is private. The one standard way to name a private member from
//   outside is an explicit template instantiation, where access is not checked ([temp.spec]):
//   generator_ops.cpp hands its pointer-to-member to a friend function that way.
// - CUDAGraph's members are protected: a class derived from it may form pointers to them.
// The extension is built against the torch it runs with (recap/_build.py records which; the
// module refuses another), so these names and types are the running torch's.
#pragma once

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <torch/headeronly/version.h>

#include "recap.h"

// Which of torch's generator-state layouts this build names (chosen at compile time: the fields
// exist or not in the headers the extension is built against):
// - 1, shared slot (torch 2.11): one set of capture fields per state (capturing_,
//   offset_intragraph_, seed_/offset_extragraph_, registered_graphs_), states registered with a
//   graph explicitly before its capture.
// - 2, slot per capture (2.12, 2.13): CUDAGeneratorCaptureState per capture id in
//   capture_states_ (under capture_states_mutex_), still registered explicitly.
// - 3, slot per capture, lazy (2.14 on): as 2, and a state joins a capture on its first draw
//   there (get_capture_state(id, create_if_not_found)); torch.cuda.graphs has lifecycle hooks.
#define RECAP_TORCH_AT_LEAST(major, minor)                                                     \
    (TORCH_VERSION_MAJOR > (major) ||                                                          \
     (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
#if !RECAP_TORCH_AT_LEAST(2, 11)
#error "recap._C supports torch 2.11 and later (setup.py says so before compiling)"
#elif !RECAP_TORCH_AT_LEAST(2, 12)
#define RECAP_STATE_LAYOUT 1
#elif !RECAP_TORCH_AT_LEAST(2, 14)
#define RECAP_STATE_LAYOUT 2
#else
#define RECAP_STATE_LAYOUT 3
#endif

namespace recap_torch {

using StatePtr = c10::intrusive_ptr<at::CUDAGeneratorState>;

// The state a generator (or a graph-safe state object) draws from now (generator_ops.cpp holds
// the one explicit instantiation that names CUDAGeneratorImpl::state_).
at::CUDAGeneratorState *state_of(at::CUDAGeneratorImpl *impl);
// Where that pointer lives in the generator (tests: ThreadSanitizer is told of torch's writes).
const void *state_field(at::CUDAGeneratorImpl *impl);

struct GraphMembers : at::cuda::CUDAGraph {
    static constexpr auto table = &GraphMembers::captured_generator_states_;
    static constexpr auto exec = &GraphMembers::graph_exec_;
    static constexpr auto has_exec = &GraphMembers::has_graph_exec_;
    static constexpr auto graph = &GraphMembers::graph_;
    static constexpr auto has_graph = &GraphMembers::has_graph_;
    static constexpr auto stream = &GraphMembers::capture_stream_;
};

// The pointer recap passes back to the operations of torch's default CUDA generator of
// `device`, and their table (include/recap.h); both live as long as the process.
void *framework_context(int device);
const recap_framework_ops_t *framework_ops_of(void *context);
// Tests (test_entries.cpp): a context as framework_context's, with the same table, on any CUDA
// generator (one made without a device); it lives as long as the process too. The generator a
// context drives.
void *test_context(at::Generator gen);
at::Generator context_generator(void *context);

// An owned reference to a recap state handle as a torch generator (for registration).
at::Generator state_generator(void *handle);
// The message of the last exception an operation caught in this thread ("" when none).
std::string take_error();

// Whether recap's replay was checked against torch's on this torch (the list in graph_replay.cpp).
bool replay_verified();
// The layout's name (RECAP_STATE_LAYOUT): "shared-slot", "per-capture", "per-capture-lazy".
const char *state_layout();
// How many captures the state's bookkeeping holds, read as this layout keeps it: the graphs it
// is registered with (shared slot), its capture states (per capture).
size_t capture_records(at::CUDAGeneratorState *st);

} // namespace recap_torch
