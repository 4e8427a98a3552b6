// The placelab command line: one subcommand per verb (see docs/cli.md). Errors in the input end the
// program with one line on stderr and exit code 1; usage errors exit with CLI11's code.
#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"

namespace {

// An error line is for people: one that quotes a huge input (a 100 kB field name) keeps its start,
// which names the place, and its end, which says the fix.
std::string for_people(std::string_view message) {
  constexpr size_t kHead = 1000, kTail = 500;
  if (message.size() <= kHead + kTail + 100) return std::string(message);
  auto continues = [&](size_t i) { return (static_cast<unsigned char>(message[i]) & 0xC0) == 0x80; };
  size_t head = kHead, tail = message.size() - kTail;  // cut between whole UTF-8 characters
  while (continues(head)) --head;
  while (continues(tail)) ++tail;
  return fmt::format("{} [... {} characters ...] {}", message.substr(0, head), tail - head, message.substr(tail));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"placelab: device placement of neural-network dataflow graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "placelab 0.1.0");
  placelab::cli::add_graph_command(app);
  placelab::cli::add_place_command(app);
  placelab::cli::add_compare_command(app);
  placelab::cli::add_cluster_command(app);
  placelab::cli::add_simulate_command(app);
  placelab::cli::add_train_command(app);
  placelab::cli::add_replay_command(app);
  placelab::cli::add_calibrate_command(app);
  try {
    app.parse(argc, argv);
    // Results on stdout are the point of a run: a write that failed (a full disk) must not exit 0.
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      throw std::system_error(errno, std::generic_category(), "stdout: write failed");
  } catch (const CLI::ParseError& e) {
    // An unknown verb or option: name it and the nearest valid one, in the parser's two lines.
    const std::string hint = placelab::cli::unknown_argument_hint(app, std::vector<std::string>(argv + 1, argv + argc));
    if (hint.empty()) return app.exit(e);
    placelab::cli::note("{}\n{}\n", hint, "Run with --help for more information.");
    return e.get_exit_code();
  } catch (const std::system_error& e) {  // e.g. output that could not be written (fmt::print, the check above)
    placelab::cli::note("placelab: error: {}\n", for_people(e.what()));
    return 1;
  } catch (const placelab::Error& e) {
    placelab::cli::note("placelab: error: {}\n", for_people(e.what()));
    return 1;
  } catch (const std::bad_alloc&) {
    placelab::cli::note("placelab: error: out of memory (try a smaller graph or fewer parallel runs)\n");
    return 1;
  } catch (const std::exception& e) {  // a bug: still one line and a non-zero exit, not an abort
    placelab::cli::note("placelab: internal error: {} (please report it with the command that caused it)\n",
                        for_people(e.what()));
    return 2;
  }
  return 0;
}
