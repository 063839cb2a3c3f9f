// SPDX-License-Identifier: Apache-2.0
// recap.megatron's CudaRNGStatesTracker.get_states()/set_states() in one call each: the map
// read or written by librecap in one go, the values made into torch tensors (value mode) or the
// state objects handed out as the torch.Generators they are (graph-safe mode) here, where the
// ctypes path made a foreign call per name and a Python bytes object per value. Checkpoints take
// and restore the tracker's states through these too. Semantics are the Python path's; a failed
// recap call goes to `fail`, which raises recap's typed error as the ctypes path does.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "recap.h"
#include "torch_access.h"

namespace py = pybind11;

namespace recap_torch {
namespace {

struct Calls {
    recap_status_t (*get_states)(recap_tracker_h, recap_states_h *) = nullptr;
    recap_status_t (*set_states)(recap_tracker_h, recap_states_h) = nullptr;
    recap_status_t (*create)(recap_states_h *) = nullptr;
    recap_status_t (*put)(recap_states_h, const char *, const uint8_t *) = nullptr;
    recap_status_t (*lookup)(recap_states_h, const char *, uint8_t *) = nullptr;
    recap_status_t (*free)(recap_states_h) = nullptr;
    recap_status_t (*state_object)(recap_tracker_h, const char *, void **) = nullptr;
} calls; // librecap's, bound by recap.megatron from the library it loaded

template <typename F>
void bind(const py::dict &addr, const char *name, F *fn)
{
    uintptr_t a = addr[name].cast<uintptr_t>();
    TORCH_CHECK(a != 0, "recap._C.bind_state_calls: no address for ", name);
    *fn = reinterpret_cast<F>(a);
}

void check(recap_status_t st, const char *what, const py::object &fail)
{
    if (st == RECAP_OK)
        return;
    fail(static_cast<int>(st), what); // raises recap's typed error
    throw std::runtime_error(std::string(what) + " failed"); // (a fail that returned)
}

// A states object freed on every way out.
struct Owned {
    recap_states_h s = nullptr;
    ~Owned()
    {
        if (s != nullptr)
            calls.free(s);
    }
};

void require_bound()
{
    TORCH_CHECK(calls.free != nullptr, "recap._C: bind_state_calls was not called");
}

// Value mode: name -> uint8[16] CPU tensor, for `names` in order.
py::list get_values(uintptr_t tracker, const std::vector<std::string> &names, py::object fail)
{
    require_bound();
    Owned states;
    check(calls.get_states(reinterpret_cast<recap_tracker_h>(tracker), &states.s),
          "recap_tracker_get_states", fail);
    py::list out;
    for (const auto &n : names) {
        at::Tensor t = at::empty({RECAP_STATE_BYTES}, at::TensorOptions().dtype(at::kByte));
        check(calls.lookup(states.s, n.c_str(), t.data_ptr<uint8_t>()), "recap_states_lookup",
              fail);
        out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t))));
    }
    return out;
}

// Graph-safe mode: the state objects, as the torch.Generators they are (torch keeps one Python
// object per generator, so the same state gives the same object each time).
py::list get_objects(uintptr_t tracker, const std::vector<std::string> &names, py::object fail)
{
    require_bound();
    py::list out;
    for (const auto &n : names) {
        void *obj = nullptr;
        check(calls.state_object(reinterpret_cast<recap_tracker_h>(tracker), n.c_str(), &obj),
              "recap_tracker_state_object", fail);
        out.append(py::reinterpret_steal<py::object>(THPGenerator_Wrap(state_generator(obj))));
    }
    return out;
}

// (name, 16 bytes) pairs in order, as the tracker's whole map.
void set_values(uintptr_t tracker, const std::vector<std::pair<std::string, py::bytes>> &items,
                py::object fail)
{
    require_bound();
    Owned states;
    check(calls.create(&states.s), "recap_states_create", fail);
    for (const auto &it : items) {
        std::string b = it.second;
        TORCH_CHECK(b.size() == RECAP_STATE_BYTES, "recap._C.set_values: a state is ",
                    RECAP_STATE_BYTES, " bytes, not ", b.size());
        check(calls.put(states.s, it.first.c_str(), reinterpret_cast<const uint8_t *>(b.data())),
              "recap_states_put", fail);
    }
    check(calls.set_states(reinterpret_cast<recap_tracker_h>(tracker), states.s),
          "recap_tracker_set_states", fail);
}

} // namespace

void define_tracker_states(py::module_ &m)
{
    m.def(
        "bind_state_calls",
        [](const py::dict &addr) {
            Calls c;
            bind(addr, "recap_tracker_get_states", &c.get_states);
            bind(addr, "recap_tracker_set_states", &c.set_states);
            bind(addr, "recap_states_create", &c.create);
            bind(addr, "recap_states_put", &c.put);
            bind(addr, "recap_states_lookup", &c.lookup);
            bind(addr, "recap_states_free", &c.free);
            bind(addr, "recap_tracker_state_object", &c.state_object);
            calls = c;
        },
        "the addresses of librecap's tracker-state calls (the library recap._lib loaded), by "
        "name");
    m.def("get_values", &get_values, py::arg("tracker"), py::arg("names"), py::arg("fail"),
          "a value-mode tracker's states of `names`, as uint8[16] tensors");
    m.def("get_objects", &get_objects, py::arg("tracker"), py::arg("names"), py::arg("fail"),
          "a graph-safe tracker's state objects of `names`, as torch.Generators");
    m.def("set_values", &set_values, py::arg("tracker"), py::arg("items"), py::arg("fail"),
          "replaces the tracker's map with these (name, 16 bytes) pairs");
}

} // namespace recap_torch
