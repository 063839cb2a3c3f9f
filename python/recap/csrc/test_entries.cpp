// SPDX-License-Identifier: Apache-2.0
// recap._C's test entries (names starting with _test_; python/tests/unit/test_torch_threads.py): the
// state-handle bookkeeping of generator_ops.cpp (state_install, state_current and the object it
// keeps installed, state_retain/state_release on torch's intrusive counts) under many threads,
// without a device. torch's default CUDA generator needs one, so a test context drives a CUDA
// generator made with the constructor that takes a state: neither it nor graphsafe_set_state,
// graphsafe_get_state, current_seed or the counts call CUDA. clone() and the value operations
// ask CUDA whether the stream captures, so without a device they fail (RECAP_ERR_STATE with
// torch's message), which the threads check too. The operations called are the context's table,
// the very functions torch's default generators get (generator_ops.cpp fills both).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "torch_access.h"

namespace py = pybind11;

namespace recap_torch {
namespace {

using Impl = c10::GeneratorImpl;

c10::intrusive_ptr<at::CUDAGeneratorImpl> fabricated(uint64_t seed, uint64_t offset = 0)
{
    return c10::make_intrusive<at::CUDAGeneratorImpl>(
        0, c10::make_intrusive<at::CUDAGeneratorState>(seed, offset));
}

at::CUDAGeneratorImpl *cuda(void *obj) { return static_cast<at::CUDAGeneratorImpl *>(obj); }

// A reusable barrier (C++17 has none).
class Barrier {
  public:
    explicit Barrier(int n) : n_(n) {}
    void wait()
    {
        std::unique_lock<std::mutex> held(m_);
        uint64_t round = round_;
        if (++waiting_ == n_) {
            waiting_ = 0;
            round_++;
            cv_.notify_all();
        } else {
            cv_.wait(held, [&] { return round_ != round; });
        }
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_, waiting_ = 0;
    uint64_t round_ = 0;
};

struct Target {
    const recap_framework_ops_t *ops;
    void *fw;
    at::Generator gen;
    std::vector<void *> handles;  // the caller holds one reference to each
    std::set<void *> known;
    std::mutex recap_lock;  // what recap's generator lock is around its exchange
};

enum Op { INSTALL, CURRENT, RETAIN, RELEASE, EXCHANGE, VALUE, MISALIGNED, TORCH_SET, TORCH_GET,
          NOPS };
const char *const op_names[NOPS] = {"install", "current", "retain", "release", "exchange",
                                    "value", "misaligned", "torch_set", "torch_get"};

struct Run {
    std::vector<std::unique_ptr<Target>> targets;
    bool torch_ops;  // threads also call torch's own graphsafe_set_state/get_state bindings
    bool checks;     // quiescent identity checks between rounds (nobody else calls meanwhile)
    bool value_ops;  // also the value operations (which reach CUDA, failing without a device)
    std::mutex lock;
    std::vector<std::string> failures;
    uint64_t counts[NOPS] = {};
    uint64_t fresh = 0, value_refused = 0, checked = 0;

