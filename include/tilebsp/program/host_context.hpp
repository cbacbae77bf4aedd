// HostContext: what a host callback may do while a program runs (read and write tensors).
#pragma once

#include <tilebsp/core/tensor.hpp>
#include <tilebsp/core/types.hpp>

#include <span>
#include <vector>

namespace tilebsp {

/// Tensor access for host callbacks; the Engine implements it. Calls happen between supersteps.
class HostContext {
 public:
  virtual ~HostContext() = default;
  /// Copies `t`'s elements (row-major) to `dst`; `bytes` must be num_elements × element size.
  virtual void read_bytes(Tensor const& t, void* dst, std::size_t bytes) const = 0;
  virtual void write_bytes(Tensor const& t, void const* src, std::size_t bytes) = 0;
  /// The replica whose tensors this context reads and writes (replicated executables: CompileOptions::replicas;
  /// a host callback runs once per replica, in replica order, each time with that replica's context).
  virtual std::size_t replica() const noexcept { return 0; }

  template <ElementLike T>
  std::vector<T> read(Tensor const& t) const {
    check<T>("read", t);
    std::vector<T> out(t.num_elements());
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<unsigned char> tmp(out.size());
      read_bytes(t, tmp.data(), tmp.size());
      for (std::size_t i = 0; i < tmp.size(); ++i) out[i] = tmp[i] != 0;
    } else {
      read_bytes(t, out.data(), out.size() * sizeof(T));
    }
    return out;
  }
  template <ElementLike T>
  void write(Tensor const& t, std::span<T const> values) {
    check<T>("write", t);
    if (values.size() != t.num_elements())
      throw shape_error(std::string("write: the tensor has ") + std::to_string(t.num_elements()) + " elements but " +
                        std::to_string(values.size()) + " values were given");
    write_bytes(t, values.data(), values.size() * sizeof(T));
  }
  template <ElementLike T>
  void write(Tensor const& t, std::vector<T> const& values) {
    if constexpr (std::is_same_v<T, bool>) {
      std::unique_ptr<bool[]> tmp(new bool[values.size()]);
      for (std::size_t i = 0; i < values.size(); ++i) tmp[i] = values[i];
      write<bool>(t, std::span<bool const>(tmp.get(), values.size()));
    } else {
      write<T>(t, std::span<T const>(values));
    }
  }

 private:
  template <class T>
  static void check(char const* op, Tensor const& t) {
    if (!t.valid()) throw error(std::string(op) + ": the tensor is empty (default-constructed)");
    if (t.element_type() != element_type_v<T>)
      throw type_error(std::string(op) + ": the tensor holds " + std::string(name_of(t.element_type())) +
                       " but the host type is " + std::string(name_of(element_type_v<T>)));
  }
};

}  // namespace tilebsp
