// The direct convolution's forms (simd/conv/forms.hpp): which form and placements a block takes, per the
// conditions that direct_forms and direct_placements state, on the instruction set this file is built for (test_simd:
// the baseline, 16 registers; test_simd_native: the build machine's). The kernels' results do not depend on the
// form: test_conv_rows and test_conv_gradient check each against a reference and bitwise across forms.
#include "conv_problem.hpp"

#include <tilebsp/simd/conv.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

namespace sd = tilebsp::simd;
using sd::DirectForm;
using tilebsp_test::Problem;

namespace {

/// A 3x3 stride-1 padded problem of one group, 8 reduction channels and `vectors` vectors of output channels over
/// rows of W positions.
Problem<float> problem(std::int64_t vectors, std::int64_t W, std::int64_t J = 8) {
  return Problem<float>(1, 6, W, 1, J, vectors * static_cast<std::int64_t>(sd::lanes), false, 7, false);
}

DirectForm forward_form_of(Problem<float> const& p, std::vector<float>& y) {
  sd::ConvRange const r = p.all();
  auto const cols = sd::detail::conv_columns(r.g0, r.g1, r.c0, r.c1);
  return sd::detail::forward_form(p.L, cols, p.dst(y), r.hi[2] - r.lo[2]);
}

}  // namespace

TEST_CASE("direct_forms: one entry per form, in DirectForm's order, each with its condition") {
  std::pair<DirectForm, std::string_view> const names[] = {{DirectForm::forward_rows, "forward row blocks"},
                                                          {DirectForm::forward_blocks, "forward register blocks"},
                                                          {DirectForm::gradient_rows, "weight-gradient row blocks"},
                                                          {DirectForm::gradient_blocks, "weight-gradient register blocks"},
                                                          {DirectForm::forward_depthwise, "forward depthwise blocks"}};
  CHECK(sd::direct_forms.size() == std::size(names));
  for (auto const& [f, name] : names) {
    auto const& info = sd::direct_form_info(f);
    CHECK(info.name == name);
    CHECK(!info.applies.empty());
    CHECK(info.chosen_by.starts_with("detail::"));
  }
  for (auto const& p : sd::direct_placements) CHECK(!p.applies.empty());
}

TEST_CASE("forward_form: row blocks for a 3-wide stride-1 kernel into f32 where the instruction set has them") {
  SUBCASE("one vector of output channels over rows of 24: every instruction set has row blocks") {
    auto const p = problem(1, 24);
    std::vector<float> y(p.outputs());
    CHECK(forward_form_of(p, y) == DirectForm::forward_rows);
  }
  SUBCASE("two vectors: row blocks only with 32 registers (tuning.row_rows_max)") {
    auto const p = problem(2, 24);
    std::vector<float> y(p.outputs());
    CHECK(forward_form_of(p, y) == (sd::tuning.registers >= 32 ? DirectForm::forward_rows : DirectForm::forward_blocks));
    CHECK((sd::tuning.row_rows_max[1] > 0) == (sd::tuning.registers >= 32));
  }
  SUBCASE("rows too short for a block of row_rows_min positions") {
    auto const p = problem(1, 2);
    std::vector<float> y(p.outputs());
    CHECK(forward_form_of(p, y) == DirectForm::forward_blocks);
  }
  SUBCASE("stride 2 along the row") {
    auto p = problem(1, 24);
    p.L.dim[2].a = 2;
    p.L.dim[2].out = 12;
    std::vector<float> y(p.outputs());
    CHECK(forward_form_of(p, y) == DirectForm::forward_blocks);
  }
  SUBCASE("a 5-wide kernel") {
    auto p = problem(1, 24);
    p.L.dim[2].taps = 5;
    std::vector<float> y(p.outputs());
    CHECK(forward_form_of(p, y) == DirectForm::forward_blocks);
  }
  SUBCASE("f16 results") {
    auto const p = problem(1, 24);
    std::vector<tilebsp::half> y(p.outputs());
    sd::ConvRange const r = p.all();
    auto const cols = sd::detail::conv_columns(r.g0, r.g1, r.c0, r.c1);
    CHECK(sd::detail::forward_form(p.L, cols, p.dst(y), 24) == DirectForm::forward_blocks);
  }
}

