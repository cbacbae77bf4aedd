// Programs as values: seq, execute, copy, repeat, repeat_while, if_, stream_in/out, host, sync, and Sequence.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/program/host_context.hpp>
#include <tilebsp/program/lower.hpp>

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tilebsp {

/// A program: a value that knows how to lower itself into a flat schedule.
template <class P>
concept ProgramLike = requires(P const& p, Lowering& l) { p.lower(l); };

/// Runs the vertices of a compute set (one BSP compute phase).
struct Execute {
  ComputeSet cs;
  void lower(Lowering& l) const { l.execute(cs); }
};
inline Execute execute(ComputeSet cs) { return {cs}; }

/// Copies `src` to `dst` (same shape and element type) in an exchange phase.
struct Copy {
  Tensor src, dst;
  void lower(Lowering& l) const { l.copy(src, dst); }
};
inline Copy copy(Tensor const& src, Tensor const& dst) {
  if (!src.valid() || !dst.valid()) throw error("copy: a tensor is empty (default-constructed)");
  if (src.element_type() != dst.element_type())
    throw type_error("copy: element types differ (source " + std::string(name_of(src.element_type())) +
                     ", destination " + std::string(name_of(dst.element_type())) + ")");
  if (src.shape() != dst.shape())
    throw shape_error("copy: shapes differ (source " + to_string(src.shape()) + ", destination " +
                      to_string(dst.shape()) + ")");
  if (src.graph_id() != dst.graph_id()) throw error("copy: the tensors belong to different graphs");
  return {src, dst};
}

/// A global barrier on its own (a superstep with no compute and no exchange).
struct Sync {
  void lower(Lowering& l) const { l.sync(); }
};
inline Sync sync() { return {}; }

/// Runs the programs in order.
template <ProgramLike... P>
struct Seq {
  std::tuple<P...> parts;
  void lower(Lowering& l) const {
    std::apply([&](auto const&... p) { (p.lower(l), ...); }, parts);
  }
};
template <ProgramLike... P>
Seq<std::decay_t<P>...> seq(P&&... p) {
  return {{std::forward<P>(p)...}};
}

/// Runs `body` n times (an on-device loop: no host involvement between iterations).
template <ProgramLike B>
struct Repeat {
  std::size_t count;
  B body;
  void lower(Lowering& l) const {
    auto const begin = l.begin_repeat(count);
    body.lower(l);
    l.end_repeat(begin);
  }
};
template <ProgramLike B>
Repeat<std::decay_t<B>> repeat(std::size_t n, B&& body) {
  return {n, std::forward<B>(body)};
}

/// Runs `body` while the single-element bool tensor `flag` is true (tested before each iteration).
template <ProgramLike B>
struct RepeatWhile {
  Tensor flag;
  B body;
  void lower(Lowering& l) const {
    auto const test = l.branch_if_false(flag);
    body.lower(l);
    auto const back = l.jump(test);
    l.patch(test, back + 1);
    l.add_loop(test, back);
  }
};
namespace program::detail {
TILEBSP_INLINE void check_flag(char const* op, Tensor const& flag);
}  // namespace program::detail
template <ProgramLike B>
RepeatWhile<std::decay_t<B>> repeat_while(Tensor const& flag, B&& body) {
  program::detail::check_flag("repeat_while", flag);
  return {flag, std::forward<B>(body)};
}

/// Runs `then_` when the single-element flag is non-zero, else `else_`.
template <ProgramLike T, ProgramLike E>
struct If {
  Tensor flag;
  T then_;
  E else_;
  void lower(Lowering& l) const {
    auto const test = l.branch_if_false(flag);
    then_.lower(l);
    auto const skip = l.jump();
    l.patch(test, skip + 1);
    else_.lower(l);
    l.patch(skip, l.here());
  }
};
template <ProgramLike T, ProgramLike E = Seq<>>
If<std::decay_t<T>, std::decay_t<E>> if_(Tensor const& flag, T&& then_, E&& else_ = {}) {
  program::detail::check_flag("if_", flag);
  return {flag, std::forward<T>(then_), std::forward<E>(else_)};
}

/// Moves the next fifo.elements values from a host-to-device FIFO into `dst`.
struct StreamIn {
  Fifo fifo;
  Tensor dst;
  void lower(Lowering& l) const { l.stream(fifo, dst, true); }
};
/// Moves `src` into a device-to-host FIFO.
struct StreamOut {
  Tensor src;
  Fifo fifo;
  void lower(Lowering& l) const { l.stream(fifo, src, false); }
};
namespace program::detail {
TILEBSP_INLINE void check_stream(char const* op, Fifo const& f, Tensor const& t, bool to_device);
}  // namespace program::detail
inline StreamIn stream_in(Fifo const& fifo, Tensor const& dst) {
  program::detail::check_stream("stream_in", fifo, dst, true);
  return {fifo, dst};
}
inline StreamOut stream_out(Tensor const& src, Fifo const& fifo) {
  program::detail::check_stream("stream_out", fifo, src, false);
  return {src, fifo};
}

/// Calls a host function between supersteps; it may read and write tensors through HostContext.
struct Host {
  std::function<void(HostContext&)> fn;
  void lower(Lowering& l) const { l.host(fn); }
};
template <class F>
Host host(F&& fn) {
  if constexpr (std::is_invocable_v<F&, HostContext&>) {
    return {std::function<void(HostContext&)>(std::forward<F>(fn))};
  } else {
    static_assert(std::is_invocable_v<F&>, "host: the callback must be callable as f() or f(HostContext&)");
    return {[f = std::forward<F>(fn)](HostContext&) mutable { f(); }};
  }
}

/// Any program, type-erased (used where the program is only known at run time).
class Program {
 public:
  Program() = default;
  template <ProgramLike P>
    requires(!std::same_as<std::decay_t<P>, Program>)
  Program(P&& p) : self_(std::make_shared<Model<std::decay_t<P>>>(std::forward<P>(p))) {}  // NOLINT: implicit
  void lower(Lowering& l) const {
    if (self_) self_->lower(l);
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual void lower(Lowering& l) const = 0;
  };
  template <class P>
  struct Model final : Concept {
    explicit Model(P p) : p_(std::move(p)) {}
    void lower(Lowering& l) const override { p_.lower(l); }
    P p_;
  };
  std::shared_ptr<Concept const> self_;
};

/// A program sequence that grows at run time (operators append to one, as PopLibs' program::Sequence).
class Sequence {
 public:
  Sequence() = default;
  template <ProgramLike... P>
  explicit Sequence(P&&... p) {
    (add(std::forward<P>(p)), ...);
  }
  template <ProgramLike P>
  Sequence& add(P&& p) {
    parts_.emplace_back(std::forward<P>(p));
    return *this;
  }
  std::size_t size() const noexcept { return parts_.size(); }
  void lower(Lowering& l) const {
    for (auto const& p : parts_) p.lower(l);
  }

 private:
  std::vector<Program> parts_;
};

}  // namespace tilebsp
