// The profile report: operators and their plans, liveness per step, tile occupants, cycle balance, JSON and HTML.
#include "helpers.hpp"

#include <tilebsp/exec/detail/auto_report.hpp>
#include <tilebsp/report/auto_report.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <fstream>
#include <sstream>
#include <string>

namespace tb = tilebsp;

TEST_CASE("report: liveness per step follows first write and last use; occupants and balance per tile") {
  tb::Graph g{tb::targets::tiny(2)};
  // x: read before written (always live). t: temporary, written by `make`, read by `use`. y: written by `use`,
  // never read again (live to the end).
  auto x = g.add_variable<float>({16}, "x"), y = g.add_variable<float>({32}, "y");
  auto t = g.add_variable<float>({16}, "t", {.temporary = true});
  g.set_tile_mapping(x, 0);
  g.set_tile_mapping(t, 0);
  g.set_tile_mapping(y.slice(0, 16), 0);
  g.set_tile_mapping(y.slice(16, 32), 1);
  auto make = g.add_compute_set("make"), use = g.add_compute_set("use"), bump = g.add_compute_set("bump");
  g.add_vertex<tbt::Copy>(make, 0, x, t);
  g.add_vertex<tbt::Copy>(use, 0, t, y.slice(0, 16));
  g.add_vertex<tbt::Copy>(use, 1, tb::fetch(x), y.slice(16, 32));  // reads x on tile 0: fetched
  g.add_vertex<tbt::Axpy>(bump, 0, x, x, 1.0f);
  auto const prog = tb::seq(tb::execute(make), tb::execute(use), tb::execute(bump));
  tb::Engine e{tb::compile(g, prog), {.host_threads = 1}};
  e.run();
  e.run();
  auto const p = e.profile();
  CHECK(p.kernels().empty());  // the user's own vertices: no operator named an instruction set
  CHECK(tb::report::json(p).find("\"kernels\": [],") != std::string::npos);
  auto const d = p.detail(1);
  REQUIRE(d.liveness.size() == 1);
  auto const& l = d.liveness[0];
  REQUIRE(l.bytes.size() == 3);
  CHECK(l.bytes[0] == 64);             // t
  CHECK(l.bytes[1] == 64 + 128 + 64);  // t, y and the 64 bytes of x fetched to tile 1
  CHECK(l.bytes[2] == 128);            // y, to the end
  CHECK(l.peak_step == 1);
  REQUIRE(l.peak_variables.size() == 2);
  CHECK(l.peak_variables[0].name == "y");
  CHECK(l.peak_variables[1].name == "t");
  CHECK(l.peak_buffers == 64);
  CHECK(d.always_live_bytes == p.memory[0].always_live + p.memory[1].always_live);
  // Tile 0: y's half (64 B), x (64 B), t (64 B) and the vertices' state; largest first, ties by name order of index.
  REQUIRE(d.tiles.size() == g.target().num_tiles());
  auto const& occ = d.tiles[0];
  REQUIRE(occ.size() == 4);
  CHECK(std::is_sorted(occ.begin(), occ.end(), [](auto const& a, auto const& b) { return a.bytes > b.bytes; }));
  auto const find = [&](std::string const& n) {
    return std::find_if(occ.begin(), occ.end(), [&](auto const& o) { return o.name == n; });
  };
  CHECK(find("x")->bytes == 64);
  CHECK(find("x")->always_live);
  CHECK(!find("t")->always_live);
  CHECK(find("vertex state") != occ.end());
  // Compute cycles per tile: two runs of every compute set; tile 1 runs only `use`'s second vertex.
  auto const& cs = e.executable().schedule().compute_sets;
  CHECK(d.tile_cycles[0] > d.tile_cycles[1]);
  CHECK(d.tile_cycles[1] > 0);
  CHECK(d.tile_cycles[1] % 2 == 0);
  std::uint64_t slowest = 0;
  for (auto const& c : cs) slowest += c.cycles;
  CHECK(std::max(d.tile_cycles[0], d.tile_cycles[1]) <= 2 * slowest);
}

