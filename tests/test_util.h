// Helpers shared by every test program: catching placelab::Error messages and editing JSON texts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include "graphs/error.h"

namespace placelab::testing {

/** The message of the placelab::Error that `f` throws, or "" when it throws none. */
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/**
 * How many seeds a randomized sweep covers: `n`, or a tenth of it (at least 5) in the sanitized build, where each
 * simulation is tens of times slower; the release build of the same test covers the full sweep.
 */
constexpr uint64_t seeds(uint64_t n) {
#ifdef PLACELAB_SANITIZED
  return std::max<uint64_t>(n / 10, 5);
#else
  return n;
#endif
}

/** `text` with the first `from` replaced by `to`; fails the test when `from` is absent. */
inline std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  REQUIRE(pos != std::string::npos);
  return text.replace(pos, from.size(), to);
}

}  // namespace placelab::testing