    void fail(std::string what)
    {
        std::lock_guard<std::mutex> held(lock);
        if (failures.size() < 20)
            failures.push_back(std::move(what));
    }
};

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_write8(void *addr);
// torch is not instrumented: ThreadSanitizer sees its writes only when told of them.
void torch_wrote(at::Generator &gen)
{
    __tsan_write8(const_cast<void *>(state_field(cuda(gen.unsafeGetGeneratorImpl()))));
}
#else
void torch_wrote(at::Generator &) {}
#endif

// torch's Generator.graphsafe_set_state / graphsafe_get_state bindings: the call under the
// generator's mutex (torch/csrc/Generator.cpp), which writes the generator's state pointer.
void torch_set(at::Generator &gen, void *obj)
{
    std::lock_guard<std::mutex> held(gen.mutex());
    gen.graphsafe_set_state(
        at::Generator(c10::intrusive_ptr<Impl>::reclaim_copy(static_cast<Impl *>(obj))));
    torch_wrote(gen);
}

void torch_get(at::Generator &gen)
{
    std::lock_guard<std::mutex> held(gen.mutex());
    (void)gen.graphsafe_get_state();
}

std::string hex(const void *p)
{
    char b[32];
    std::snprintf(b, sizeof b, "%p", p);
    return b;
}

// One random operation on a random target. `held`: the references this thread holds.
// counts: per operation, then current's new objects, then value operations refused.
void one_op(Run &run, std::mt19937_64 &rng, std::vector<std::pair<Target *, void *>> &held,
            uint64_t *counts)
{
    Target &t = *run.targets[rng() % run.targets.size()];
    void *h = t.handles[rng() % t.handles.size()];
    int op = static_cast<int>(rng() % (run.torch_ops ? NOPS : TORCH_SET));
    if (op == VALUE && !run.value_ops)
        op = CURRENT;
    void *p = nullptr;
    recap_status_t st;

    counts[op]++;
    switch (op) {
    case INSTALL:
        if ((st = t.ops->state_install(t.fw, h)) != RECAP_OK)
            run.fail("state_install: status " + std::to_string(st) + ": " + take_error());
        break;
    case CURRENT:
        // Lent: without a reference it may be replaced at once, so only its identity is read.
        if ((st = t.ops->state_current(t.fw, &p)) != RECAP_OK || p == nullptr)
            run.fail("state_current: status " + std::to_string(st) + ": " + take_error());
        else if (!t.known.count(p) && !run.torch_ops)
            run.fail("state_current lent " + hex(p) + ", which nobody installed");
        else if (!t.known.count(p))
            counts[NOPS]++;  // a state torch's binding installed: a new object on it
        break;
    case RETAIN:
        if ((st = t.ops->state_retain(t.fw, h)) != RECAP_OK)
            run.fail("state_retain: status " + std::to_string(st));
        else
            held.emplace_back(&t, h);
        break;
    case RELEASE:
        if (!held.empty()) {
            size_t i = rng() % held.size();
            held[i].first->ops->state_release(held[i].first->fw, held[i].second);
            held[i] = held.back();
            held.pop_back();
        }
        break;
    case EXCHANGE: {
        // recap__fw_exchange's sequence under one lock, as recap's generator lock holds it: the
        // lent object is retained (a handle the caller owns, so alive) and another installed.
        std::lock_guard<std::mutex> g(t.recap_lock);
        if ((st = t.ops->state_current(t.fw, &p)) != RECAP_OK) {
            run.fail("state_current: status " + std::to_string(st) + ": " + take_error());
            break;
        }
        if (t.known.count(p)) {
            if (t.ops->state_retain(t.fw, p) != RECAP_OK)
                run.fail("state_retain of the current object failed");
            else
                held.emplace_back(&t, p);
        }
        if ((st = t.ops->state_install(t.fw, h)) != RECAP_OK)
            run.fail("state_install: status " + std::to_string(st) + ": " + take_error());
        break;
    }
    case VALUE: {
        // Needs CUDA (is the stream capturing?): refused here with torch's message, kept for
        // this thread; with a device it works.
        uint8_t b[RECAP_STATE_BYTES];
        st = (rng() & 1) ? t.ops->state_get(t.fw, h, b) : t.ops->get_state(t.fw, b);
        std::string e = take_error();
        if (st == RECAP_ERR_STATE && !e.empty())
            counts[NOPS + 1]++;
        else if (st != RECAP_OK)
            run.fail("a value operation: status " + std::to_string(st) + ", message '" + e +
                     "'");
        break;
    }
    case MISALIGNED: {
        uint8_t b[RECAP_STATE_BYTES] = {};
        b[8] = 2;
        st = (rng() & 1) ? t.ops->state_set(t.fw, h, b) : t.ops->set_state(t.fw, b);
        std::string e = take_error();
        if (st != RECAP_ERR_MISALIGNED || e.find("multiple of 4") == std::string::npos)
            run.fail("a misaligned offset: status " + std::to_string(st) + ", message '" + e +
                     "'");
        break;
    }
    case TORCH_SET:
        torch_set(t.gen, h);
        break;
    case TORCH_GET:
        torch_get(t.gen);
        break;
    }
}

// Between rounds, nobody else calling: state_current lends one object twice, on the state the
// generator draws from (a handle installed, unless torch's binding installed another state);
// after an install it lends exactly the object installed.
void check_quiescent(Run &run, std::mt19937_64 &rng)
{
    for (auto &tp : run.targets) {
        Target &t = *tp;
        void *p1 = nullptr, *p2 = nullptr;
        if (t.ops->state_current(t.fw, &p1) != RECAP_OK ||
            t.ops->state_current(t.fw, &p2) != RECAP_OK || p1 != p2 || p1 == nullptr) {
            run.fail("state_current lent " + hex(p1) + " then " + hex(p2));
            continue;
        }
        auto *def = static_cast<at::CUDAGeneratorImpl *>(t.gen.unsafeGetGeneratorImpl());
        if (state_of(cuda(p1)) != state_of(def))
            run.fail("state_current lent an object on another state than the generator's");
        if (!run.torch_ops && !t.known.count(p1))
            run.fail("state_current lent " + hex(p1) + ", which nobody installed");
        void *h = t.handles[rng() % t.handles.size()];
        if (t.ops->state_install(t.fw, h) != RECAP_OK ||
            t.ops->state_current(t.fw, &p1) != RECAP_OK || p1 != h)
            run.fail("after installing " + hex(h) + " state_current lent " + hex(p1));
        if (state_of(cuda(h)) != state_of(def))
            run.fail("after installing " + hex(h) + " the generator draws from another state");
        run.checked++;
    }
}

void worker(Run &run, Barrier &barrier, int index, uint64_t seed, int rounds, int ops)
{
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(index));
    std::vector<std::pair<Target *, void *>> held;
    uint64_t counts[NOPS + 2] = {};

    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < ops; i++)
            one_op(run, rng, held, counts);
        if (!run.checks)
            continue;
        barrier.wait();
        if (index == 0)
            check_quiescent(run, rng);
        barrier.wait();
    }
    for (auto &e : held)
        e.first->ops->state_release(e.first->fw, e.second);
    std::lock_guard<std::mutex> g(run.lock);
    for (int i = 0; i < NOPS; i++)
        run.counts[i] += counts[i];
    run.fresh += counts[NOPS];
    run.value_refused += counts[NOPS + 1];
}

