#include "graphs/json_util.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::io {

json read_json_file(const std::string& path) {
  // An ifstream opens a directory without complaint and then reads nothing.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("{}: is a directory, expected a JSON file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const bool exists = std::filesystem::exists(path, ec);
    if (ec) throw Error(fmt::format("{}: cannot be looked up ({})", path, ec.message()));
    if (!exists) throw Error(fmt::format("{}: no such file", path));
    throw Error(fmt::format("{}: cannot be read (check its permissions)", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

namespace {

// Whether a parse error stopped on a NaN or Infinity literal, which other tools happily write.
bool starts_non_finite(std::string_view text, const json::exception& e) {
  const auto* parse_error = dynamic_cast<const json::parse_error*>(&e);
  if (parse_error == nullptr || parse_error->byte == 0 || parse_error->byte > text.size()) return false;
  size_t start = parse_error->byte - 1;
  while (start > 0 && (std::isalpha(static_cast<unsigned char>(text[start - 1])) || text[start - 1] == '-')) --start;
  size_t end = start;
  while (end < text.size() && (std::isalpha(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++end;
  std::string token(text.substr(start, end - start));
  if (!token.empty() && token[0] == '-') token.erase(0, 1);
  for (auto& c : token) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return token == "nan" || token == "inf" || token == "infinity";
}

// Builds the document like json::parse, but rejects a key given twice in one object (nlohmann keeps the
// last silently: which one the writer meant is unknowable), naming its path as JsonNode does
// (`ops[3].flops`). A SAX handler: json::parse's own callback hook is ~50x slower on large files.
class StrictDom {
 public:
  StrictDom(json& root, const std::string& origin) : root_(root), origin_(origin) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    if (f.value->contains(k))
      throw Error(fmt::format("{}: {}: \"{}\" is given twice in one object; keep one", origin_, path(k), k));
    f.slot = &(*f.value)[k];
    f.key = std::move(k);
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t byte, const std::string& token, const Exception& e) {
    error_byte = byte;
    error_token = token;
    throw e;
  }

  // Where a parse error stopped (bytes read) and the token it was reading, which its message quotes.
  size_t error_byte = 0;
  std::string error_token;

 private:
  struct Frame {
    json* value;
    json* slot = nullptr;  // objects: the value of the key being read
    int64_t index = -1;    // arrays: the element being read
    std::string key;
  };

  json* place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      ++f.index;
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    *f.slot = std::move(v);
    return f.slot;
  }
  bool put(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    frames_.push_back(Frame{.value = place(std::move(container))});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  std::string path(const std::string& last) const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.value->is_array()) p += fmt::format("[{}]", f.index);
      else if (&f != &frames_.back()) p += (p.empty() ? "" : ".") + f.key;
    }
    return p + (p.empty() ? "" : ".") + last;
  }

  json& root_;
  const std::string& origin_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json(std::string_view text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw Error(fmt::format("{}: is empty (expected a JSON document)", origin));
  json doc;
  StrictDom dom(doc, origin);
  try {
    json::sax_parse(text, &dom);
    return doc;
  } catch (const json::exception& e) {
    // Drop nlohmann's "[json.exception...] " prefix; its message names the line and column, but for
    // a number overflow, which gets them here.
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    if (what.find(" line ") == std::string::npos && dom.error_byte > 0) {
      const std::string_view before = text.substr(0, std::min(dom.error_byte, text.size()));
      const size_t line_start = before.rfind('\n') + 1;  // 0 when there is no newline
      what += fmt::format(" at line {}, column {}", std::count(before.begin(), before.end(), '\n') + 1,
                          before.size() - line_start);
    }
    // It quotes the token it was reading: a truncated file can stop inside a megabyte-long string.
    constexpr size_t kQuoted = 40;
    const std::string token = "'" + dom.error_token + "'";
    if (auto pos = what.find(token); pos != std::string::npos && dom.error_token.size() > kQuoted) {
      size_t keep = kQuoted;
      while (keep > 0 && (static_cast<unsigned char>(dom.error_token[keep]) & 0xC0) == 0x80) --keep;  // whole UTF-8 characters
      what.replace(pos, token.size(), "'" + dom.error_token.substr(0, keep) + "...'");
    }
    std::string hint = "fix the syntax there; is the file truncated?";
    if (what.find("overflow") != std::string::npos || starts_non_finite(text, e))
      hint = "numbers must be finite: NaN and Infinity are not valid JSON";
    throw Error(fmt::format("{}: invalid JSON ({}); {}", origin, what, hint));
  }
}

std::string dump_json(const json& doc, int indent) { return doc.dump(indent, ' ', false, json::error_handler_t::replace); }

std::string as_written(const std::string& text) { return json::parse(dump_json(text)).get<std::string>(); }

bool names_a_file(const std::string& spec) {
  std::error_code ec;  // a path the system cannot even look at (a link loop, too long) is still a path
  const std::filesystem::file_status status = std::filesystem::status(spec, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return true;
  return (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) || spec.ends_with(".json") ||
         spec.find('/') != std::string::npos;
}

namespace {
// write_json_atomic writes F through F.tmp.<process>.<call>.
constexpr std::string_view kTemporarySuffix = ".tmp.";
}  // namespace

void remove_partial_writes(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  const std::string prefix = file.filename().string() + std::string(kTemporarySuffix);
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(file.has_parent_path() ? file.parent_path() : ".", ec))
    if (entry.path().filename().string().starts_with(prefix)) fs::remove(entry.path(), ec);
}

void write_json_atomic(const std::string& path, const json& doc, int indent) {
  write_text_atomic(path, dump_json(doc, indent) + '\n');  // dumped first: nothing is left behind if it throws
}

void write_text_atomic(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  // `durable`: on disk before it is renamed into place, so that a crash of the machine (not only of
  // the process) cannot leave an empty or partial file under the final name.
  auto write = [&](const std::string& file, bool durable) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(fmt::format("{}: cannot be written (does its folder exist?)", path));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    const bool ok = done == text.size() && (!durable || ::fsync(fd) == 0);
    if (::close(fd) != 0 || !ok) throw Error(fmt::format("{}: write failed (disk full?)", path));
  };
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // of a link's target
  if (fs::is_directory(status)) throw Error(fmt::format("{}: is a directory; give a file name", path));
  if (fs::exists(status) && !fs::is_regular_file(status)) return write(path, false);  // a device or a pipe: write through
  // Replace a link's target, not the link, even one that does not exist yet; a temporary name of this
  // process and call, so that two writers of one file each rename a whole file over it.
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) throw Error(fmt::format("{}: too many levels of symbolic links; give a file name", path));
    const fs::path next = fs::read_symlink(target, ec);
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  static std::atomic<uint64_t> calls{0};
  const std::string tmp = fmt::format("{}{}{}.{}", target.string(), kTemporarySuffix, ::getpid(), calls++);
  try {
    write(tmp, true);
  } catch (const Error&) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot replace the file ({})", path, why));
  }
  // The rename itself is durable once its folder is (best effort: not every file system allows it).
  const std::string folder = target.has_parent_path() ? target.parent_path().string() : ".";
  if (const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::string JsonNode::where() const { return path_.empty() ? origin_ : origin_ + ": " + path_; }

void JsonNode::fail(std::string_view message) const { throw Error(fmt::format("{}: {}", where(), message)); }

namespace {

std::string type_name(const json& v) {
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

}  // namespace

int JsonNode::check_header(std::string_view format, std::initializer_list<int> supported) const {
  expect_object();
  std::string versions;
  for (int v : supported) versions += (versions.empty() ? "" : ", ") + std::to_string(v);
  if (!has("format"))
    fail(fmt::format("missing \"format\" (expected \"format\": \"{}\")", format));
  std::string got = at("format").as_string();
  if (got != format) fail(fmt::format("format is \"{}\", expected \"{}\"", got, format));
  if (!has("version")) fail(fmt::format("missing \"version\" (supported: {})", versions));
  int64_t version = at("version").as_int();
  for (int v : supported)
    if (v == version) return v;
  fail(fmt::format("{} version {} is not supported (supported: {})", format, version, versions));
}

void JsonNode::check_fields(std::initializer_list<std::string_view> known) const {
  check_known(std::span<const std::string_view>(known.begin(), known.size()));
}

void JsonNode::check_fields(const std::vector<std::string>& known) const {
  const std::vector<std::string_view> names(known.begin(), known.end());
  check_known(names);
}

void JsonNode::check_known(std::span<const std::string_view> known) const {
  expect_object();
  for (auto& [key, _] : value_->items()) {
    bool ok = false;
    for (auto k : known) ok = ok || k == key;
    if (ok) continue;
    std::string list;
    for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    const std::string hint = list.empty() ? "none are accepted here" : "known fields: " + list;
    JsonNode(*value_, origin_, path_).fail(fmt::format("unknown field \"{}\" ({})", key, hint));
  }
}

bool JsonNode::has(std::string_view key) const { return value_->is_object() && value_->contains(key); }

JsonNode JsonNode::at(std::string_view key) const {
  expect_object();
  std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  auto it = value_->find(key);
  if (it == value_->end()) fail(fmt::format("missing field \"{}\"", key));
  return JsonNode(*it, origin_, child);
}

JsonNode JsonNode::at(size_t index) const {
  if (!value_->is_array()) fail("expected an array, got " + type_name(*value_));
  if (index >= value_->size()) fail(fmt::format("index {} is out of range", index));
  return JsonNode((*value_)[index], origin_, fmt::format("{}[{}]", path_, index));
}

size_t JsonNode::size() const {
  if (!value_->is_array()) fail("expected an array, got " + type_name(*value_));
  return value_->size();
}

void JsonNode::expect_object() const {
  if (!value_->is_object()) fail("expected an object, got " + type_name(*value_));
}

std::string JsonNode::as_string() const {
  if (!value_->is_string()) fail("expected a string, got " + type_name(*value_));
  return value_->get<std::string>();
}

double JsonNode::as_number() const {
  if (!value_->is_number()) fail("expected a number, got " + type_name(*value_));
  double v = value_->get<double>();
  if (!std::isfinite(v)) fail("must be a finite number");
  return v;
}

double JsonNode::as_amount() const {
  double v = as_number();
  if (v < 0) fail(fmt::format("is {}, must be >= 0", v));
  return v;
}

int64_t JsonNode::as_int() const {
  if (value_->is_number_unsigned() && value_->get<uint64_t>() > INT64_MAX)  // would wrap to a negative int64
    fail(fmt::format("expected an integer of at most {}, got {}", INT64_MAX, value_->get<uint64_t>()));
  if (value_->is_number_integer()) return value_->get<int64_t>();
  if (value_->is_number_float()) {
    double v = value_->get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9e15) return static_cast<int64_t>(v);
    if (std::abs(v) >= 0x1p63)  // also the integers from 2^64 on and below -2^63, which the reader keeps only as a double
      fail(fmt::format("expected an integer from {} to {}, got {} (an integer that far out is read as the nearest "
                       "floating-point number)", INT64_MIN, INT64_MAX, v));
  }
  fail("expected an integer, got " + (value_->is_number() ? fmt::format("{}", value_->get<double>()) : type_name(*value_)));
}

bool JsonNode::as_bool() const {
  if (value_->is_boolean()) return value_->get<bool>();
  if (value_->is_number_integer()) {
    auto v = value_->get<int64_t>();
    if (v == 0 || v == 1) return v == 1;
  }
  fail("expected true/false (or 0/1), got " + value_->dump());
}

std::string JsonNode::get_string(std::string_view key, std::string fallback) const {
  return has(key) ? at(key).as_string() : fallback;
}

double JsonNode::get_amount(std::string_view key, double fallback) const {
  return has(key) ? at(key).as_amount() : fallback;
}

int64_t JsonNode::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? at(key).as_int() : fallback;
}

}  // namespace placelab::io
