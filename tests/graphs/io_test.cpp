#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iterator>
#include <fstream>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/json_util.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::graphs;
using placelab::testing::replace_once;

namespace {

const char* kValid = R"({"format": "placelab.graph", "version": 1, "name": "tiny",
  "ops": [{"name": "x", "type": "Input", "output_bytes": 4096},
          {"name": "w", "type": "MatMul", "flops": 2e9, "bytes_read": 8192, "param_bytes": 1048576,
           "colocation": 3, "layer": 0, "gemm": [1, 1000, 1000, 1000], "measured_s": {"gpu": 0.0015}},
          {"name": "g", "type": "MatMulGrad", "phase": "backward", "colocation": 3, "pinned_kind": "cpu"}],
  "edges": [{"src": 0, "dst": 1, "bytes": 4096}, {"src": "w", "dst": "g", "bytes": 0.5, "comm_s": 0.25}]})";

std::string error_of(const std::string& text) {
  return placelab::testing::error_of([&] { graph_from_json(io::parse_json(text, "in.json"), "in.json"); });
}

}  // namespace

TEST_CASE("graphs::io: placelab.graph round trip is exact", "[graphs][io]") {
  Graph g = graph_from_json(io::parse_json(kValid, "in.json"), "in.json");
  REQUIRE(g.num_ops() == 3);
  CHECK(g.phase(2) == Phase::backward);
  CHECK(g.colocation(1) == 3);
  CHECK(g.pinned_kind(2) == "cpu");
  CHECK(g.edge_comm_s(1) == 0.25);
  CHECK(std::isnan(g.edge_comm_s(0)));
  CHECK(g.gemm(1) == GemmDims{1, 1000, 1000, 1000});
  CHECK_FALSE(g.gemm(0).known());
  CHECK(g.has_gemm_dims());

  auto doc = graph_to_json(g);
  CHECK(doc["ops"][1]["gemm"] == nlohmann::json::array({1, 1000, 1000, 1000}));
  CHECK_FALSE(doc["ops"][0].contains("gemm"));
  Graph again = graph_from_json(doc, "again");
  CHECK(graph_to_json(again) == doc);

  // Through a file, with values that need all 17 digits.
  GraphBuilder b("digits");
  b.add_op({.name = "a", .type = "T", .flops = 0.1 + 0.2, .output_bytes = 1.0 / 3.0});
  b.add_op({.name = "b", .type = "T", .flops = 6.02214076e23});
  b.add_edge(0, 1, 2.0 / 7.0);
  Graph d = std::move(b).build();
  auto path = (std::filesystem::temp_directory_path() / "placelab_io_test.json").string();
  write_graph(d, path);
  Graph back = read_graph(path);
  std::filesystem::remove(path);
  CHECK(back.flops(0) == 0.1 + 0.2);
  CHECK(back.output_bytes(0) == 1.0 / 3.0);
  CHECK(back.flops(1) == 6.02214076e23);
  CHECK(back.edge_bytes(0) == 2.0 / 7.0);
  CHECK(graph_to_json(back) == graph_to_json(d));
}

