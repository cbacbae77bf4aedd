// ConvParams: the shape of a (grouped) convolution — batch, input field, kernel, channels per group, groups,
// stride, padding and dilations — with validation and the shapes it implies. Activations are channels-last
// ([N][field...][G * C]); weights are [G][kernel...][C_in][C_out] (each kernel position a C_in x C_out matrix).
#pragma once

#include <tilebsp/core/error.hpp>
#include <tilebsp/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tilebsp {

struct ConvParams {
  std::int64_t batch = 1;
  std::vector<std::int64_t> input_field;   ///< spatial input shape, 1 to 3 dimensions ({W}, {H, W}, {D, H, W})
  std::vector<std::int64_t> kernel_shape;  ///< spatial kernel shape, same rank
  std::int64_t input_channels = 1;         ///< per group
  std::int64_t output_channels = 1;        ///< per group
  std::int64_t groups = 1;
  /// Per spatial dimension; an empty vector means the default (stride 1, padding 0, dilation 1).
  std::vector<std::int64_t> stride = {};
  std::vector<std::int64_t> padding_lower = {};
  std::vector<std::int64_t> padding_upper = {};
  std::vector<std::int64_t> input_dilation = {};   ///< zeros inserted between input elements: dilation - 1
  std::vector<std::int64_t> kernel_dilation = {};  ///< gaps between kernel taps: dilation - 1

  /// Sets the channels from totals: `total_in` and `total_out` split into `groups` groups. Throws shape_error
  /// when either is not divisible by the group count.
  ConvParams& channels(std::int64_t total_in, std::int64_t total_out, std::int64_t groups_) {
    if (groups_ <= 0) throw shape_error("ConvParams: groups must be positive, got " + std::to_string(groups_));
    for (auto [what, total] : {std::pair{"input", total_in}, std::pair{"output", total_out}})
      if (total <= 0 || total % groups_ != 0)
        throw shape_error(std::string("ConvParams: ") + what + " channels " + std::to_string(total) +
                          " are not divisible into " + std::to_string(groups_) + " groups");
    input_channels = total_in / groups_;
    output_channels = total_out / groups_;
    groups = groups_;
    return *this;
  }

  std::size_t rank() const noexcept { return input_field.size(); }
  std::int64_t stride_of(std::size_t d) const { return at(stride, d, 1); }
  std::int64_t padding_lower_of(std::size_t d) const { return at(padding_lower, d, 0); }
  std::int64_t padding_upper_of(std::size_t d) const { return at(padding_upper, d, 0); }
  std::int64_t input_dilation_of(std::size_t d) const { return at(input_dilation, d, 1); }
  std::int64_t kernel_dilation_of(std::size_t d) const { return at(kernel_dilation, d, 1); }

  /// Throws shape_error naming the first bad value: sizes that are zero or negative, vectors whose rank differs
  /// from the input field's, negative padding, a (dilated) kernel larger than the padded (dilated) input.
  void validate() const {
    auto const positive = [](char const* what, std::int64_t v) {
      if (v <= 0) throw shape_error(std::string("ConvParams: ") + what + " must be positive, got " + std::to_string(v));
    };
    positive("batch", batch);
    positive("input_channels", input_channels);
    positive("output_channels", output_channels);
    positive("groups", groups);
    if (input_field.empty() || input_field.size() > 3)
      throw shape_error("ConvParams: input_field must have 1 to 3 dimensions, got " + std::to_string(input_field.size()));
    auto const same_rank = [&](char const* what, std::vector<std::int64_t> const& v, bool optional) {
      if ((optional && v.empty()) || v.size() == rank()) return;
      throw shape_error(std::string("ConvParams: ") + what + " has " + std::to_string(v.size()) + " dimensions but input_field has " +
                        std::to_string(rank()));
    };
    same_rank("kernel_shape", kernel_shape, false);
    same_rank("stride", stride, true);
    same_rank("padding_lower", padding_lower, true);
    same_rank("padding_upper", padding_upper, true);
    same_rank("input_dilation", input_dilation, true);
    same_rank("kernel_dilation", kernel_dilation, true);
    for (std::size_t d = 0; d < rank(); ++d) {
      auto const each = [&](char const* what, std::int64_t v, std::int64_t least) {
        if (v < least)
          throw shape_error(std::string("ConvParams: ") + what + "[" + std::to_string(d) + "] must be " +
                            (least > 0 ? "positive" : "non-negative") + ", got " + std::to_string(v));
      };
      each("input_field", input_field[d], 1);
      each("kernel_shape", kernel_shape[d], 1);
      each("stride", stride_of(d), 1);
      each("padding_lower", padding_lower_of(d), 0);
      each("padding_upper", padding_upper_of(d), 0);
      each("input_dilation", input_dilation_of(d), 1);
      each("kernel_dilation", kernel_dilation_of(d), 1);
      if (dilated_kernel(d) > padded_input(d))
        throw shape_error("ConvParams: the kernel is larger than the padded input in dimension " + std::to_string(d) +
                          ": " + std::to_string(dilated_kernel(d)) + " (dilated) > " + std::to_string(padded_input(d)) +
                          " (dilated and padded)");
    }
  }

