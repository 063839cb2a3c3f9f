// SPDX-License-Identifier: Apache-2.0
// recap.megatron's CudaRNGStatesTracker.get_states()/set_states() in one call each: the map
// read or written by librecap in one go, the values made into torch tensors (value mode) or the
// state objects handed out as the torch.Generators they are (graph-safe mode) here, where the
// ctypes path made a foreign call per name and a Python bytes object per value. Checkpoints take
// and restore the tracker's states through these too. Semantics are the Python path's. Each
// returns (status, failed call, result): no exception crosses this code; the caller raises
// recap's typed error for a failed status, as the ctypes path does.
#include <cstring>
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
    if (a == 0)
        throw py::value_error(std::string("recap._C.bind_state_calls: no address for ") + name);
    *fn = reinterpret_cast<F>(a);
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

py::tuple result(recap_status_t st, const char *what, py::object value)
{
    return py::make_tuple(static_cast<int>(st), what, std::move(value));
}

py::tuple unbound()
{
    return result(RECAP_ERR_STATE, "recap._C: bind_state_calls was not called", py::none());
}

// Value mode: uint8[16] CPU tensors of `names`, in order.
py::tuple get_values(uintptr_t tracker, const std::vector<std::string> &names)
{
    if (calls.free == nullptr)
        return unbound();
    Owned states;
    recap_status_t st = calls.get_states(reinterpret_cast<recap_tracker_h>(tracker), &states.s);
    if (st != RECAP_OK)
        return result(st, "recap_tracker_get_states", py::none());
    std::vector<at::Tensor> values;
    values.reserve(names.size());
    for (const auto &n : names) {
        values.push_back(at::empty({RECAP_STATE_BYTES}, at::TensorOptions().dtype(at::kByte)));
        st = calls.lookup(states.s, n.c_str(), values.back().data_ptr<uint8_t>());
        if (st != RECAP_OK)
            return result(st, "recap_states_lookup", py::none());
    }
    py::list out;
    for (auto &t : values)
        out.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t))));
    return result(RECAP_OK, "", std::move(out));
}

// Graph-safe mode: the state objects, as the torch.Generators they are (torch keeps one Python
// object per generator, so the same state gives the same object each time).
py::tuple get_objects(uintptr_t tracker, const std::vector<std::string> &names)
{
    if (calls.free == nullptr)
        return unbound();
    py::list out;
    for (const auto &n : names) {
        void *obj = nullptr;
        recap_status_t st =
            calls.state_object(reinterpret_cast<recap_tracker_h>(tracker), n.c_str(), &obj);
        if (st != RECAP_OK)
            return result(st, "recap_tracker_state_object", py::none());
        out.append(py::reinterpret_steal<py::object>(THPGenerator_Wrap(state_generator(obj))));
    }
    return result(RECAP_OK, "", std::move(out));
}

// (name, 16 bytes) pairs in order, as the tracker's whole map.
py::tuple set_values(uintptr_t tracker, const std::vector<std::pair<std::string, py::bytes>> &items)
{
    if (calls.free == nullptr)
        return unbound();
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto &it : items) {
        pairs.emplace_back(it.first, std::string(it.second));
        if (pairs.back().second.size() != RECAP_STATE_BYTES)
            return result(RECAP_ERR_INVALID_ARG, "recap._C.set_values: a state is not 16 bytes",
                          py::none());
    }
    Owned states;
    recap_status_t st = calls.create(&states.s);
    if (st != RECAP_OK)
        return result(st, "recap_states_create", py::none());
    for (const auto &p : pairs) {
        st = calls.put(states.s, p.first.c_str(),
                       reinterpret_cast<const uint8_t *>(p.second.data()));
        if (st != RECAP_OK)
            return result(st, "recap_states_put", py::none());
    }
    st = calls.set_states(reinterpret_cast<recap_tracker_h>(tracker), states.s);
    return result(st, st == RECAP_OK ? "" : "recap_tracker_set_states", py::none());
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
    m.def("get_values", &get_values, py::arg("tracker"), py::arg("names"),
          "(status, failed call, uint8[16] tensors): a value-mode tracker's states of `names`");
    m.def("get_objects", &get_objects, py::arg("tracker"), py::arg("names"),
          "(status, failed call, torch.Generators): a graph-safe tracker's state objects");
    m.def("set_values", &set_values, py::arg("tracker"), py::arg("items"),
          "(status, failed call, None): replaces the tracker's map with these (name, 16 bytes) "
          "pairs");
}

} // namespace recap_torch