TEST_CASE("graphs::io: bad graph files give one-line errors naming the place", "[graphs][io]") {
  std::string v = kValid;
  SECTION("cycle") {
    CHECK_THAT(error_of(replace_once(v, R"({"src": 0, "dst": 1, "bytes": 4096})",
                                R"({"src": 0, "dst": 1}, {"src": 2, "dst": 0})")),
               Catch::Contains("in.json: graph \"tiny\": has a cycle"));
  }
  SECTION("dangling edge") {
    CHECK_THAT(error_of(replace_once(v, R"("dst": 1, "bytes": 4096)", R"("dst": 9)")),
               Catch::Contains("in.json: edges[0].dst: op index 9 does not exist"));
    CHECK_THAT(error_of(replace_once(v, R"("dst": "g")", R"("dst": "nope")")),
               Catch::Contains("edges[1].dst: no op is named \"nope\""));
  }
  SECTION("duplicate name") {
    CHECK_THAT(error_of(replace_once(v, R"("name": "g")", R"("name": "x")")),
               Catch::Contains("in.json: ops[2].name: duplicate op name \"x\""));
  }
  SECTION("gemm dims") {
    CHECK_THAT(error_of(replace_once(v, "[1, 1000, 1000, 1000]", "[1, 1000, 1000]")),
               Catch::Contains("in.json: ops[1].gemm: must be [batch, m, n, k]"));
    CHECK_THAT(error_of(replace_once(v, "[1, 1000, 1000, 1000]", "[1, 0, 1000, 1000]")),
               Catch::Contains("in.json: ops[1].gemm[1]: is 0, must be in 1..2147483647"));
    CHECK_THAT(error_of(replace_once(v, "[1, 1000, 1000, 1000]", "[1, 1000, 1000, 1.5]")),
               Catch::Contains("in.json: ops[1].gemm[3]"));
    // Dims in the wrong unit (or a missing batch) make FLOPs far from the op's: the error says both.
    CHECK_THAT(error_of(replace_once(v, "[1, 1000, 1000, 1000]", "[8, 1000, 1000, 1000]")),
               Catch::Contains("gemm dims [batch 8, m 1000, n 1000, k 1000] make 1.6e+10 FLOPs (2 batch m n k) but the op "
                               "has 2e+09; fix the dims or the flops"));
    // A bias folded into the op's FLOPs is within the tolerance.
    CHECK(error_of(replace_once(v, "[1, 1000, 1000, 1000]", "[1, 1000, 1000, 900]")).empty());
  }
  SECTION("negative, NaN and infinite numbers") {
    CHECK_THAT(error_of(replace_once(v, "2e9", "-2e9")), Catch::Contains("ops[1].flops: is -2000000000, must be >= 0"));
    CHECK_THAT(error_of(replace_once(v, "2e9", "NaN")), Catch::Contains("in.json: invalid JSON") && Catch::Contains("NaN and Infinity are not valid JSON"));
    CHECK_THAT(error_of(replace_once(v, "2e9", "-Infinity")), Catch::Contains("NaN and Infinity are not valid JSON"));
    CHECK_THAT(error_of(replace_once(v, "2e9", "1e999")),
               Catch::Contains("in.json: invalid JSON (number overflow parsing '1e999' at line "));
    CHECK_THAT(error_of(replace_once(v, "0.0015", "-1")), Catch::Contains("ops[1].measured_s.gpu: is -1"));
  }
  SECTION("unknown field") {
    CHECK_THAT(error_of(replace_once(v, R"("flops": 2e9)", R"("flop": 2e9)")),
               Catch::Contains("ops[1]: unknown field \"flop\" (known fields: name, type"));
    CHECK_THAT(error_of(replace_once(v, R"("name": "tiny")", R"("name": "tiny", "extra": 1)")),
               Catch::Contains("in.json: unknown field \"extra\""));
  }
  SECTION("a key given twice") {
    CHECK_THAT(error_of(replace_once(v, R"("flops": 2e9)", R"("flops": 2e9, "flops": 3e9)")),
               Catch::Contains("in.json: ops[1].flops: \"flops\" is given twice in one object; keep one"));
    CHECK_THAT(error_of(replace_once(v, R"("name": "tiny")", R"("name": "tiny", "name": "other")")),
               Catch::Contains("in.json: name: \"name\" is given twice"));
    CHECK_THAT(error_of(R"([{"a": [0, {"b": 1}]}, {"a": [0, 1, {"c": {}, "c": 2}]}])"),
               Catch::Contains("in.json: [1].a[2].c: \"c\" is given twice"));
    // The same key in sibling objects is fine, and the document is what json::parse builds.
    const std::string doc = R"({"x": [{"k": 1}, {"k": [true, null, "s", -3, 18446744073709551615, 2.5]}], "y": {}})";
    CHECK(io::parse_json(doc, "in.json") == nlohmann::json::parse(doc));
  }
  SECTION("missing field") {
    CHECK_THAT(error_of(replace_once(v, R"("name": "tiny",)", "")), Catch::Contains("in.json: missing field \"name\""));
    CHECK_THAT(error_of(replace_once(v, R"("name": "x", )", "")), Catch::Contains("ops[0]: missing field \"name\""));
  }
  SECTION("wrong types") {
    CHECK_THAT(error_of(replace_once(v, "2e9", "\"lots\"")), Catch::Contains("ops[1].flops: expected a number, got a string"));
    CHECK_THAT(error_of(replace_once(v, R"("colocation": 3, "layer")", R"("colocation": 3.5, "layer")")),
               Catch::Contains("ops[1].colocation: expected an integer, got 3.5"));
    CHECK_THAT(error_of(replace_once(v, R"("phase": "backward")", R"("phase": "sideways")")),
               Catch::Contains("ops[2].phase: unknown phase \"sideways\""));
  }
  SECTION("wrong format or version") {
    CHECK_THAT(error_of(replace_once(v, "placelab.graph", "placelab.cluster")),
               Catch::Contains("format is \"placelab.cluster\", expected \"placelab.graph\""));
    CHECK_THAT(error_of(replace_once(v, R"("version": 1)", R"("version": 7)")),
               Catch::Contains("placelab.graph version 7 is not supported (supported: 1)"));
    CHECK_THAT(error_of("[1, 2]"), Catch::Contains("in.json: expected an object, got an array"));
  }
  SECTION("truncated or empty") {
    CHECK_THAT(error_of(v.substr(0, v.size() / 2)), Catch::Contains("invalid JSON") && Catch::Contains("truncated"));
    // Cut inside a long string: the message quotes the start of the token, not all of it.
    const std::string cut = replace_once(v, R"("name": "tiny")", "\"name\": \"" + std::string(100000, 'a'));
    const std::string message = error_of(cut);
    CHECK_THAT(message, Catch::Contains("last read: '\"" + std::string(39, 'a') + "...'"));
    CHECK(message.size() < 300);
    CHECK_THAT(error_of("  \n"), Catch::Contains("in.json: is empty"));
  }
  SECTION("empty graph") {
    CHECK_THAT(error_of(R"({"format": "placelab.graph", "version": 1, "name": "e", "ops": []})"),
               Catch::Contains("in.json: ops: has no ops"));
  }
  SECTION("file that does not exist") {
    CHECK_THROWS_WITH(read_graph("/nonexistent/g.json"), Catch::Contains("/nonexistent/g.json: no such file"));
  }
  SECTION("a directory instead of a file") {
    const auto dir = (std::filesystem::temp_directory_path() / "placelab_io_test_dir.json").string();
    std::filesystem::create_directory(dir);
    CHECK_THROWS_WITH(read_graph(dir), Catch::Contains(dir + ": is a directory, expected a JSON file"));
    std::filesystem::remove(dir);
  }
  SECTION("integers beyond int64 are quoted, not wrapped") {
    CHECK_THAT(error_of(replace_once(v, R"("version": 1)", R"("version": 18446744073709551615)")),
               Catch::Contains("in.json: version: expected an integer of at most 9223372036854775807, got 18446744073709551615"));
    CHECK_THAT(error_of(replace_once(v, R"("src": 0)", R"("src": 9223372036854775808)")),
               Catch::Contains("edges[0].src: expected an integer of at most 9223372036854775807, got 9223372036854775808"));
  }
  SECTION("every message is one line") {
    CHECK(error_of(v.substr(0, 40)).find('\n') == std::string::npos);
  }
}

