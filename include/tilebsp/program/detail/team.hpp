// on_team: runs a worker on up to n host threads (the caller's included), for compile's parallel passes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace tilebsp::program::detail {

/// Calls work(false) on max(n, 1) - 1 new threads and work(true) on the calling thread, and joins them. The
/// workers share out the items themselves (an atomic counter), so the result must not depend on who took what.
template <class F>
void on_team(std::size_t n, F const& work) {
  std::vector<std::thread> team;
  for (std::size_t t = 1; t < std::max<std::size_t>(n, 1); ++t) team.emplace_back([&work] { work(false); });
  work(true);
  for (auto& t : team) t.join();
}

}  // namespace tilebsp::program::detail