  /// The input field after dilation and padding, and the kernel after dilation, in dimension d.
  std::int64_t padded_input(std::size_t d) const {
    return (input_field[d] - 1) * input_dilation_of(d) + 1 + padding_lower_of(d) + padding_upper_of(d);
  }
  std::int64_t dilated_kernel(std::size_t d) const { return (kernel_shape[d] - 1) * kernel_dilation_of(d) + 1; }

  /// The spatial output shape (validates first).
  Shape output_field() const {
    validate();
    Shape s;
    for (std::size_t d = 0; d < rank(); ++d)
      s.push_back(static_cast<std::size_t>((padded_input(d) - dilated_kernel(d)) / stride_of(d) + 1));
    return s;
  }
  /// Activation shapes, channels-last: [N, field..., G * C].
  Shape input_shape() const {
    validate();
    Shape s{static_cast<std::size_t>(batch)};
    for (auto v : input_field) s.push_back(static_cast<std::size_t>(v));
    s.push_back(static_cast<std::size_t>(groups * input_channels));
    return s;
  }
  Shape output_shape() const {
    Shape s{static_cast<std::size_t>(batch)};
    for (auto v : output_field()) s.push_back(v);
    s.push_back(static_cast<std::size_t>(groups * output_channels));
    return s;
  }
  /// Weights: [G, kernel..., C_in, C_out].
  Shape weights_shape() const {
    validate();
    Shape s{static_cast<std::size_t>(groups)};
    for (auto v : kernel_shape) s.push_back(static_cast<std::size_t>(v));
    s.push_back(static_cast<std::size_t>(input_channels));
    s.push_back(static_cast<std::size_t>(output_channels));
    return s;
  }
  /// Multiply-accumulates of the forward pass (taps that fall on padding or dilation holes included, as a dense
  /// kernel computes them).
  std::uint64_t macs() const {
    std::uint64_t n = static_cast<std::uint64_t>(batch * groups * input_channels * output_channels);
    auto const out = output_field();
    for (std::size_t d = 0; d < rank(); ++d) n *= out[d] * static_cast<std::uint64_t>(kernel_shape[d]);
    return n;
  }

  /// "N=4 field 56x56 kernel 3x3 G=32 4->4 stride 1x1 pad 1x1/1x1" — for plans, messages and benchmarks.
  std::string describe() const {
    auto const dims = [&](auto&& f) {
      std::string s;
      for (std::size_t d = 0; d < rank(); ++d) s += (d ? "x" : "") + std::to_string(f(d));
      return s;
    };
    std::string s = "N=" + std::to_string(batch) + " field " + dims([&](std::size_t d) { return input_field[d]; }) +
                    " kernel " + dims([&](std::size_t d) { return kernel_shape[d]; }) + " G=" + std::to_string(groups) + " " +
                    std::to_string(input_channels) + "->" + std::to_string(output_channels) + " stride " +
                    dims([&](std::size_t d) { return stride_of(d); }) + " pad " +
                    dims([&](std::size_t d) { return padding_lower_of(d); }) + "/" +
                    dims([&](std::size_t d) { return padding_upper_of(d); });
    bool dilated = false;
    for (std::size_t d = 0; d < rank(); ++d) dilated |= input_dilation_of(d) != 1 || kernel_dilation_of(d) != 1;
    if (dilated)
      s += " dilation " + dims([&](std::size_t d) { return input_dilation_of(d); }) + "/" +
           dims([&](std::size_t d) { return kernel_dilation_of(d); });
    return s;
  }

 private:
  static std::int64_t at(std::vector<std::int64_t> const& v, std::size_t d, std::int64_t fallback) {
    return v.empty() ? fallback : v.at(d);
  }

  friend bool operator==(ConvParams const&, ConvParams const&) = default;
};

}  // namespace tilebsp
