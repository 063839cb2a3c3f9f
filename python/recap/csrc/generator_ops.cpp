// SPDX-License-Identifier: Apache-2.0
// torch's default CUDA generators as recap framework generators: the table of include/recap.h,
// each operation the C++ call torch's own Python binding makes for the same request, under the
// generator's mutex as that binding takes it. So a value read or write inside a capture fails
// exactly where torch.cuda.get_rng_state/set_rng_state fail, a write clears cuDNN's RNN-dropout
// flag as torch's set_state does, and a per-capture offset a later torch keeps is kept too.
//
// State handles are the state objects' c10::GeneratorImpl pointers; recap's references to them are
// references of the objects' own (atomic) intrusive counts, so handles stay valid whatever the
// threads do. Operations run in the thread of the recap call without Python's lock (ctypes
// releases it) and touch no Python object. A C++ exception becomes RECAP_ERR_STATE for recap, its
// message kept for the Python call that led to it (take_error).
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/util/Exception.h>
#include <torch/headeronly/version.h>

#include "torch_access.h"

namespace recap_torch {
namespace {

struct GeneratorStateTag {
    using type = StatePtr at::CUDAGeneratorImpl::*;
    friend type member(GeneratorStateTag);
};

template <typename Tag, typename Tag::type M>
struct Steal {
    friend typename Tag::type member(Tag) { return M; }
};

template struct Steal<GeneratorStateTag, &at::CUDAGeneratorImpl::state_>;

thread_local std::string last_error;

// What recap passes back to every operation: one per device, never freed (recap's generator
// outlives any scope a destructor could be ordered in).
struct Context {
    recap_framework_ops_t ops{};
    std::string name;
    at::Generator gen;  // torch.cuda.default_generators[device]
    std::mutex lock;    // guards `installed`
    c10::intrusive_ptr<c10::GeneratorImpl> installed;  // what state_current lends
};

Context *ctx(void *fw) { return static_cast<Context *>(fw); }

c10::GeneratorImpl *obj_impl(void *obj) { return static_cast<c10::GeneratorImpl *>(obj); }

at::CUDAGeneratorImpl *cuda_impl(c10::GeneratorImpl *g)
{
    return static_cast<at::CUDAGeneratorImpl *>(g);
}

template <typename F>
recap_status_t guarded(F &&f) noexcept
{
    try {
        return f();
    } catch (const c10::Error &e) {
        last_error = e.what_without_backtrace();
    } catch (const std::exception &e) {
        last_error = e.what();
    } catch (...) {
        last_error = "recap.torch: an unknown C++ exception";
    }
    return RECAP_ERR_STATE;
}

// torch.Generator.get_state on this torch: current_seed() and philox_offset_per_thread(), the
// latter refusing inside a capture.
recap_status_t load(c10::GeneratorImpl *g, uint8_t out[RECAP_STATE_BYTES])
{
    return guarded([&] {
        std::lock_guard<std::mutex> held(g->mutex_);
        uint64_t seed = cuda_impl(g)->current_seed();
        uint64_t offset = cuda_impl(g)->philox_offset_per_thread();
        std::memcpy(out, &seed, 8);
        std::memcpy(out + 8, &offset, 8);
        return RECAP_OK;
    });
}

// torch.Generator.set_state on this torch: set_current_seed (which resets cuDNN's RNN flag, and
// inside a capture accepts only the seed it has) then set_philox_offset_per_thread. An offset
// torch would refuse after setting the seed is refused before anything changes.
recap_status_t store(c10::GeneratorImpl *g, const uint8_t in[RECAP_STATE_BYTES])
{
    uint64_t seed, offset;

    std::memcpy(&seed, in, 8);
    std::memcpy(&offset, in + 8, 8);
    if (offset % 4 != 0) {
        last_error = "recap.torch: a Philox offset must be a multiple of 4";
        return RECAP_ERR_MISALIGNED;
    }
    return guarded([&] {
        std::lock_guard<std::mutex> held(g->mutex_);
        cuda_impl(g)->set_current_seed(seed);
        cuda_impl(g)->set_philox_offset_per_thread(offset);
        return RECAP_OK;
    });
}

recap_status_t get_state(void *fw, uint8_t state[RECAP_STATE_BYTES])
{
    return load(ctx(fw)->gen.unsafeGetGeneratorImpl(), state);
}

recap_status_t set_state(void *fw, const uint8_t state[RECAP_STATE_BYTES])
{
    return store(ctx(fw)->gen.unsafeGetGeneratorImpl(), state);
}

recap_status_t state_get(void *, void *obj, uint8_t state[RECAP_STATE_BYTES])
{
    return load(obj_impl(obj), state);
}

recap_status_t state_set(void *, void *obj, const uint8_t state[RECAP_STATE_BYTES])
{
    return store(obj_impl(obj), state);
}

// One reference to g's object, for recap (given back by state_release).
void *owned(const at::Generator &g)
{
    c10::intrusive_ptr<c10::GeneratorImpl> ref = g.getIntrusivePtr();
    return ref.release();
}

// Generator.clone_state: a new object with a copy of the state (refused inside a capture).
at::Generator clone_of(at::Generator &g)
{
    std::lock_guard<std::mutex> held(g.mutex());
    return g.clone();
}

recap_status_t state_create(void *fw, uint64_t seed, void **obj_p)
{
    return guarded([&] {
        at::Generator g = clone_of(ctx(fw)->gen);
        {
            std::lock_guard<std::mutex> held(g.mutex()); // Generator.manual_seed
            g.set_current_seed(seed);
        }
        *obj_p = owned(g);
        return RECAP_OK;
    });
}

recap_status_t state_clone(void *, void *obj, void **clone_p)
{
    return guarded([&] {
        at::Generator src(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(obj_impl(obj)));
        *clone_p = owned(clone_of(src));
        return RECAP_OK;
    });
}

recap_status_t state_install(void *fw, void *obj)
{
    Context *c = ctx(fw);
    return guarded([&] {
        auto state = c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(obj_impl(obj));
        std::lock_guard<std::mutex> held(c->lock);
        {
            std::lock_guard<std::mutex> gen_held(c->gen.mutex());
            c->gen.unsafeGetGeneratorImpl()->graphsafe_set_state(state);
        }
        c->installed = std::move(state);
        return RECAP_OK;
    });
}

// The object installed last when the generator still draws from its state; otherwise a new
// object on the generator's current state (graphsafe_get_state), kept here while it is current.
recap_status_t state_current(void *fw, void **obj_p)
{
    Context *c = ctx(fw);
    return guarded([&] {
        std::lock_guard<std::mutex> held(c->lock);
        // The generator's mutex for the read of its state too: torch's own graphsafe_set_state
        // (Generator.graphsafe_set_state, another thread's) writes it holding only that one.
        std::lock_guard<std::mutex> gen_held(c->gen.mutex());
        at::CUDAGeneratorImpl *def = cuda_impl(c->gen.unsafeGetGeneratorImpl());
        if (!c->installed || state_of(cuda_impl(c->installed.get())) != state_of(def))
            c->installed = def->graphsafe_get_state();
        *obj_p = c->installed.get();
        return RECAP_OK;
    });
}

void state_release(void *, void *obj)
{
    // Dropping the reclaimed reference frees the object with its last reference (noexcept).
    (void)c10::intrusive_ptr<c10::GeneratorImpl>::reclaim(obj_impl(obj));
}

recap_status_t state_retain(void *, void *obj)
{
    c10::raw::intrusive_ptr::incref(obj_impl(obj));
    return RECAP_OK;
}

// torch before 2.14 rejects a draw from a state not registered with the running capture; 2.14
// registers such states lazily.
recap_status_t needs_registration(void *, int *needs_p)
{
    *needs_p = TORCH_VERSION_MAJOR < 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 14);
    return RECAP_OK;
}

std::mutex contexts_lock;
auto *contexts = new std::unordered_map<int, std::unique_ptr<Context>>();
auto *test_contexts = new std::vector<std::unique_ptr<Context>>(); // recap._C._test_context

} // namespace

