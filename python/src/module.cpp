// placelab._core: the native module. One binding file per core folder; this file only joins them and
// maps placelab::Error (bad input) to ValueError with the same message.
#include <cstring>

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
      // A message may quote bytes of the input that are not UTF-8 (a Latin-1 file): PyErr_SetString would
      // then set an empty ValueError, so they are escaped.
      PyObject* message = PyUnicode_DecodeUTF8(e.what(), static_cast<Py_ssize_t>(std::strlen(e.what())), "backslashreplace");
      PyErr_SetObject(PyExc_ValueError, message);
      Py_XDECREF(message);
    }
  });
  pl::init_graphs(m);
  pl::init_sim(m);
  pl::init_policy(m);
}
