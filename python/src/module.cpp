// placelab._core: the native module. One binding file per core folder; this file only joins them and
// maps placelab::Error (bad input) to ValueError with the same message.
#include <pybind11/pybind11.h>

#include "graphs/error.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_core, m) {
  namespace pl = placelab::python;
  m.doc() = "placelab native core: graphs, clusters, the simulator and the placers";
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const placelab::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  pl::init_graphs(m);
  pl::init_sim(m);
  pl::init_policy(m);
}
