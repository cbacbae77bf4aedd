// samples/common/compile_progress.hpp: compile()'s phases and progress on one line of a terminal (stderr) (nothing
// at all when stderr is not a terminal, so logs and pipes see only the samples' own output), and the startup
// figures the samples print.
#pragma once

#include <tilebsp/tilebsp.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include <sys/resource.h>
#include <unistd.h>

namespace samples {

/// A CompileProgress that redraws "<program>: compiling: <phase> 45% (1.2 s)" on stderr at most ten times a
/// second, or an empty one when stderr is not a terminal. Call end_compile_progress() after compile() returns.
inline tilebsp::CompileProgress compile_progress(std::string program) {
  if (!::isatty(STDERR_FILENO)) return {};
  struct State {
    std::string program, phase;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), shown{};
  };
  auto st = std::make_shared<State>();
  st->program = std::move(program);
  return [st](std::string_view phase, std::size_t done, std::size_t total) {
    auto const now = std::chrono::steady_clock::now();
    if (phase == st->phase && now - st->shown < std::chrono::milliseconds(100)) return;
    st->phase = phase;
    st->shown = now;
    double const s = std::chrono::duration<double>(now - st->start).count();
    if (total > 0)
      std::fprintf(stderr, "\r\033[K%s: compiling: %.*s %3zu%% (%.1f s)", st->program.c_str(), static_cast<int>(phase.size()),
                   phase.data(), done * 100 / total, s);
    else
      std::fprintf(stderr, "\r\033[K%s: compiling: %.*s (%.1f s)", st->program.c_str(), static_cast<int>(phase.size()),
                   phase.data(), s);
    std::fflush(stderr);
  };
}

/// The process's peak resident memory so far, in bytes (getrusage).
inline double peak_resident_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

/// Clears the progress line (when there is one).
inline void end_compile_progress() {
  if (!::isatty(STDERR_FILENO)) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace samples