TEST_CASE("report: operators name their compute sets and keep their plans") {
  tb::Graph g{tb::targets::tiny(8)};
  tb::Sequence prog;
  auto c = tbt::mapped_product(g, prog, 16, 32, 8, "fc");
  tb::ops::reduce(g, prog, c, {0}, tb::ops::ReduceOp::add, "colsum");
  auto u = g.add_variable<float>({2, 8}, "u");
  g.set_tile_mapping(u, 0);
  auto user = g.add_compute_set("mine");
  g.add_vertex<tbt::Axpy>(user, 0, u[0], u[1], 2.0f);
  prog.add(tb::execute(user));
  tb::Engine e{tb::compile(g, prog), {.host_threads = 1, .profiling = true}};
  e.run();
  auto const p = e.profile();
  auto const op = [&](std::string const& name) {
    auto it = std::find_if(p.operators.begin(), p.operators.end(), [&](auto const& o) { return o.name == name; });
    REQUIRE(it != p.operators.end());
    return static_cast<std::int32_t>(it - p.operators.begin());
  };
  auto const fc = op("fc"), colsum = op("colsum");
  CHECK(p.operators[static_cast<std::size_t>(fc)].kind == "matmul");
  CHECK(p.operators[static_cast<std::size_t>(colsum)].kind == "reduce");
  REQUIRE(p.operators[static_cast<std::size_t>(fc)].plans.size() == 1);
  CHECK(p.operators[static_cast<std::size_t>(fc)].plans[0].find("parallel splits") != std::string::npos);
  CHECK(p.operators[static_cast<std::size_t>(colsum)].plans.empty());
  // Each of tilebsp's operators says which instruction set its kernels were compiled for; the profile lists
  // them once, the summary and the JSON name them.
  std::string const isa(tb::ops::kernels_isa());
  CHECK(p.operators[static_cast<std::size_t>(fc)].kernels == isa);
  CHECK(p.operators[static_cast<std::size_t>(colsum)].kernels == isa);
  CHECK(p.kernels() == std::vector<std::string>{isa});
  CHECK(tb::report::summary(p).find(std::string("operators' kernels: ") + isa + "\n") != std::string::npos);
  CHECK(tb::report::json(p).find(std::string("\"kernels\": [\"") + isa + "\"]") != std::string::npos);
  std::uint64_t fc_cycles = 0;
  bool mine = false;
  for (auto const& s : p.programs[0]) {
    if (s.op == fc) fc_cycles += s.est_cycles * s.executions;
    if (s.compute_set == "mine") {
      mine = true;
      CHECK(s.op == -1);
      CHECK(s.compute_cycles > 0);
      CHECK(s.compute_cycles + s.exchange_cycles <= s.est_cycles);
      CHECK(s.ipus == std::vector<std::uint32_t>{0});
    }
  }
  CHECK(mine);
  CHECK(fc_cycles > 0);
  CHECK(p.operators[static_cast<std::size_t>(fc)].est_cycles == fc_cycles);
  CHECK(p.operators[static_cast<std::size_t>(fc)].host_ns > 0);
  CHECK(p.operators[static_cast<std::size_t>(fc)].compute_sets >= 1);

  // A user's operator scope: the outermost names the operator.
  {
    tb::OperatorScope outer(g, "block", "layer1");
    tb::OperatorScope inner(g, "inner", "ignored");
    outer.add_plan("my plan\n");
    g.add_compute_set("layer1/cs");
  }
  auto const& ops = g.impl().operators;
  CHECK(ops.back().kind == "block");
  CHECK(ops.back().kernels.empty());  // a user's scope names no instruction set unless it passes one
  CHECK(ops.back().plans == std::vector<std::string>{"my plan"});
  CHECK(g.impl().compute_set_ops.back() == static_cast<std::int32_t>(ops.size() - 1));
  g.add_compute_set("after");
  CHECK(g.impl().compute_set_ops.back() == -1);
}