// Owned by Python: a weak reference to a state object, to see it freed.
struct Watch {
    c10::weak_intrusive_ptr<Impl> weak;
};

uintptr_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }

} // namespace

void define_test_entries(py::module_ &m)
{
    py::class_<Watch>(m, "_TestWatch")
        .def("expired", [](const Watch &w) { return w.weak.expired(); })
        .def("use_count", [](const Watch &w) { return w.weak.use_count(); });
    m.def(
        "_test_context",
        [] {
            void *c = test_context(at::Generator(fabricated(67280421310721ull)));
            return py::make_tuple(addr(framework_ops_of(c)), addr(c));
        },
        "tests: (table, context) addresses of a context with recap._C's table on a CUDA "
        "generator made without a device (only the handle operations work without one)");
    m.def(
        "_test_generator",
        [](uintptr_t context) {
            return py::reinterpret_steal<py::object>(
                THPGenerator_Wrap(context_generator(reinterpret_cast<void *>(context))));
        },
        "tests: the torch.Generator a test context drives");
    m.def(
        "_test_state",
        [](uint64_t seed, uint64_t offset) {
            return addr(c10::intrusive_ptr<Impl>(fabricated(seed, offset)).release());
        },
        py::arg("seed"), py::arg("offset") = 0,
        "tests: a new state object made without a device, as a handle holding one reference "
        "(given back with the table's state_release)");
    m.def(
        "_test_state_fields",
        [](py::handle gen) {
            at::Generator g = THPGenerator_Unwrap(gen.ptr());
            TORCH_CHECK(g.device().is_cuda(), "recap._C._test_state_fields: not a CUDA generator");
            at::CUDAGeneratorState *st =
                state_of(static_cast<at::CUDAGeneratorImpl *>(g.unsafeGetGeneratorImpl()));
            return py::make_tuple(addr(st), st->seed_, st->philox_offset_per_thread_,
                                  capture_records(st));
        },
        "tests: (state address, seed, offset, capture records) of the generator state a CUDA "
        "generator draws from, read through this build's layout (STATE_LAYOUT)");
    m.def(
        "_test_refs",
        [](uintptr_t handle) {
            auto *impl = cuda(reinterpret_cast<void *>(handle));
            return py::make_tuple(c10::raw::intrusive_ptr::use_count(impl),
                                  c10::raw::intrusive_ptr::use_count(state_of(impl)));
        },
        "tests: the references to a state object and to the generator state it holds");
    m.def(
        "_test_watch",
        [](uintptr_t handle) {
            return Watch{c10::weak_intrusive_ptr<Impl>(
                c10::intrusive_ptr<Impl>::reclaim_copy(reinterpret_cast<Impl *>(handle)))};
        },
        "tests: a weak reference to a state object (expired() once it is freed)");
    m.def(
        "_test_threads",
        [](const std::vector<std::pair<uintptr_t, std::vector<uintptr_t>>> &targets, int threads,
           int rounds, int ops, uint64_t seed, bool torch_ops, bool checks, bool value_ops) {
            Run run;
            run.value_ops = value_ops;
            run.torch_ops = torch_ops;
            run.checks = checks;
            for (auto &[context, handles] : targets) {
                TORCH_CHECK(!handles.empty(), "recap._C._test_threads: a context without handles");
                auto t = std::make_unique<Target>();
                t->fw = reinterpret_cast<void *>(context);
                t->ops = framework_ops_of(t->fw);
                t->gen = context_generator(t->fw);
                for (uintptr_t h : handles) {
                    t->handles.push_back(reinterpret_cast<void *>(h));
                    t->known.insert(reinterpret_cast<void *>(h));
                }
                run.targets.push_back(std::move(t));
            }
            {
                py::gil_scoped_release unlocked;
                // A handle installed first: from then on state_current lends only what was
                // installed (unless torch's binding installs a state of its own).
                for (auto &t : run.targets)
                    if (t->ops->state_install(t->fw, t->handles[0]) != RECAP_OK)
                        run.fail("state_install: " + take_error());
                Barrier barrier(threads);
                std::vector<std::thread> pool;
                for (int i = 0; i < threads; i++)
                    pool.emplace_back(worker, std::ref(run), std::ref(barrier), i, seed, rounds,
                                      ops);
                for (auto &th : pool)
                    th.join();
            }
            py::dict counts;
            for (int i = 0; i < NOPS; i++)
                counts[op_names[i]] = run.counts[i];
            counts["fresh"] = run.fresh;
            counts["value_refused"] = run.value_refused;
            counts["checked"] = run.checked;
            return py::make_tuple(run.failures, counts);
        },
        "tests: `threads` threads, each `rounds` rounds of `ops` random operations through the "
        "tables of [(context, [handles])] (with torch_ops also torch's graphsafe_set_state / "
        "graphsafe_get_state; with checks state_current's identity between rounds; with value_ops "
        "the value operations too); returns "
        "(failures, counts per operation)");
}

} // namespace recap_torch
