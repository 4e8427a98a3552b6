// The one exception type for bad input anywhere in placelab: files, options, graphs, clusters.
// Its message names the place at fault and says what to fix; the CLI prints it on one line and
// the Python module maps it to ValueError.
#pragma once

#include <stdexcept>
#include <string>

namespace placelab {

/** Bad input: the message names the place (file, JSON path, op) and the fix. */
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace placelab
