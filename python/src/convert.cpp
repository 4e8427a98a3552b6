// The conversions shared by the binding files: JSON through Python's json module (strict: no NaN),
// and integer arrays checked for dtype, shape and range before they reach the core.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "graphs/error.h"
#include "python/src/bindings.h"

namespace placelab::python {

namespace {

// Text for messages: a str as UTF-8 with anything unencodable (a lone surrogate) escaped.
std::string printable(const py::handle& obj) {
  return py::cast<std::string>(py::str(obj).attr("encode")("utf-8", "backslashreplace").attr("decode")("utf-8"));
}

// json.dumps turns keys 1, True and None into "1", "true" and "null": a device kind or field named by
// accident. Keys must be strings already. With `text`, strings must also be valid Unicode (json.dumps
// writes a lone surrogate as an escape that no JSON reader takes). `trail` holds the keys and indices down
// to obj, for the message; `open` the containers on the way, so that a cycle ends the walk.
void check_tree(const py::handle& obj, const std::string& what, std::vector<py::object>& trail,
                std::vector<PyObject*>& open, bool text) {
  // json.dumps reports a cycle, or nesting deeper than Python's default recursion limit, itself.
  if (trail.size() > 1000 || std::find(open.begin(), open.end(), obj.ptr()) != open.end()) return;
  auto path = [&] {
    std::string p = what;
    for (const py::object& step : trail)
      p += py::isinstance<py::str>(step) ? "." + printable(step) : "[" + printable(step) + "]";
    return p;
  };
  auto valid_text = [&](const py::handle& str) {
    if (!text) return;
    if (PyUnicode_AsUTF8AndSize(str.ptr(), nullptr) == nullptr) {
      PyErr_Clear();
      throw Error(fmt::format("{}: {} is not valid Unicode text (a lone surrogate such as \\ud800?)", path(),
                              printable(py::repr(str))));
    }
  };
  if (py::isinstance<py::dict>(obj)) {
    open.push_back(obj.ptr());
    for (auto [key, value] : py::reinterpret_borrow<py::dict>(obj)) {
      if (!py::isinstance<py::str>(key))
        throw py::type_error(fmt::format("{}: key {} is a {}; keys must be strings", path(), printable(py::repr(key)),
                                         printable(py::type::handle_of(key).attr("__name__"))));
      valid_text(key);
      trail.push_back(py::reinterpret_borrow<py::object>(key));
      check_tree(value, what, trail, open, text);
      trail.pop_back();
    }
    open.pop_back();
  } else if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    open.push_back(obj.ptr());
    size_t i = 0;
    for (const py::handle item : obj) {
      trail.push_back(py::int_(i++));
      check_tree(item, what, trail, open, text);
      trail.pop_back();
    }
    open.pop_back();
  } else if (py::isinstance<py::str>(obj)) {
    valid_text(obj);
  }
}

}  // namespace

nlohmann::json to_json(const py::handle& obj, const std::string& what) {
  std::vector<py::object> trail;
  std::vector<PyObject*> open;
  check_tree(obj, what, trail, open, false);
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
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range&) {  // an integer a double cannot hold, such as 10**400
    throw Error(fmt::format("{} must be JSON-able: it holds a number too large for JSON (beyond 1.8e308 in magnitude)",
                            what));
  } catch (const nlohmann::json::exception&) {  // a string that is not Unicode: find it to name it
    check_tree(obj, what, trail, open, true);
    throw Error(fmt::format("{} must be JSON-able: it holds a string that is not valid Unicode", what));
  }
}

std::string path_arg(const py::handle& obj, const std::string& what) {
  if (!py::isinstance<py::str>(obj) && !py::hasattr(obj, "__fspath__")) {
    throw py::type_error(fmt::format("{} must be a path (str or pathlib.Path), got {}", what,
                                     py::cast<std::string>(py::str(py::type::handle_of(obj).attr("__name__")))));
  }
  // As bytes, the way Python's own file functions see it (a name that is not UTF-8 arrives as surrogate escapes).
  try {
    return py::cast<std::string>(py::module_::import("os").attr("fsencode")(obj));
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("{} {} is not a file name this system can encode: {}", what,
                            py::cast<std::string>(py::repr(obj)), py::cast<std::string>(py::str(e.value()))));
  }
}

const py::object& dict_arg(const DictArg& arg, const std::string& what) {
  if (!arg.obj.is_none() && !py::isinstance<py::dict>(arg.obj))
    throw py::type_error(fmt::format("{} must be a dict or None, got {}", what,
                                     printable(py::type::handle_of(arg.obj).attr("__name__"))));
  return arg.obj;
}

template <class T>
T int_arg(const py::handle& obj, const char* what) {
  py::int_ value;
  try {
    value = py::module_::import("operator").attr("index")(obj);
  } catch (const py::error_already_set&) {
    throw py::type_error(fmt::format("{} must be an integer, got {}", what,
                                     printable(py::type::handle_of(obj).attr("__name__"))));
  }
  const py::int_ lo(std::numeric_limits<T>::min()), hi(std::numeric_limits<T>::max());
  if (value < lo || value > hi)
    throw Error(fmt::format("{} is {}, outside {} to {}", what, printable(value), printable(lo), printable(hi)));
  return value.cast<T>();
}
template int32_t int_arg<int32_t>(const py::handle&, const char*);
template int64_t int_arg<int64_t>(const py::handle&, const char*);
template uint64_t int_arg<uint64_t>(const py::handle&, const char*);

std::string text_arg(const py::handle& obj, const std::string& what) {
  try {
    return py::cast<std::string>(obj);
  } catch (const py::cast_error&) {
    throw Error(fmt::format("{} {} is not valid Unicode text (a lone surrogate?)", what, py::cast<std::string>(py::repr(obj))));
  }
}

std::string text_arg(const TextArg& arg, const std::string& what) {
  if (!py::isinstance<py::str>(arg.obj))
    throw py::type_error(fmt::format("{} must be a str, got {}", what,
                                     py::str(py::type::handle_of(arg.obj).attr("__name__")).cast<std::string>()));
  return text_arg(arg.obj, what);
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
  // numpy keeps integers as objects when one is too large for int64 (or when they were given so): read
  // as int64 when every element is an integer, and out of range when one does not fit.
  if (kind == 'O' && arr.ndim() > 0 && arr.size() > 0) {
    py::module_ builtins = py::module_::import("builtins");
    const py::object integral = py::module_::import("numbers").attr("Integral");
    const py::object is_integer = py::cpp_function([integral](const py::handle& x) { return py::isinstance(x, integral); });
    if (py::cast<bool>(builtins.attr("all")(builtins.attr("map")(is_integer, arr.attr("flat"))))) {
      try {
        arr = np.attr("asarray")(arr, py::arg("dtype") = np.attr("int64"));
        kind = 'i';
      } catch (const py::error_already_set& e) {
        if (!e.matches(PyExc_OverflowError)) throw;
        throw Error(fmt::format("{} has a value outside int32", what));
      }
    }
  }
  // Not numbers at all (None, a dict, a string), or one number where an array belongs: a wrong Python type.
  if (kind == 'O' || kind == 'S' || kind == 'U' || kind == 'V' || kind == 'M' || kind == 'm' || arr.ndim() == 0) {
    throw py::type_error(fmt::format("{} must be an array of integers, got {}", what,
                                     py::cast<std::string>(py::str(py::type::of(obj).attr("__name__")))));
  }
  if (kind != 'i' && kind != 'u' && !(kind == 'f' && arr.size() == 0)) {
    throw Error(fmt::format("{} must hold integers, got dtype {}", what,
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