TEST_CASE("graphs::io: write_json_atomic writes invalid UTF-8 as U+FFFD and leaves no temporary file", "[graphs][io]") {
  const auto path = (std::filesystem::temp_directory_path() / "placelab_io_test_utf8.json").string();
  io::write_json_atomic(path, {{"name", "clu\xff.json"}});  // e.g. a cluster named after its file path
  CHECK(io::read_json_file(path)["name"] == "clu\xef\xbf\xbd.json");
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(entry.path().string().rfind(path + ".tmp", 0) == std::string::npos);
  std::filesystem::remove(path);
  CHECK(io::as_written("clu\xff.json") == "clu\xef\xbf\xbd.json");  // names compared with saved ones
  CHECK(io::as_written("plain") == "plain");
}

TEST_CASE("placelab::Error: control characters quoted from the input are escaped, so what() is whole and one line",
          "[graphs]") {
  using namespace std::string_literals;  // a literal that holds a NUL
  CHECK(std::string(Error("unknown model \"res\0net\"; known: a"s).what()) ==
        "unknown model \"res\\x00net\"; known: a");
  CHECK(std::string(Error("op \"a\nb\tc\"").what()) == "op \"a\\nb\\x09c\"");
  CHECK(std::string(Error("caf\xc3\xa9").what()) == "caf\xc3\xa9");  // UTF-8 is kept
}

TEST_CASE("graphs::io: write_json_atomic replaces a link's target, not the link, even a missing one, and refuses a directory", "[graphs][io]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("placelab_io_test_link_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  io::write_json_atomic((dir / "target.json").string(), {{"v", 1}});
  fs::create_symlink("target.json", dir / "link.json");
  io::write_json_atomic((dir / "link.json").string(), {{"v", 2}});
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(io::read_json_file((dir / "target.json").string())["v"] == 2);
  CHECK_THROWS_WITH(io::write_json_atomic((dir / "sub").string(), {{"v", 3}}), Catch::Contains("is a directory"));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 3);  // no temporary files left
  // A link to a file not made yet, through a second link in another folder: the link chain stays.
  fs::create_symlink("sub/new.json", dir / "hop.json");
  fs::create_symlink("../hop.json", dir / "sub" / "dangling.json");
  io::write_json_atomic((dir / "sub" / "dangling.json").string(), {{"v", 4}});
  CHECK(fs::is_symlink(dir / "sub" / "dangling.json"));
  CHECK(fs::is_symlink(dir / "hop.json"));
  CHECK(io::read_json_file((dir / "sub" / "new.json").string())["v"] == 4);
  fs::create_symlink("loop.json", dir / "loop.json");
  CHECK_THROWS_WITH(io::write_json_atomic((dir / "loop.json").string(), {{"v", 5}}), Catch::Contains("symbolic links"));
  fs::remove_all(dir);
}