TEST_CASE("report: JSON detail, self-contained HTML, and the report directory") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  tbt::mapped_product(g, prog, 4, 8, 4, "mm \"quoted\"", "a</script><b>");
  tb::Engine e{tb::compile(g, prog), {.host_threads = 1}};
  e.run();
  auto const p = e.profile();
  auto const d = p.detail();
  std::string const j = tb::report::json(p, &d);
  CHECK(j.find("\"detail\": {\"always_live_bytes\": ") != std::string::npos);
  CHECK(j.find("\"operators\": [") != std::string::npos);
  CHECK(j.find("mm \\\"quoted\\\"") != std::string::npos);
  CHECK(tb::report::json(p).find("\"detail\"") == std::string::npos);
  std::string const h = tb::report::html(p, d);
  CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.find("a</script><b>") == std::string::npos);  // escaped inside the data block
  CHECK(h.find("a<\\/script><b>") != std::string::npos);
  for (char const* absent : {"https://", "src=", "href=", "@import", "url("})  // nothing from elsewhere
    CHECK_MESSAGE(h.find(absent) == std::string::npos, absent);
  for (char const* id : {"id=\"heatmap\"", "id=\"liveness\"", "id=\"timeline\"", "id=\"balance\"", "id=\"operators\"", "id=\"plans\""})
    CHECK(h.find(id) != std::string::npos);

  auto const dir = std::filesystem::temp_directory_path() / "tilebsp_report_test";
  std::filesystem::remove_all(dir);
  tb::report::write_report(p, (dir / "nested").string());
  for (char const* f : {"profile.json", "report.html", "summary.txt"}) CHECK(std::filesystem::exists(dir / "nested" / f));
  CHECK(tbt::read_text((dir / "nested" / "profile.json").string()).find("\"liveness\"") != std::string::npos);
  std::filesystem::remove_all(dir);
  CHECK_THROWS_WITH_AS(tb::report::write_html(p, "/nonexistent-dir/r.html"),
                       "write_html: cannot open '/nonexistent-dir/r.html' for writing", tb::error);
  CHECK_THROWS_WITH_AS(tb::report::write_report(p, "/proc/no/such"),
                       doctest::Contains("write_report: cannot create the directory '/proc/no/such'"), tb::error);
  // A profile that holds no executable has no detail.
  CHECK(tb::Profile{}.detail().tiles.empty());
}

TEST_CASE("report: Profile's deprecated members forward to the report layer") {
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  tbt::mapped_product(g, prog, 4, 8, 4, "mm");
  tb::Engine e{tb::compile(g, prog), {.host_threads = 1}};
  e.run();
  auto const p = e.profile();
  auto const d = p.detail();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK(p.summary() == tb::report::summary(p));
  CHECK(p.json(&d) == tb::report::json(p, &d));
  CHECK(p.json() == tb::report::json(p));
  CHECK(p.html(d) == tb::report::html(p, d));
  CHECK_THROWS_WITH_AS(p.write_html("/nonexistent-dir/r.html"),
                       "write_html: cannot open '/nonexistent-dir/r.html' for writing", tb::error);
  CHECK_THROWS_WITH_AS(p.write_json("/nonexistent-dir/r.json"),
                       "write_json: cannot open '/nonexistent-dir/r.json' for writing", tb::error);
  CHECK_THROWS_WITH_AS(p.write_report("/proc/no/such"),
                       doctest::Contains("write_report: cannot create the directory '/proc/no/such'"), tb::error);
#pragma GCC diagnostic pop
}

