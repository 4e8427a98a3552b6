// Shared helpers of the placelab._core binding files: JSON <-> Python conversion and the checked
// conversions at the numpy boundary. Every binding converts and checks its arguments with these, then
// forwards to the C++ core; bad input becomes placelab::Error, which module.cpp maps to ValueError.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl/filesystem.h>

namespace placelab::python {

namespace py = pybind11;

/** A file argument: a str or any os.PathLike (pathlib.Path), as Python's own file functions take. */
using Path = std::filesystem::path;

/**
 * An argument taken as any Python object, for the binding to check itself with an error that names it
 * (pybind11's own is a multi-line "incompatible function arguments"), and shown in signatures and
 * help() as `Shown::name`, what it must be, instead of `object`.
 */
template <class Shown>
struct Checked {
  py::object obj;
};
namespace shown {
struct Int {
  static constexpr auto name = py::detail::const_name("int");
};
struct Ints {  // a placement, labels
  static constexpr auto name = py::detail::const_name("Sequence[int] | numpy.ndarray");
};
struct IntRows {  // placements
  static constexpr auto name = py::detail::const_name("Sequence[Sequence[int]] | numpy.ndarray");
};
struct OptionalDict {
  static constexpr auto name = py::detail::const_name("dict | None");
};
struct OptionalDictOrPath {
  static constexpr auto name = py::detail::const_name("dict | str | os.PathLike | None");
};
struct OptionalPath {
  static constexpr auto name = py::detail::const_name("str | os.PathLike | None");
};
struct OptionalCallable {
  static constexpr auto name = py::detail::const_name("Callable | None");
};
struct Str {  // names: checked so that a lone surrogate is a ValueError naming the argument
  static constexpr auto name = py::detail::const_name("str");
};
}  // namespace shown
using IntArg = Checked<shown::Int>;
using IntsArg = Checked<shown::Ints>;
using IntRowsArg = Checked<shown::IntRows>;
using DictArg = Checked<shown::OptionalDict>;
using DictOrPathArg = Checked<shown::OptionalDictOrPath>;
using PathArg = Checked<shown::OptionalPath>;
using CallableArg = Checked<shown::OptionalCallable>;
using TextArg = Checked<shown::Str>;

void init_graphs(py::module_& m);
void init_sim(py::module_& m);
void init_policy(py::module_& m);

/** A JSON-able Python object (dict, list, str, number, bool, None) as JSON; throws Error for others. */
nlohmann::json to_json(const py::handle& obj, const std::string& what);

/** A JSON value as the equivalent Python object (dicts, lists, ...). */
py::object from_json(const nlohmann::json& value);

/** A 1-D numpy copy of `values`. */
template <class T>
py::array_t<T> to_numpy(std::span<const T> values) {
  return py::array_t<T>(static_cast<py::ssize_t>(values.size()), values.data());
}
template <class T>
py::array_t<T> to_numpy(const std::vector<T>& values) {
  return to_numpy(std::span<const T>(values));
}

/** An (rows, cols) row-major numpy copy of `values` (rows * cols entries). */
template <class T>
py::array_t<T> to_numpy_2d(const std::vector<T>& values, py::ssize_t rows, py::ssize_t cols) {
  py::array_t<T> out({rows, cols});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

/**
 * An integer sequence (list, tuple or numpy array of integers) as int32 values; throws Error naming
 * `what` for floats, other shapes or values outside int32.
 */
std::vector<int32_t> to_int32_vector(const py::handle& obj, const std::string& what);

/** A file or folder path from a str or os.PathLike; throws TypeError naming `what` for anything else. */
std::string path_arg(const py::handle& obj, const std::string& what);
/**
 * obj (an int, or anything with __index__ such as numpy integers) as T: TypeError naming `what` for a
 * non-integer, ValueError for a value outside T's range (pybind11's own answer is a multi-line TypeError).
 */
template <class T>
T int_arg(const py::handle& obj, const char* what);
template <class T>
T int_arg(const IntArg& arg, const char* what) {
  return int_arg<T>(arg.obj, what);
}

/** The dict (or None) `arg` holds; TypeError naming `what` for anything else. */
const py::object& dict_arg(const DictArg& arg, const std::string& what);

/** obj (a str) as UTF-8; a string that is not valid Unicode is a ValueError naming `what`. */
std::string text_arg(const py::handle& obj, const std::string& what);
/** The same for a str argument; anything but a str is a TypeError naming `what`. */
std::string text_arg(const TextArg& arg, const std::string& what);

/** An (N, cols) integer array as N rows of int32; throws Error naming `what` for anything else. */
std::vector<std::vector<int32_t>> to_int32_rows(const py::handle& obj, int64_t cols, const std::string& what);

/**
 * For a class without a Python constructor, whose objects come from the module's functions (`how`):
 * Cls.__new__(Cls) raises TypeError saying so, where pybind11 would return an object holding no C++
 * value, which crashes the interpreter on first use. Objects made in C++ do not go through __new__.
 */
template <class T>
void made_only_by(py::class_<T>& cls, const std::string& how) {
  const std::string message = py::str(cls.attr("__name__")).cast<std::string>() + " objects come from " + how;
  cls.def_static("__new__", [message](const py::args&, const py::kwargs&) -> py::object { throw py::type_error(message); });
}

/**
 * For a class with a Python constructor (call after defining it): Cls.__new__ runs the constructor
 * too, so that Cls.__new__(Cls) on its own cannot hand out an object with no C++ value in it. The
 * __init__ Python calls next finds the object made and returns (pybind11 ignores a second __init__).
 * A Python subclass that keeps the constructor gets the same; one with an __init__ of its own makes the
 * object there (its bare __new__ is not covered). Any other class is refused, since the base __new__
 * would make an empty object of any bound class.
 */
template <class T>
void constructed_in_new(py::class_<T>& cls) {
  const py::object init = cls.attr("__init__");
  const py::object base_new = py::reinterpret_borrow<py::object>(py::detail::get_internals().instance_base).attr("__new__");
  const py::handle bound = cls;  // the class outlives its methods
  cls.def_static("__new__", [init, base_new, bound](const py::handle& type, const py::args& args, const py::kwargs& kwargs) {
    if (!PyType_Check(type.ptr()) ||
        !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()), reinterpret_cast<PyTypeObject*>(bound.ptr())))
      throw py::type_error(fmt::format("{0}.__new__(X): X must be {0} or a subclass of it, got {1}",
                                       py::str(bound.attr("__name__")).cast<std::string>(), py::str(type).cast<std::string>()));
    py::object self = base_new(type);
    if (py::object(type.attr("__init__")).is(init)) init(self, *args, **kwargs);
    return self;
  });
}

}  // namespace placelab::python

namespace pybind11::detail {
template <class Shown>
struct type_caster<placelab::python::Checked<Shown>> {
  PYBIND11_TYPE_CASTER(placelab::python::Checked<Shown>, Shown::name);
  bool load(handle src, bool /*convert*/) {
    value.obj = reinterpret_borrow<object>(src);
    return true;
  }
  static handle cast(const placelab::python::Checked<Shown>& arg, return_value_policy, handle) {
    return arg.obj.inc_ref();
  }
};
}  // namespace pybind11::detail
