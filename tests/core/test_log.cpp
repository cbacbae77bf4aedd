// Logging: levels and destinations from the environment or set in code; warnings go through it.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tb = tilebsp;

namespace {
/// Restores the environment's logging configuration when it goes.
struct LogSandbox {
  std::string path = (std::filesystem::temp_directory_path() / "tilebsp_log_test.txt").string();
  LogSandbox() { std::remove(path.c_str()); }
  ~LogSandbox() {
    unsetenv("TILEBSP_LOG_LEVEL");
    unsetenv("TILEBSP_LOG_DEST");
    tb::logging::reload_environment();
    std::remove(path.c_str());
  }
};
}  // namespace

TEST_CASE("log levels from TILEBSP_LOG_LEVEL and TILEBSP_LOG_DEST filter what is written") {
  LogSandbox box;
  setenv("TILEBSP_LOG_DEST", box.path.c_str(), 1);
  setenv("TILEBSP_LOG_LEVEL", "info", 1);
  tb::logging::reload_environment();
  CHECK(tb::logging::level() == tb::LogLevel::info);
  CHECK(tb::logging::enabled(tb::LogLevel::err));
  CHECK(tb::logging::enabled(tb::LogLevel::info));
  CHECK(!tb::logging::enabled(tb::LogLevel::debug));
  tb::logging::info("an info line");
  tb::logging::debug("a debug line");
  tb::warn("a warning");
  std::string const text = tbt::read_text(box.path);
  CHECK(text.find("] tilebsp info: ") != std::string::npos);
  CHECK(text.find("tilebsp info: an info line\n") != std::string::npos);
  CHECK(text.find("a debug line") == std::string::npos);
  CHECK(text.find("] tilebsp warning: ") != std::string::npos);
  CHECK(text.find("tilebsp warning: a warning\n") != std::string::npos);

  // off: nothing at all, warnings included.
  setenv("TILEBSP_LOG_LEVEL", "off", 1);
  tb::logging::reload_environment();
  CHECK(!tb::logging::enabled(tb::LogLevel::err));
  std::remove(box.path.c_str());
  tb::logging::reload_environment();
  tb::warn("silent");
  tb::logging::error("silent too");
  CHECK(tbt::read_text(box.path).empty());

  // Set in code: the level, then the destination.
  tb::logging::set_level(tb::LogLevel::trace);
  CHECK(tb::logging::enabled(tb::LogLevel::trace));
  tb::logging::trace("traced");
  CHECK(tbt::read_text(box.path).find("] tilebsp trace: ") != std::string::npos);
  CHECK_THROWS_WITH_AS(tb::logging::set_destination("/nonexistent-dir/log.txt"),
                       "TILEBSP_LOG_DEST: cannot open '/nonexistent-dir/log.txt' for appending", tb::option_error);
}

TEST_CASE("a bad TILEBSP_LOG_LEVEL or TILEBSP_LOG_DEST is an option_error at compile and at engine creation") {
  LogSandbox box;
  tb::Graph g{tb::targets::tiny(1)};
  auto x = g.add_variable<float>({2}, "x");
  g.set_tile_mapping(x, 0);
  auto const exe = tb::compile(g, tb::Sequence{});
  setenv("TILEBSP_LOG_LEVEL", "verbose", 1);
  tb::logging::reload_environment();
  CHECK(tb::logging::level() == tb::LogLevel::warn);  // the default stays
  std::string const want = "TILEBSP_LOG_LEVEL: 'verbose' is not one of off, err, warn, info, debug, trace";
  CHECK_THROWS_WITH_AS(tb::logging::check_environment(), want.c_str(), tb::option_error);
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::Sequence{}), want.c_str(), tb::option_error);
  CHECK_THROWS_WITH_AS(tb::Engine{exe}, want.c_str(), tb::option_error);
  unsetenv("TILEBSP_LOG_LEVEL");
  setenv("TILEBSP_LOG_DEST", "/nonexistent-dir/log.txt", 1);
  tb::logging::reload_environment();
  CHECK_THROWS_WITH_AS(tb::compile(g, tb::Sequence{}), "TILEBSP_LOG_DEST: cannot open '/nonexistent-dir/log.txt' for appending",
                       tb::option_error);
  unsetenv("TILEBSP_LOG_DEST");
  tb::logging::reload_environment();
  CHECK_NOTHROW(tb::logging::check_environment());
  CHECK_NOTHROW(tb::compile(g, tb::Sequence{}));
}

TEST_CASE("info logs compile phases with time and memory, debug the plans, trace each step run") {
  LogSandbox box;
  setenv("TILEBSP_LOG_DEST", box.path.c_str(), 1);
  setenv("TILEBSP_LOG_LEVEL", "trace", 1);
  tb::logging::reload_environment();
  tb::Graph g{tb::targets::tiny(4)};
  tb::Sequence prog;
  tbt::mapped_product(g, prog, 8, 8, 8, "product");
  tb::Engine e{tb::compile(g, tb::repeat(2, prog)), {.host_threads = 1}};
  e.run();
  std::string const text = tbt::read_text(box.path);
  CHECK(text.find("] tilebsp debug: ") != std::string::npos);
  CHECK(text.find("plan of matmul 'product': matmul 8x8 * 8x8") != std::string::npos);
  CHECK(text.find("compile: planning compute sets: ") != std::string::npos);
  CHECK(text.find(" s; process memory ") != std::string::npos);
  CHECK(text.find("compile: done in ") != std::string::npos);
  CHECK(text.find("engine: 1 host thread(s), 1 of 1 replica(s), 1 program(s)") != std::string::npos);
  CHECK(text.find("] tilebsp trace: ") != std::string::npos);
  CHECK(text.find("engine: run program 0") != std::string::npos);
  CHECK(text.find("program 0 step ") != std::string::npos);
}
