// SPDX-License-Identifier: Apache-2.0
// Replays of torch CUDA graphs that pay only for the generator states they draw from.
//
// torch 2.11's CUDAGraph::replay runs, for every generator state registered with the graph, a
// prologue of two fill_ kernels (the state's seed and offset into the one-element device tensors
// the captured kernels read) and advances the state by what the graph drew from it: some 10 us of
// host time per state, drawn from or not. recap registers every live tracker state before each
// capture (torch refuses a registration once it has begun), so a graph drawing from one of eight
// tracker states would pay for nine. Here a replay walks the same table torch's replay walks, at
// each replay (an instantiate, reset or capture made any way is followed), writes the seed and
// offset of the states with an increment by two stream memory writes each (no kernel), advances
// them as CUDAGeneratorState::increase does, and launches the graph's exec on the current stream
// of the capture's device, as torch does.
//
// Only on the torch versions listed below, each checked in gpu-check against torch's own replay
// (tests/python/replay_plans.py: outputs, every state after K replays with eager draws between,
// and what else torch's C++ replay does on that version). On any other torch, and for any replay
// this does not take (no exec, a capture running, a state capturing), torch's replay runs.
#include <array>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <torch/headeronly/version.h>

#include "torch_access.h"

namespace recap_torch {
namespace {

// What torch's C++ replay does on each listed version, beyond the per-state prologue and the
// launch on the current stream: 2.11 synchronizes the device after the launch on drivers before
// CUDA 11.4 (done here too) and nothing else.
constexpr std::array<std::pair<int, int>, 1> verified = {{{2, 11}}};

using write64_fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

struct Driver {
    write64_fn write64 = nullptr;
    int version = 0;
};

// The driver's stream write, through the runtime torch uses (so the driver torch drives).
const Driver &driver()
{
    static const Driver d = [] {
        Driver r;
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000, cudaEnableDefault,
                                             &found) == cudaSuccess &&
            found == cudaDriverEntryPointSuccess)
            r.write64 = reinterpret_cast<write64_fn>(fn);
        if (cudaDriverGetVersion(&r.version) != cudaSuccess)
            r.version = 0;
        (void)cudaGetLastError();
        return r;
    }();
    return d;
}

struct Draw {
    at::CUDAGeneratorState *state;
    uint64_t increment;
    CUdeviceptr seed_dev, offset_dev;
};

constexpr size_t max_draws = 64;

void check_driver(CUresult rc, const char *what)
{
    TORCH_CHECK(rc == CUDA_SUCCESS, "recap.torch: ", what, " failed (CUDA driver error ",
                static_cast<int>(rc), ")");
}

} // namespace

bool replay_verified()
{
    for (const auto &v : verified)
        if (v.first == TORCH_VERSION_MAJOR && v.second == TORCH_VERSION_MINOR)
            return true;
    return false;
}

bool replay(at::cuda::CUDAGraph *graph)
{
    if (!replay_verified() || graph == nullptr || !(graph->*GraphMembers::has_exec) ||
        graph->*GraphMembers::exec == nullptr)
        return false;
    const Driver &drv = driver();
    if (drv.write64 == nullptr)
        return false;
    const at::cuda::CUDAStream &capture_stream = graph->*GraphMembers::stream;
    c10::cuda::OptionalCUDAGuard guard(capture_stream.device());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    cudaStreamCaptureStatus capturing;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (capturing != cudaStreamCaptureStatusNone)
        return false; // torch's replay raises there
    std::array<Draw, max_draws> draws;
    size_t n = 0;
    for (const auto &entry : graph->*GraphMembers::table) {
        at::CUDAGeneratorState *st = entry.first.get();
        if (st->capturing_)
            return false; // torch's replay raises there
        if (entry.second == 0)
            continue;
        if (n == max_draws || !st->seed_extragraph_.defined() ||
            !st->offset_extragraph_.defined())
            return false;
        draws[n++] = {st, (entry.second + 3) / 4 * 4, // as CUDAGeneratorState::increase rounds
                      reinterpret_cast<CUdeviceptr>(st->seed_extragraph_.mutable_data_ptr()),
                      reinterpret_cast<CUdeviceptr>(st->offset_extragraph_.mutable_data_ptr())};
    }
    auto cu_stream = reinterpret_cast<CUstream>(stream);
    for (size_t i = 0; i < n; i++) {
        check_driver(drv.write64(cu_stream, draws[i].seed_dev, draws[i].state->seed_, 0),
                     "cuStreamWriteValue64 (seed)");
        check_driver(drv.write64(cu_stream, draws[i].offset_dev,
                                 draws[i].state->philox_offset_per_thread_, 0),
                     "cuStreamWriteValue64 (offset)");
    }
    for (size_t i = 0; i < n; i++) // before the launch, as torch's prologue advances them
        draws[i].state->philox_offset_per_thread_ += draws[i].increment;
    C10_CUDA_CHECK(cudaGraphLaunch(graph->*GraphMembers::exec, stream));
    if (drv.version < 11040)
        C10_CUDA_CHECK(cudaDeviceSynchronize());
    return true;
}

std::vector<std::pair<uintptr_t, uint64_t>> graph_states(at::cuda::CUDAGraph *graph)
{
    std::vector<std::pair<uintptr_t, uint64_t>> out;
    for (const auto &entry : graph->*GraphMembers::table)
        out.emplace_back(reinterpret_cast<uintptr_t>(entry.first.get()), entry.second);
    return out;
}

} // namespace recap_torch
