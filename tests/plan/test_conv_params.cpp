// ConvParams: output shapes for strides, paddings and dilations in 1-3 dimensions; every validation error.
#include <tilebsp/plan/conv_params.hpp>

#include <doctest/doctest.h>

namespace tb = tilebsp;

namespace {
tb::ConvParams conv2d(std::int64_t h, std::int64_t w, std::int64_t kh, std::int64_t kw) {
  tb::ConvParams p;
  p.input_field = {h, w};
  p.kernel_shape = {kh, kw};
  return p;
}
}  // namespace

TEST_CASE("ConvParams: output shapes") {
  auto stem = conv2d(224, 224, 7, 7);  // ResNeXt's input block: 7x7/2, padding 3, 3 -> 64 channels
  stem.batch = 4;
  stem.channels(3, 64, 1);
  stem.stride = {2, 2};
  stem.padding_lower = stem.padding_upper = {3, 3};
  CHECK(stem.output_field() == tb::Shape{112, 112});
  CHECK(stem.output_shape() == tb::Shape{4, 112, 112, 64});
  CHECK(stem.input_shape() == tb::Shape{4, 224, 224, 3});
  CHECK(stem.weights_shape() == tb::Shape{1, 7, 7, 3, 64});
  CHECK(stem.macs() == 4ull * 112 * 112 * 64 * 3 * 49);

  auto grouped = conv2d(56, 56, 3, 3);  // 32 groups of 4 channels
  grouped.channels(128, 128, 32);
  grouped.padding_lower = grouped.padding_upper = {1, 1};
  CHECK(grouped.input_channels == 4);
  CHECK(grouped.output_shape() == tb::Shape{1, 56, 56, 128});
  CHECK(grouped.weights_shape() == tb::Shape{32, 3, 3, 4, 4});
  CHECK(grouped.describe() == "N=1 field 56x56 kernel 3x3 G=32 4->4 stride 1x1 pad 1x1/1x1");

  auto s2p2 = conv2d(9, 9, 3, 3);  // 3x3 stride 2 padding 2: (9 + 4 - 3) / 2 + 1
  s2p2.stride = {2, 2};
  s2p2.padding_lower = s2p2.padding_upper = {2, 2};
  CHECK(s2p2.output_field() == tb::Shape{6, 6});

  auto asym = conv2d(10, 11, 3, 3);  // stride {2, 3}, padding lower 1 upper 2
  asym.stride = {2, 3};
  asym.padding_lower = {1, 1};
  asym.padding_upper = {2, 2};
  CHECK(asym.output_field() == tb::Shape{6, 4});  // (10+3-3)/2+1, (11+3-3)/3+1

  auto dil = conv2d(7, 7, 3, 3);  // input dilation 2: 13 wide; kernel dilation 3: 7 wide
  dil.input_dilation = {2, 1};
  dil.kernel_dilation = {3, 1};
  CHECK(dil.output_field() == tb::Shape{7, 5});
  CHECK(dil.describe().find("dilation 2x1/3x1") != std::string::npos);

  tb::ConvParams one_d;  // 1-D, and thin or tiny fields
  one_d.input_field = {128};
  one_d.kernel_shape = {5};
  one_d.stride = {2};
  CHECK(one_d.output_field() == tb::Shape{62});
  CHECK(conv2d(1, 1, 1, 1).output_field() == tb::Shape{1, 1});
  CHECK(conv2d(1, 128, 1, 3).output_field() == tb::Shape{1, 126});
  tb::ConvParams three_d;
  three_d.input_field = {4, 5, 6};
  three_d.kernel_shape = {2, 2, 2};
  CHECK(three_d.output_field() == tb::Shape{3, 4, 5});
}

TEST_CASE("ConvParams: errors") {
  auto const fails = [](tb::ConvParams const& p, char const* message) {
    CHECK_THROWS_WITH_AS(p.validate(), message, tb::shape_error);
  };
  auto p = conv2d(8, 8, 3, 3);
  p.batch = 0;
  fails(p, "ConvParams: batch must be positive, got 0");
  p = conv2d(8, 8, 3, 3);
  p.output_channels = -2;
  fails(p, "ConvParams: output_channels must be positive, got -2");
  p = conv2d(8, -1, 3, 3);
  fails(p, "ConvParams: input_field[1] must be positive, got -1");
  p = conv2d(8, 8, 0, 3);
  fails(p, "ConvParams: kernel_shape[0] must be positive, got 0");
  p = conv2d(8, 8, 3, 3);
  p.stride = {1, 0};
  fails(p, "ConvParams: stride[1] must be positive, got 0");
  p = conv2d(8, 8, 3, 3);
  p.padding_upper = {-1, 0};
  fails(p, "ConvParams: padding_upper[0] must be non-negative, got -1");
  p = conv2d(8, 8, 3, 3);
  p.kernel_dilation = {0, 1};
  fails(p, "ConvParams: kernel_dilation[0] must be positive, got 0");
  p = conv2d(8, 8, 3, 3);
  p.stride = {2};
  fails(p, "ConvParams: stride has 1 dimensions but input_field has 2");
  p = conv2d(8, 8, 3, 3);
  p.kernel_shape = {3};
  fails(p, "ConvParams: kernel_shape has 1 dimensions but input_field has 2");
  tb::ConvParams none;
  fails(none, "ConvParams: input_field must have 1 to 3 dimensions, got 0");
  p = conv2d(4, 8, 7, 3);
  fails(p, "ConvParams: the kernel is larger than the padded input in dimension 0: 7 (dilated) > 4 (dilated and padded)");
  p.padding_lower = {2, 0};
  p.padding_upper = {1, 0};
  CHECK(p.output_field() == tb::Shape{1, 6});  // padding makes room
  p = conv2d(5, 5, 3, 3);
  p.kernel_dilation = {3, 1};
  fails(p, "ConvParams: the kernel is larger than the padded input in dimension 0: 7 (dilated) > 5 (dilated and padded)");
  CHECK_THROWS_WITH_AS(p.output_shape(), doctest::Contains("the kernel is larger"), tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ConvParams{}.channels(65, 130, 2), "ConvParams: input channels 65 are not divisible into 2 groups",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ConvParams{}.channels(64, 129, 2), "ConvParams: output channels 129 are not divisible into 2 groups",
                       tb::shape_error);
  CHECK_THROWS_WITH_AS(tb::ConvParams{}.channels(64, 64, 0), "ConvParams: groups must be positive, got 0", tb::shape_error);
  auto depthwise = conv2d(8, 8, 3, 3);
  depthwise.channels(64, 64, 64);
  CHECK(depthwise.weights_shape() == tb::Shape{64, 3, 3, 1, 1});
}
