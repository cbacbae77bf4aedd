// host_path(name, kernel, body): a span of program with a faster host implementation beside it.
#pragma once

#include <tilebsp/program/host_task.hpp>
#include <tilebsp/program/lower.hpp>
#include <tilebsp/program/programs.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace tilebsp {

/// A span of program and a host implementation of it. The body is the model: it is lowered, checked, costed and
/// accounted for memory like any program. The Engine runs either the body or, where host kernels are on
/// (EngineOptions::host_kernels) and the kernel binds to a task, the task in its place, and skips the body; the
/// profile puts the task's host time on the span's own step, named `name`, and counts the body's steps as run
/// (their estimated cycles are the model's). The body must be straight-line supersteps (compute sets, copies,
/// syncs); compile throws error for a repeat, branch, stream, host callback or host path inside it. An empty
/// kernel lowers to the body alone.
template <ProgramLike B>
struct HostPath {
  std::string name;
  HostKernel kernel;
  B body;
  void lower(Lowering& l) const {
    if (!kernel) return body.lower(l);
    auto const begin = l.begin_host_path(kernel, name);
    body.lower(l);
    l.end_host_path(begin);
  }
};
template <ProgramLike B>
HostPath<std::decay_t<B>> host_path(std::string name, HostKernel kernel, B&& body) {
  return {std::move(name), std::move(kernel), std::forward<B>(body)};
}

}  // namespace tilebsp
