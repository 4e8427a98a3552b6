// `placelab graph --onnx`: the ONNX importer is Python (python/placelab/onnx_import.py, on the onnx package);
// the CLI runs it as a child process and reads the placelab.graph file it writes.
#pragma once

#include <string>
#include <vector>

#include "graphs/graph.h"

namespace placelab::cli {

/**
 * The graph of the ONNX model `file`, imported by onnx_import.py run as a file (so it needs no compiled
 * placelab._core) with the interpreter CMake found (PLACELAB_PYTHON overrides it) from this source tree's
 * python/ (PLACELAB_PYTHON_DIR overrides it). `input_shapes` are `NAME=D,D,...` sizes of symbolic inputs. The
 * importer's warnings go to stderr; a missing interpreter, importer or onnx package is one line saying what to
 * install or set.
 */
graphs::Graph import_onnx(const std::string& file, const std::vector<std::string>& input_shapes);

}  // namespace placelab::cli