TEST_CASE("auto-reports: TILEBSP_ENGINE_OPTIONS makes an engine write its report; bad options are option_errors") {
  using tb::exec::detail::parse_engine_options;
  auto const all = parse_engine_options(R"({"autoReport.all": "true", "autoReport.directory": "out/dir"})");
  CHECK(all.graph);
  CHECK(all.execution);
  CHECK(all.directory == "out/dir");
  auto const some = parse_engine_options(R"({ "autoReport.all": true, "autoReport.outputExecutionProfile": false })");
  CHECK(some.graph);
  CHECK(!some.execution);
  CHECK(!parse_engine_options("{}").any());
  auto const bad = [](char const* text, char const* message) {
    CHECK_THROWS_WITH_AS(parse_engine_options(text), message, tb::option_error);
  };
  bad(R"({"autoReport.all": "true")", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 25: expected ',' or '}'");
  bad(R"(autoReport.all=true)", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 0: expected '{'");
  bad(R"({"autoReport.all": yes})", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 19: the value of \"autoReport.all\" is not a JSON value");
  bad(R"({"autoReport.all": "true"} x)", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 27: unexpected text after the object");
  bad(R"({"autoReport.all": ["true"]})", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 19: the value of \"autoReport.all\" must be a string, number, true, false or null");
  bad(R"({"autoReport.al": "true"})", "TILEBSP_ENGINE_OPTIONS: unknown option \"autoReport.al\" (known: autoReport.all, autoReport.directory, autoReport.outputExecutionProfile, autoReport.outputGraphProfile)");
  bad(R"({"autoReport.all": "yes"})", "TILEBSP_ENGINE_OPTIONS: \"autoReport.all\" must be true or false, not \"yes\"");
  bad(R"({"autoReport.all": true, "autoReport.all": false})", "TILEBSP_ENGINE_OPTIONS: not a valid JSON object of options at offset 25: the key \"autoReport.all\" appears twice");
  bad(R"({"autoReport.directory": 3})", "TILEBSP_ENGINE_OPTIONS: \"autoReport.directory\" must be a non-empty string");

  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  tbt::mapped_product(g, prog, 4, 8, 4, "mm");
  auto const exe = tb::compile(g, prog);
  auto const dir = std::filesystem::temp_directory_path() / "tilebsp_auto_report";
  std::filesystem::remove_all(dir);
  std::string const env = R"({"autoReport.all":"true","autoReport.directory":")" + dir.string() + "\"}";
  setenv("TILEBSP_ENGINE_OPTIONS", env.c_str(), 1);
  {
    tb::Engine e{exe, {.host_threads = 1}};
    e.run();
    CHECK(e.profile().host_timing);  // the execution profile turns host timing on
    CHECK(!std::filesystem::exists(dir / "report.html"));  // written when the engine goes
  }
  CHECK(std::filesystem::exists(dir / "report.html"));
  CHECK(tbt::read_text((dir / "profile.json").string()).find("\"host_timing\": true") != std::string::npos);
  std::filesystem::remove_all(dir);
  setenv("TILEBSP_ENGINE_OPTIONS", R"({"autoReport.all": "maybe"})", 1);
  CHECK_THROWS_WITH_AS(tb::Engine{exe}, "TILEBSP_ENGINE_OPTIONS: \"autoReport.all\" must be true or false, not \"maybe\"",
                       tb::option_error);
  // exec does not include the report layer: without the writer that report/auto_report.hpp sets (cleared here), an
  // engine asked for a report says so instead of writing none.
  setenv("TILEBSP_ENGINE_OPTIONS", R"({"autoReport.outputGraphProfile": true})", 1);
  auto const writer = std::exchange(tb::exec::detail::report_writer, nullptr);
  CHECK_THROWS_WITH_AS(tb::Engine{exe},
                       "TILEBSP_ENGINE_OPTIONS asks for a report, but this program has no report writer: include "
                       "<tilebsp/report/auto_report.hpp> in one of its files (or link tilebsp::compiled)",
                       tb::option_error);
  tb::exec::detail::report_writer = writer;
  bool const set_by_report = writer == &tb::report::write_report;
  CHECK(set_by_report);
  unsetenv("TILEBSP_ENGINE_OPTIONS");
  CHECK_NOTHROW(tb::Engine{exe});
}
