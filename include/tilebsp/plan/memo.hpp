// PlanMemo: the planners' recent answers. A plan is a pure function of (target, problem, options), and a network
// asks for the same few again and again (ResNeXt-101's 104 convolutions have a dozen shapes, each planned when
// its input, its weights and the convolution itself are created): the search runs once per distinct question.
#pragma once

#include <tilebsp/core/target.hpp>
#include <tilebsp/core/warning.hpp>

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace tilebsp::plan::detail {

/// The last `capacity` distinct questions and their plans, with the warning each gave (given again on a hit:
/// every call that relaxes a bound says so). Thread-safe; planning itself runs outside the lock.
template <class Plan, class Problem, class Options>
class PlanMemo {
 public:
  static constexpr std::size_t capacity = 64;

  /// The plan for (t, q, o): remembered, or `search(std::string& warning)`'s (which must not warn itself).
  template <class Search>
  Plan get(Target const& t, Problem const& q, Options const& o, Search&& search) {
    std::optional<Plan> plan;
    std::string warning;
    {
      std::lock_guard lock(mutex_);
      for (auto const& e : entries_)
        if (e.problem == q && e.options == o && e.target == t) {
          plan = e.plan;
          warning = e.warning;
          break;
        }
    }
    if (!plan) {
      plan = search(warning);
      std::lock_guard lock(mutex_);
      if (entries_.size() == capacity) entries_.pop_front();
      entries_.push_back({t, q, o, *plan, warning});
    }
    if (!warning.empty()) warn(warning);
    return std::move(*plan);
  }

 private:
  struct Entry {
    Target target;
    Problem problem;
    Options options;
    Plan plan;
    std::string warning;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

}  // namespace tilebsp::plan::detail
