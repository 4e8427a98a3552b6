// Strict reading of our versioned JSON formats: every field is checked for presence, type and
// range, unknown fields are errors, and every message names the file and JSON path at fault.
// Shared by every format reader (graph, cluster, placement, profile, checkpoint).
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace placelab::io {

using json = nlohmann::json;

/** Reads and parses a whole file; throws placelab::Error naming the file on I/O or syntax errors. */
json read_json_file(const std::string& path);

/** Parses text; `origin` names it in errors (a file name or "<string>"). */
json parse_json(std::string_view text, const std::string& origin);

/**
 * `doc` as text, the way every placelab output writes JSON: names may come from file paths, which need
 * not be UTF-8, so such bytes become U+FFFD instead of throwing. indent -1: one line.
 */
std::string dump_json(const json& doc, int indent = -1);

/** `text` as dump_json writes it: bytes that are not UTF-8 become U+FFFD. */
std::string as_written(const std::string& text);

/**
 * Whether a graph or cluster argument names a file rather than a zoo model or preset: it exists and is
 * not a folder (a results folder named after a model leaves the model reachable), ends in ".json" or
 * has a "/" (so that a missing ./x.graph is reported as a missing file).
 */
bool names_a_file(const std::string& spec);

/**
 * Writes `doc` to `path` through a temporary file and a rename, so readers never see half a file
 * (a link's target is replaced; a device or pipe is written through). Strings that are not valid
 * UTF-8 are written with U+FFFD in place of the bad bytes.
 */
void write_json_atomic(const std::string& path, const json& doc, int indent = 1);
/** The same for text already written (a large document built piece by piece, without a whole json tree). */
void write_text_atomic(const std::string& path, const std::string& text);
/**
 * Removes the temporary files that write_json_atomic calls killed mid-write left beside `path`. Only
 * when no other writer of `path` can be at work (e.g. under a lock of its folder).
 */
void remove_partial_writes(const std::string& path);

/** A JSON value with the path that reached it, for error messages like `file: ops[3].flops: ...`. */
class JsonNode {
 public:
  JsonNode(const json& value, std::string origin, std::string path = "")
      : value_(&value), origin_(std::move(origin)), path_(std::move(path)) {}

  const json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  /** "origin: path" for error messages. */
  std::string where() const;
  [[noreturn]] void fail(std::string_view message) const;

  /** Checks the format header: {"format": format, "version": one of supported}. Returns the version. */
  int check_header(std::string_view format, std::initializer_list<int> supported) const;
  /** Throws if the object has a key not in `known`, naming it and listing the known ones. */
  void check_fields(std::initializer_list<std::string_view> known) const;
  void check_fields(const std::vector<std::string>& known) const;

  bool has(std::string_view key) const;
  JsonNode at(std::string_view key) const;   // required member
  JsonNode at(size_t index) const;           // array element
  size_t size() const;                   // array length (throws if not an array)
  void expect_object() const;

  std::string as_string() const;
  double as_number() const;              // finite number
  double as_amount() const;              // finite number >= 0
  int64_t as_int() const;                // integral number
  bool as_bool() const;                  // true/false, or 0/1 as peers' formats use

  std::string get_string(std::string_view key, std::string fallback) const;
  double get_amount(std::string_view key, double fallback) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;

 private:
  void check_known(std::span<const std::string_view> known) const;

  const json* value_;
  std::string origin_;
  std::string path_;
};

}  // namespace placelab::io
