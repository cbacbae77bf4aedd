// core::detail::parallel_for, the threads of graph building, compile, lowering and the executable cache: every item
// once, thread indices in range, and the error of the lowest throwing item for any number of threads. In the
// program suite, which the ThreadSanitizer preset runs.
#include <tilebsp/core/detail/parallel.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

using tilebsp::core::detail::parallel_for;

TEST_CASE("parallel_for visits every item once, on thread indices below the thread count") {
  for (std::size_t threads : {0u, 1u, 2u, 3u, 8u})
    for (std::size_t grain : {0u, 1u, 7u, 64u})
      for (std::size_t count : {0u, 1u, 5u, 1000u}) {
        std::vector<std::atomic<int>> seen(count);
        std::atomic<bool> in_range{true};
        parallel_for(threads, count, grain, [&](std::size_t i, std::size_t thread) {
          seen[i].fetch_add(1);
          if (thread >= std::max<std::size_t>(threads, 1)) in_range = false;
        });
        bool once = true;
        for (auto const& s : seen) once = once && s.load() == 1;
        CHECK(once);
        CHECK(in_range.load());
      }
}

TEST_CASE("parallel_for rethrows the error of the lowest throwing item, whatever the thread count") {
  for (std::size_t threads : {1u, 2u, 3u, 7u})
    for (std::size_t grain : {1u, 4u, 100u}) {
      // Items 17, 250 and 901 throw; 17's error is the one reported, as on one thread.
      auto const run = [&] {
        parallel_for(threads, 1000, grain, [](std::size_t i, std::size_t) {
          if (i == 17 || i == 250 || i == 901) throw std::runtime_error("item " + std::to_string(i));
        });
      };
      CHECK_THROWS_WITH_AS(run(), "item 17", std::runtime_error);
    }
  // Items before the lowest throwing one all run; a block stops at its first throw.
  std::vector<std::atomic<int>> seen(64);
  CHECK_THROWS_AS(parallel_for(3, 64, 8, [&](std::size_t i, std::size_t) {
                    seen[i].fetch_add(1);
                    if (i == 42) throw std::logic_error("42");
                  }),
                  std::logic_error);
  for (std::size_t i = 0; i <= 42; ++i) CHECK(seen[i].load() == 1);
  for (std::size_t i = 43; i < 48; ++i) CHECK(seen[i].load() == 0);
}
