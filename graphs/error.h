// The one exception type for bad input anywhere in placelab: files, options, graphs, clusters.
// Its message names the place at fault and says what to fix; the CLI prints it on one line and
// the Python module maps it to ValueError.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace placelab {

/** Bad input: the message names the place (file, JSON path, op) and the fix. */
class Error : public std::runtime_error {
 public:
  explicit Error(std::string_view message) : std::runtime_error(printable(message)) {}

 private:
  // Control characters quoted from the input would cut the message short (a NUL ends what()) or
  // break its one line (a newline): they are written as escapes, \n or \xNN.
  static std::string printable(std::string_view message) {
    std::string out;
    out.reserve(message.size());
    for (const char c : message) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u != 0x7f) {
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[u >> 4];
        out += kHex[u & 15];
      }
    }
    return out;
  }
};

}  // namespace placelab
