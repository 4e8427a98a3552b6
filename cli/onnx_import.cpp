// Runs the Python ONNX importer for `placelab graph --onnx` (see onnx_import.h).
#include "cli/onnx_import.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "graphs/io.h"

extern char** environ;

namespace placelab::cli {

namespace {

namespace fs = std::filesystem;

std::string setting(const char* env, const char* built_in) {
  const char* value = std::getenv(env);
  return value != nullptr && *value != '\0' ? value : built_in;
}

/** A fresh folder under the system's temporary folder, removed with everything in it at scope exit. */
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "placelab-onnx-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw Error(fmt::format("graph --onnx: cannot make a temporary folder in {} ({})",
                              fs::temp_directory_path().string(), std::strerror(errno)));
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/** Runs argv[0] (searched in PATH) with stdout and stderr into `log`; returns its wait status. */
int run_child(const std::vector<std::string>& args, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    throw Error(fmt::format("graph --onnx: cannot run the Python interpreter {} ({}); install python3 and "
                            "python3-onnx, or set PLACELAB_PYTHON to an interpreter",
                            args[0], std::strerror(err)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("graph --onnx: waiting for {}: {}", args[0], std::strerror(errno)));
  }
  return status;
}

}  // namespace

graphs::Graph import_onnx(const std::string& file, const std::vector<std::string>& input_shapes) {
  const std::string python = setting("PLACELAB_PYTHON", PLACELAB_PYTHON_EXECUTABLE);
  const fs::path dir = setting("PLACELAB_PYTHON_DIR", PLACELAB_PYTHON_DIR);
  if (python.empty())
    throw Error("graph --onnx: placelab was built without a Python interpreter; install python3 and python3-onnx "
                "and rebuild, or set PLACELAB_PYTHON to an interpreter");
  const fs::path script = dir / "placelab" / "onnx_import.py";
  std::error_code ec;
  if (!fs::is_regular_file(script, ec))
    throw Error(fmt::format("graph --onnx: the ONNX importer {} is missing; set PLACELAB_PYTHON_DIR to the "
                            "python/ folder of a placelab checkout",
                            script.string()));
  TempDir tmp;
  const fs::path out = tmp.path() / "graph.json", log = tmp.path() / "log.txt";
  std::vector<std::string> args = {python, script.string(), file, "--out", out.string(), "--caller", "graph --onnx"};
  for (const auto& shape : input_shapes) {
    args.push_back("--input-shape");
    args.push_back(shape);
  }
  const int status = run_child(args, log);

  // The importer writes `warning: ...` lines, and on failure one `error: ...` line (or, for a bug, a traceback).
  std::ifstream in(log);
  std::string line, error, last;
  while (std::getline(in, line)) {
    if (line.rfind("warning: ", 0) == 0) note("placelab: {}\n", line);
    if (line.rfind("error: ", 0) == 0) error = line.substr(7);
    if (!line.empty()) last = line;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (!error.empty()) throw Error(error);
    throw Error(fmt::format("graph --onnx: the ONNX importer ({} {}) failed: {}", python, script.string(),
                            last.empty() ? fmt::format("exit status {}", status) : last));
  }
  return graphs::read_graph(out.string());
}

}  // namespace placelab::cli
