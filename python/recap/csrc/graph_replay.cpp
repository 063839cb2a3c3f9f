// SPDX-License-Identifier: Apache-2.0
// Replays of torch CUDA graphs at recap's flat cost: the graph advances its generator states'
// device offsets itself, so a replay writes nothing to the device in steady state.
//
// torch 2.11's CUDAGraph::replay runs, for every generator state registered with the graph, a
// prologue of two fill_ kernels (the state's seed and offset into the one-element device tensors
// the captured kernels read, the state's "slot") and advances the state by what the graph drew
// from it: host time per state (bench/RESULTS.md), drawn from or not. recap registers every live
// tracker state before each capture, so that would be paid for every tracker state.
//
// recap drives those states as it drives its own generators (src/capture/graphs.c):
// - At the end of a capture made through torch.cuda.CUDAGraph (recap.torch wraps capture_end),
//   before torch ends it, one captured _foreach_add_ adds to each drawn state's device offset
//   what the graph drew from it: the graph's last node moves the slot on, so after a launch the
//   slot holds the base the next launch needs.
// - Each state has a mirror: what its slot holds after the last launch recap made (seed, offset,
//   the tensors' addresses, the stream, how many graphs the state was registered with). A replay
//   compares the state's host seed and offset with the mirror: equal, nothing is written; an
//   eager draw, a set, a capture or torch's own replay since then, and the two words are written
//   by stream memory writes (no kernel). Then the host offset advances by the increment, as
//   torch's prologue does, and the exec is launched on the current stream.
// - States the graph draws from without an advance node of recap's (the capture was not seen,
//   or the graph changed behind recap) are written at every replay, as before this design.
// torch's replay of such a graph stays exact: its prologue writes the slot, the graph's node
// advances it (to where the host offset already is).
//
// Only on the torch versions listed below, each checked in gpu-check against torch's own replay
// (python/tests/gpu/replay_plans.py: outputs, every state after K replays with eager draws, sets,
// other captures and torch's replays between, and what else torch's C++ replay does on that
// version). On any other torch, and for any replay this does not take (no exec, a capture
// running, a state capturing), torch's replay runs.
//
// The fields read are those of the shared-slot layout (RECAP_STATE_LAYOUT 1, torch 2.11). From
// torch 2.12 a state keeps one slot per capture id (capture_states_), so a replay's slot is the
// graph's capture's; none of those versions was checked against torch's replay on a GPU, so
// their builds compile no replay at all (REPLAY_VERIFIED is false there, recap/_replay.py says
// so once, and torch's replay runs).
#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/intrusive_ptr.h>
#include <cuda.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/headeronly/version.h>

#include "torch_access.h"

namespace py = pybind11;

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

void check_driver(CUresult rc, const char *what)
{
    TORCH_CHECK(rc == CUDA_SUCCESS, "recap.torch: ", what, " failed (CUDA driver error ",
                static_cast<int>(rc), ")");
}

uint64_t round4(uint64_t n) { return (n + 3) / 4 * 4; } // as CUDAGeneratorState::increase rounds

using State = at::CUDAGeneratorState;
using WeakState = c10::weak_intrusive_ptr<State>;

// What a state's slot holds after the last launch recap made of a graph advancing it.
struct Mirror {
    bool valid = false;
    uint64_t seed = 0, offset = 0;
    CUdeviceptr seed_dev = 0, offset_dev = 0;
    cudaStream_t stream = nullptr;
    size_t graphs = 0; // registered_graphs_.size(): a registration (and capture) recap missed
};

// Every state a graph of recap's advances, with its mirror. The weak reference keeps the
// state's address from being reused while its entry lives (c10 frees an object only when its
// weak count drops too); entries of dead states go at the next insertion.
std::mutex mirrors_lock; // also guards every Mirror and every state's host offset recap moves
std::unordered_map<State *, std::pair<WeakState, std::shared_ptr<Mirror>>> mirrors;

std::shared_ptr<Mirror> mirror_of(const StatePtr &st)
{
    auto it = mirrors.find(st.get());
    if (it != mirrors.end() && !it->second.first.expired())
        return it->second.second;
    for (auto i = mirrors.begin(); i != mirrors.end();)
        i = i->second.first.expired() ? mirrors.erase(i) : std::next(i);
    auto m = std::make_shared<Mirror>();
    mirrors.insert_or_assign(st.get(), std::make_pair(WeakState(st), m));
    return m;
}

