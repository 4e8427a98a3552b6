// The conversions shared by the binding files: JSON through Python's json module (strict: no NaN),
// and integer arrays checked for dtype, shape and range before they reach the core.
#include <limits>

#include <fmt/format.h>

#include "graphs/error.h"
#include "python/src/bindings.h"

namespace placelab::python {

nlohmann::json to_json(const py::handle& obj, const std::string& what) {
  py::object dumps = py::module_::import("json").attr("dumps");
  // numpy scalars and arrays (np.int64(3), np.arange(4)) are JSON-able through tolist(), paths
  // (pathlib.Path, e.g. a checkpoint option) as their text.
  py::cpp_function numpy_default([](const py::handle& o) -> py::object {
    if (py::hasattr(o, "tolist")) return o.attr("tolist")();
    if (py::hasattr(o, "__fspath__")) return py::module_::import("os").attr("fspath")(o);
    throw py::type_error(fmt::format("{} is not JSON-able", py::cast<std::string>(py::repr(o))));
  });
  std::string text;
  try {
    text = py::cast<std::string>(dumps(obj, py::arg("allow_nan") = false, py::arg("default") = numpy_default));
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("{} must be JSON-able (dicts, lists, strings, finite numbers): {}", what,
                            py::cast<std::string>(py::str(e.value()))));
  }
  return nlohmann::json::parse(text);
}

std::string path_arg(const py::handle& obj, const std::string& what) {
  if (!py::isinstance<py::str>(obj) && !py::hasattr(obj, "__fspath__")) {
    throw py::type_error(fmt::format("{} must be a path (str or pathlib.Path), got {}", what,
                                     py::cast<std::string>(py::str(py::type::handle_of(obj).attr("__name__")))));
  }
  return py::cast<std::string>(py::module_::import("os").attr("fspath")(obj));
}

py::object from_json(const nlohmann::json& value) {
  return py::module_::import("json").attr("loads")(value.dump());
}

namespace {

/** obj as a C-contiguous int64 numpy array of `ndim` dimensions, after checking it holds integers. */
py::array_t<int64_t> as_int64_array(const py::handle& obj, int ndim, const std::string& what) {
  py::module_ np = py::module_::import("numpy");
  py::array arr;
  try {
    arr = np.attr("asarray")(obj);
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("{} must be an integer array: {}", what, py::cast<std::string>(py::str(e.value()))));
  }
  char kind = arr.dtype().kind();
  // Not numbers at all (None, a dict, a string), or one number where an array belongs: a wrong Python type.
  if (kind == 'O' || kind == 'S' || kind == 'U' || kind == 'V' || kind == 'M' || kind == 'm' || arr.ndim() == 0) {
    throw py::type_error(fmt::format("{} must be an array of integers (device indices), got {}", what,
                                     py::cast<std::string>(py::str(py::type::of(obj).attr("__name__")))));
  }
  if (kind != 'i' && kind != 'u' && !(kind == 'f' && arr.size() == 0)) {
    throw Error(fmt::format("{} must hold integers (device indices), got dtype {}", what,
                            py::cast<std::string>(py::str(arr.dtype()))));
  }
  if (arr.ndim() != ndim) {
    throw Error(fmt::format("{} must be {}-dimensional, got shape {}", what, ndim,
                            py::cast<std::string>(py::str(arr.attr("shape")))));
  }
  if (kind == 'u' && arr.size() > 0 && py::cast<uint64_t>(arr.attr("max")()) > uint64_t{1} << 62) {
    throw Error(fmt::format("{} has a value outside int32", what));
  }
  return py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

int32_t checked_int32(int64_t v, const std::string& what) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    throw Error(fmt::format("{} has a value outside int32: {}", what, v));
  }
  return static_cast<int32_t>(v);
}

}  // namespace

std::vector<int32_t> to_int32_vector(const py::handle& obj, const std::string& what) {
  auto arr = as_int64_array(obj, 1, what);
  std::vector<int32_t> out(static_cast<size_t>(arr.size()));
  const int64_t* data = arr.data();
  for (size_t i = 0; i < out.size(); ++i) out[i] = checked_int32(data[i], what);
  return out;
}

std::vector<std::vector<int32_t>> to_int32_rows(const py::handle& obj, int64_t cols, const std::string& what) {
  auto arr = as_int64_array(obj, 2, what);
  if (arr.shape(1) != cols) {
    throw Error(fmt::format("{} must have one column per op ({}), got shape ({}, {})", what, cols, arr.shape(0),
                            arr.shape(1)));
  }
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(arr.shape(0)), std::vector<int32_t>(cols));
  const int64_t* data = arr.data();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t c = 0; c < cols; ++c) rows[r][c] = checked_int32(data[r * cols + c], what);
  }
  return rows;
}

}  // namespace placelab::python
