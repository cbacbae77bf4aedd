// Host tasks: what an Engine runs in place of a span of program that has a faster host implementation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tilebsp {

/// A bound host implementation: called by every host thread as task(thread, threads) between the same barriers as
/// the span it replaces. Work must be divided so that the values written do not depend on `threads`.
using HostTask = std::function<void(unsigned thread, unsigned threads)>;

/// What a host kernel's bind() gets from the Engine about the graph's variables.
struct HostBinding {
  /// The host address of variable `var`'s first element.
  std::function<std::byte*(std::uint32_t var)> address;
  /// For a variable that no step of the executable writes (only the host does: Engine::write, a host callback), a
  /// counter the Engine bumps on each such write: a kernel may keep a derived form of the operand across runs
  /// (weights packed for its micro-kernel) and rebuild it when the counter has moved. Null for a variable the
  /// program writes (compute sets, exchanges, input streams).
  std::function<std::uint64_t const*(std::uint32_t var)> host_writes;

  std::byte* operator()(std::uint32_t var) const { return address(var); }
};

/// A host implementation of a span of program (see host_path()). Contract: running the bound task writes bitwise
/// the same values that the span's body would write to every tensor read after it (an operator's internal
/// temporaries excepted), so an Engine with host kernels turned off (EngineOptions::host_kernels) computes the
/// same results. bind() is called once per Engine and replica (each replica's memory; the Engine runs the replicas'
/// tasks one after another, a barrier between them); an empty task (or an empty bind) means "run the body", for
/// example when an operand is not one strided variable.
struct HostKernel {
  std::function<HostTask(HostBinding const&)> bind;
  explicit operator bool() const noexcept { return static_cast<bool>(bind); }
};

}  // namespace tilebsp