void invalidate(State *st)
{
    auto it = mirrors.find(st);
    if (it != mirrors.end())
        it->second.second->valid = false;
}

struct Stats {
    uint64_t plans = 0, replays = 0, to_torch = 0, slot_writes = 0, advanced_captures = 0;
} stats;

// A graph recap replays (held in the Python graph's __dict__, so it lives and dies with it).
struct Plan {
    struct Advanced {
        WeakState state;
        State *raw;
        uint64_t increment;
        std::shared_ptr<Mirror> mirror;
    };
    std::vector<Advanced> advanced; // the states the graph's own last node advances
    cudaGraphExec_t exec = nullptr; // the exec made from the capture holding that node
    cudaGraph_t graph = nullptr;    // and the kept graph it is in (keep_graph=True)
    uint64_t replays = 0;

    // Whether the graph about to launch is the one recap added its node to.
    bool holds_node(at::cuda::CUDAGraph *g)
    {
        cudaGraphExec_t now = g->*GraphMembers::exec;
        if (advanced.empty() || now == nullptr)
            return false;
        if (now == exec)
            return true;
        if (graph != nullptr && g->*GraphMembers::has_graph && g->*GraphMembers::graph == graph) {
            exec = now; // instantiated again from the kept graph, which holds the node
            return true;
        }
        return false;
    }
};

} // namespace

bool replay_verified()
{
    if (RECAP_STATE_LAYOUT != 1)
        return false;
    for (const auto &v : verified)
        if (v.first == TORCH_VERSION_MAJOR && v.second == TORCH_VERSION_MINOR)
            return true;
    return false;
}