at::CUDAGeneratorState *state_of(at::CUDAGeneratorImpl *impl)
{
    return (impl->*member(GeneratorStateTag{})).get();
}

const void *state_field(at::CUDAGeneratorImpl *impl)
{
    return &(impl->*member(GeneratorStateTag{}));
}

// A context on `gen`, its table filled with the operations above.
static std::unique_ptr<Context> new_context(at::Generator gen, std::string name)
{
    auto made = std::make_unique<Context>();
    made->gen = std::move(gen);
    made->name = std::move(name);
    recap_framework_ops_t &ops = made->ops;
    ops.version = RECAP_FRAMEWORK_OPS_VERSION;
    ops.name = made->name.c_str();
    ops.get_state = get_state;
    ops.set_state = set_state;
    ops.state_create = state_create;
    ops.state_clone = state_clone;
    ops.state_install = state_install;
    ops.state_current = state_current;
    ops.state_get = state_get;
    ops.state_set = state_set;
    ops.state_release = state_release;
    ops.state_retain = state_retain;
    ops.needs_registration = needs_registration;
    return made;
}

void *framework_context(int device)
{
    std::lock_guard<std::mutex> held(contexts_lock);
    auto &c = (*contexts)[device];
    if (!c)
        c = new_context(at::cuda::detail::getDefaultCUDAGenerator(device),
                        "torch.cuda:" + std::to_string(device));
    return c.get();
}

void *test_context(at::Generator gen)
{
    std::lock_guard<std::mutex> held(contexts_lock);
    test_contexts->push_back(
        new_context(std::move(gen), "test:" + std::to_string(test_contexts->size())));
    return test_contexts->back().get();
}

at::Generator context_generator(void *context)
{
    return ctx(context)->gen;
}

const recap_framework_ops_t *framework_ops_of(void *context)
{
    return &ctx(context)->ops;
}

at::Generator state_generator(void *handle)
{
    return at::Generator(c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(obj_impl(handle)));
}

std::string take_error()
{
    std::string e;
    e.swap(last_error);
    return e;
}

} // namespace recap_torch