TEST_CASE("forward placements: the source and weights in place, sums from the registers") {
  auto p = problem(1, 24);
  sd::ConvRange const r = p.all();
  auto const cols = sd::detail::conv_columns(r.g0, r.g1, r.c0, r.c1);
  REQUIRE(cols.size() == 1);
  CHECK(sd::detail::forward_rows_source_in_place<float>(p.L, cols[0], 0, 24));
  CHECK(!sd::detail::forward_rows_source_in_place<tilebsp::half>(p.L, cols[0], 0, 24));
  CHECK(sd::detail::forward_rows_weights_in_place(p.weights(), cols[0]));
  p.L.dim[2].div = 2;  // input dilation: holes the row kernel cannot skip in place
  CHECK(!sd::detail::forward_rows_source_in_place<float>(p.L, cols[0], 0, 24));

  SUBCASE("register blocks read the source as their box where no tap reads padding") {
    auto q = problem(1, 24);  // padded by 1 (offset -1): only the interior's blocks
    sd::ConvRange in = q.all();
    CHECK(!sd::detail::box_in_place<float>(q.L, in, q.src(), cols));
    for (std::size_t d = 1; d < 3; ++d) in.lo[d] = 1, in.hi[d] = q.L.dim[d].out - 1;
    CHECK(sd::detail::box_in_place<float>(q.L, in, q.src(), cols));
    in.hi[2] = q.L.dim[2].out;  // its last position's last tap reads padding
    CHECK(!sd::detail::box_in_place<float>(q.L, in, q.src(), cols));
    in.hi[2] = q.L.dim[2].out - 1;
    q.L.dim[2].div = 2;  // holes
    CHECK(!sd::detail::box_in_place<float>(q.L, in, q.src(), cols));
  }

  std::vector<float> y(p.outputs());
  auto b = sd::detail::forward_block_results(p.dst(y), cols[0], false);
  CHECK((b.contiguous && b.from_registers));
  b = sd::detail::forward_block_results(p.dst(y), cols[0], true);  // continued from dst: accumulator rows
  CHECK((b.contiguous && !b.from_registers));
  std::vector<tilebsp::half> h(p.outputs());
  b = sd::detail::forward_block_results(p.dst(h), cols[0], false);
  CHECK((!b.contiguous && !b.from_registers));
}

TEST_CASE("gradient_column: row blocks over whole rows with enough channels; sums in dst; the source in place") {
  auto const grad = [](Problem<float> const& p, sd::ConvRange const& r) {
    auto const cols = sd::detail::conv_columns(r.g0, r.g1, r.c0, r.c1);
    std::vector<float> dw(static_cast<std::size_t>(p.G * 9 * p.J * p.C));
    sd::Operand6<float> const dst{dw.data(), {9 * p.J * p.C, 9 * p.J * p.C, 3 * p.J * p.C, p.J * p.C, p.C, 1}, {}};
    return sd::detail::gradient_column(p.L, r, p.src(), dst, cols[0]);
  };
  auto const p = problem(1, 24);
  sd::detail::GradientColumn c = grad(p, p.all());
  CHECK(c.form == DirectForm::gradient_rows);
  CHECK(c.in_place);
  CHECK(c.source_in_place);  // 8 channels apart: 32 bytes, not a whole line, so 64 sets
  CHECK(!c.prefetch_rows);
  SUBCASE("part of a row") {
    sd::ConvRange r = p.all();
    r.hi[2] = 12;
    CHECK(grad(p, r).form == DirectForm::gradient_blocks);
  }
  SUBCASE("one reduction channel: too few chains") {
    auto const q = problem(1, 24, 1);
    CHECK(grad(q, q.all()).form == DirectForm::gradient_blocks);
  }
  SUBCASE("positions 4 KiB apart fall into one L1 set: the source from a box") {
    auto const q = problem(1, 24, 1024);
    sd::detail::GradientColumn const d = grad(q, q.all());
    CHECK(d.form == DirectForm::gradient_rows);
    CHECK(!d.source_in_place);
  }
  SUBCASE("positions 1 KiB apart: in place, next rows prefetched") {
    auto const q = problem(1, 24, 256);
    sd::detail::GradientColumn const d = grad(q, q.all());
    CHECK(d.source_in_place);
    CHECK(d.prefetch_rows);
  }
}