namespace {

// After torch's capture_begin: every registered state's slot was just written by torch's
// capture prologue, so no mirror of them holds; the plan starts again.
void plan_begun(at::cuda::CUDAGraph *g, Plan &plan)
{
    std::lock_guard<std::mutex> hold(mirrors_lock);
    for (const auto &entry : g->*GraphMembers::table)
        invalidate(entry.first.get());
    plan.advanced.clear();
    plan.exec = nullptr;
    plan.graph = nullptr;
}

// Before torch's capture_end, still capturing: the advance node (one captured _foreach_add_ on
// the capture stream, after all the graph's work, which has joined that stream by now).
void plan_ending(at::cuda::CUDAGraph *g, Plan &plan)
{
    plan.advanced.clear();
    plan.exec = nullptr;
    plan.graph = nullptr;
    if (!replay_verified())
        return;
#if RECAP_STATE_LAYOUT == 1
    std::vector<Plan::Advanced> adv;
    std::vector<at::Tensor> offsets;
    std::vector<c10::Scalar> increments;
    {
        std::lock_guard<std::mutex> hold(mirrors_lock);
        for (const auto &entry : g->*GraphMembers::table) {
            State *st = entry.first.get();
            if (!st->capturing_ || st->offset_intragraph_ == 0 ||
                !st->offset_extragraph_.defined())
                continue;
            uint64_t inc = round4(st->offset_intragraph_);
            adv.push_back({WeakState(entry.first), st, inc, mirror_of(entry.first)});
            offsets.emplace_back(st->offset_extragraph_);
            increments.emplace_back(static_cast<int64_t>(inc));
        }
    }
    if (adv.empty())
        return;
    c10::cuda::CUDAStreamGuard guard(g->*GraphMembers::stream);
    at::_foreach_add_(offsets, increments);
    plan.advanced = std::move(adv);
    stats.advanced_captures++;
#endif
}

// After torch's capture_end returned: the exec (or the kept graph) that holds the node, when
// torch's table says the graph draws what the node advances.
void plan_ended(at::cuda::CUDAGraph *g, Plan &plan)
{
    if (plan.advanced.empty())
        return;
    const auto &table = g->*GraphMembers::table;
    for (const auto &a : plan.advanced) {
        auto it = table.find(a.state.lock());
        if (it == table.end() || round4(it->second) != a.increment) {
            plan.advanced.clear(); // not what was captured: every replay writes, as torch would
            return;
        }
    }
    plan.exec = g->*GraphMembers::has_exec ? g->*GraphMembers::exec : nullptr;
    plan.graph = g->*GraphMembers::has_graph ? g->*GraphMembers::graph : nullptr;
}

struct Draw {
    State *state;
    uint64_t increment;
    CUdeviceptr seed_dev, offset_dev;
    Mirror *mirror; // null: the graph does not advance this state itself
};

constexpr size_t max_draws = 64;

// One replay by recap: true when launched; false when torch's replay must run (nothing done).
bool replay_planned(at::cuda::CUDAGraph *g, Plan *plan)
{
    if (!replay_verified() || !(g->*GraphMembers::has_exec) || g->*GraphMembers::exec == nullptr)
        return false;
#if RECAP_STATE_LAYOUT != 1
    (void)plan;
    return false;
#else
    const Driver &drv = driver();
    if (drv.write64 == nullptr)
        return false;
    const at::cuda::CUDAStream &capture_stream = g->*GraphMembers::stream;
    c10::cuda::OptionalCUDAGuard guard(capture_stream.device());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    cudaStreamCaptureStatus capturing;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (capturing != cudaStreamCaptureStatusNone)
        return false; // torch's replay raises there
    bool node = plan != nullptr && plan->holds_node(g);
    std::array<Draw, max_draws> draws;
    size_t n = 0;
    for (const auto &entry : g->*GraphMembers::table) {
        State *st = entry.first.get();
        if (st->capturing_)
            return false; // torch's replay raises there
        if (entry.second == 0)
            continue;
        if (n == max_draws || !st->seed_extragraph_.defined() ||
            !st->offset_extragraph_.defined())
            return false;
        uint64_t inc = round4(entry.second);
        Mirror *m = nullptr;
        if (node)
            for (const auto &a : plan->advanced)
                if (a.raw == st && a.increment == inc)
                    m = a.mirror.get();
        draws[n++] = {st, inc,
                      reinterpret_cast<CUdeviceptr>(st->seed_extragraph_.mutable_data_ptr()),
                      reinterpret_cast<CUdeviceptr>(st->offset_extragraph_.mutable_data_ptr()), m};
    }
    auto cu_stream = reinterpret_cast<CUstream>(stream);
    std::unique_lock<std::mutex> hold(mirrors_lock);
    for (size_t i = 0; i < n; i++) {
        const Draw &d = draws[i];
        const Mirror *m = d.mirror;
        if (m != nullptr && m->valid && m->seed == d.state->seed_ &&
            m->offset == d.state->philox_offset_per_thread_ && m->seed_dev == d.seed_dev &&
            m->offset_dev == d.offset_dev && m->stream == stream &&
            m->graphs == d.state->registered_graphs_.size())
            continue; // the slot holds this base already (the last launch's node put it there)
        if (m == nullptr)
            invalidate(d.state);
        check_driver(drv.write64(cu_stream, d.seed_dev, d.state->seed_, 0),
                     "cuStreamWriteValue64 (seed)");
        check_driver(drv.write64(cu_stream, d.offset_dev, d.state->philox_offset_per_thread_, 0),
                     "cuStreamWriteValue64 (offset)");
        stats.slot_writes++;
    }
    for (size_t i = 0; i < n; i++) { // before the launch, as torch's prologue advances them
        Draw &d = draws[i];
        uint64_t base = d.state->philox_offset_per_thread_;
        d.state->philox_offset_per_thread_ = base + d.increment;
        if (d.mirror != nullptr)
            *d.mirror = {true, d.state->seed_, base + d.increment, d.seed_dev, d.offset_dev,
                         stream, d.state->registered_graphs_.size()};
    }
    hold.unlock();
    cudaError_t rc;
    {
        py::gil_scoped_release nogil;
        rc = cudaGraphLaunch(g->*GraphMembers::exec, stream);
    }
    if (rc != cudaSuccess) { // the nodes did not run: the slots are not what the mirrors say
        std::lock_guard<std::mutex> again(mirrors_lock);
        for (size_t i = 0; i < n; i++)
            if (draws[i].mirror != nullptr)
                draws[i].mirror->valid = false;
        C10_CUDA_CHECK(rc);
    }
    if (drv.version < 11040)
        C10_CUDA_CHECK(cudaDeviceSynchronize());
    return true;
#endif
}

// The plan in the graph's __dict__ (null when there is none, or it is not one of ours).
Plan *plan_in(py::handle self)
{
    static PyObject *key = PyUnicode_InternFromString("_recap_plan");
    PyObject *o = PyObject_GetAttr(self.ptr(), key);
    if (o == nullptr) {
        PyErr_Clear();
        return nullptr;
    }
    py::object held = py::reinterpret_steal<py::object>(o);
    return py::isinstance<Plan>(held) ? held.cast<Plan *>() : nullptr;
}

// torch.cuda.CUDAGraph.replay while recap.torch is installed: recap's replay for a graph with a
// plan, torch's C++ replay (what torch's own Python replay calls) for any other and for any
// replay recap does not take.
void replay_method(py::handle self)
{
    auto *g = self.cast<at::cuda::CUDAGraph *>();
    Plan *plan = plan_in(self);
    if (plan != nullptr && replay_planned(g, plan)) {
        plan->replays++;
        stats.replays++;
        return;
    }
    if (plan != nullptr)
        stats.to_torch++;
    {
        std::lock_guard<std::mutex> hold(mirrors_lock); // torch's prologue writes every slot
        for (const auto &entry : g->*GraphMembers::table)
            invalidate(entry.first.get());
    }
    py::gil_scoped_release nogil;
    g->replay();
}

} // namespace

const char *state_layout()
{
    switch (RECAP_STATE_LAYOUT) {
    case 1:
        return "shared-slot";
    case 2:
        return "per-capture";
    default:
        return "per-capture-lazy";
    }
}

size_t capture_records(State *st)
{
#if RECAP_STATE_LAYOUT == 1
    return st->registered_graphs_.size();
#else
    std::lock_guard<std::mutex> hold(st->capture_states_mutex_);
    return st->capture_states_.size();
#endif
}

void define_replay(py::module_ &m)
{
    m.attr("REPLAY_VERIFIED") = replay_verified();
    m.attr("STATE_LAYOUT") = state_layout();
    py::class_<Plan>(m, "Plan", "A torch graph recap.torch replays (recap/_replay.py).")
        .def(py::init([] {
            stats.plans++;
            return new Plan();
        }))
        .def_readonly("replays", &Plan::replays, "replays recap made of the graph")
        .def_property_readonly(
            "advanced", [](const Plan &p) { return p.advanced.size(); },
            "how many states the graph's own last node advances (0: each replay writes them)");
    m.def(
        "plan_begun",
        [](at::cuda::CUDAGraph &g, Plan &p) { plan_begun(&g, p); },
        "after torch's capture_begin: the registered states' slots were rewritten");
    m.def(
        "plan_ending",
        [](at::cuda::CUDAGraph &g, Plan &p) { plan_ending(&g, p); },
        "before torch's capture_end: capture the node advancing each drawn state's slot");
    m.def(
        "plan_ended",
        [](at::cuda::CUDAGraph &g, Plan &p) { plan_ended(&g, p); },
        "after torch's capture_end: the exec (or kept graph) holding that node");
    // A method object (instancemethod binds to the graph as a Python function would), so a
    // replay costs one C++ call, less than torch's own Python replay calling super().replay().
    m.attr("replay_method") = py::reinterpret_steal<py::object>(PyInstanceMethod_New(
        py::cpp_function(&replay_method, py::name("replay"), py::arg("self"),
                         "Replay the CUDA work captured by this graph (recap.torch: at recap's "
                         "flat cost for graphs captured while it is installed).")
            .ptr()));
    m.def(
        "replay_stats",
        [] {
            return py::dict(py::arg("plans") = stats.plans, py::arg("replays") = stats.replays,
                            py::arg("to_torch") = stats.to_torch,
                            py::arg("slot_writes") = stats.slot_writes,
                            py::arg("advanced_captures") = stats.advanced_captures);
        },
        "counts: plans made, replays by recap and by torch (of planned graphs), slot writes, "
        "captures given an advance node");
    m.def(
        "graph_states",
        [](at::cuda::CUDAGraph &g) {
            std::vector<std::pair<uintptr_t, uint64_t>> out;
            for (const auto &entry : g.*GraphMembers::table)
                out.emplace_back(reinterpret_cast<uintptr_t>(entry.first.get()), entry.second);
            return out;
        },
        "the (state address, increment) pairs of the graph's table");
}

} // namespace recap_torch
