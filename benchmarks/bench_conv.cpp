// Convolutions on tiles (ipu_mk2(1) plan, 2 host threads, batch 4, f32, channels-last) on the ResNeXt-101 32x4d
// layers, beside oneDNN's convolution primitives on the same problems (NHWC activations, weights in oneDNN's
// preferred layout, prepared outside the timed loop) when oneDNN was found. Counters: GFLOP/s (2 x MACs).
// Passes: forward, backward input, weight gradient (ours: conv_weight_gradients, a new tensor; oneDNN's backward
// weights), weight update (ours: conv_weight_update, the gradient fused into the SGD step on the weights; oneDNN's
// backward weights, then its sum primitive for the step).
#include <tilebsp/tilebsp.hpp>

#include <benchmark/benchmark.h>

#include "isa_context.hpp"

#if TILEBSP_HAVE_DNNL
#include <dnnl.hpp>
#endif
#if TILEBSP_HAVE_OPENMP
#include <omp.h>
#endif

#include <cstdint>
#include <string>
#include <vector>

namespace tb = tilebsp;

namespace {

constexpr int kThreads = 2;
constexpr std::int64_t kBatch = 4;

struct Layer {
  char const* name;
  std::int64_t field, cin, cout, kernel, stride, groups;
  tb::ConvParams params() const {
    tb::ConvParams p;
    p.batch = kBatch;
    p.input_field = {field, field};
    p.kernel_shape = {kernel, kernel};
    p.channels(cin, cout, groups);
    p.stride = {stride, stride};
    p.padding_lower = p.padding_upper = {kernel / 2, kernel / 2};
    return p;
  }
};
constexpr Layer kLayers[] = {
    {"stem_7x7s2_3to64_224", 224, 3, 64, 7, 2, 1},       {"1x1_256to128_56", 56, 256, 128, 1, 1, 1},
    {"grouped3x3_128_g32_56", 56, 128, 128, 3, 1, 32},   {"1x1_128to256_56", 56, 128, 256, 1, 1, 1},
    {"grouped3x3_256_g32_28", 28, 256, 256, 3, 1, 32},   {"grouped3x3_512_g32_14", 14, 512, 512, 3, 1, 32},
    {"1x1_1024to512_14", 14, 1024, 512, 1, 1, 1},        {"1x1_512to1024_14", 14, 512, 1024, 1, 1, 1},
    {"grouped3x3_1024_g32_7", 7, 1024, 1024, 3, 1, 32},
};

enum class Pass { forward, backward_input, weight_gradient, weight_update };

void set_rate(benchmark::State& state, tb::ConvParams const& p) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(p.macs()) * 1e-9 *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void BM_Conv(benchmark::State& state, Layer l, Pass pass) {
  auto const p = l.params();
  tb::Graph g{tb::targets::ipu_mk2(1)};
  auto x = g.add_variable<float>(p.input_shape(), "x"), w = g.add_variable<float>(p.weights_shape(), "w");
  auto dy = g.add_variable<float>(p.output_shape(), "dy");
  for (auto const& t : {x, w, dy}) tb::map_linearly(g, t);
  tb::Sequence prog;
  if (pass == Pass::forward) tb::ops::conv(g, prog, x, w, p, {.available_memory_proportion = 0.3});
  if (pass == Pass::backward_input) tb::ops::conv_backward_input(g, prog, dy, w, p, {.available_memory_proportion = 0.3});
  if (pass == Pass::weight_gradient) tb::ops::conv_weight_gradients(g, prog, dy, x, p, {.available_memory_proportion = 0.3});
  if (pass == Pass::weight_update) tb::ops::conv_weight_update(g, prog, dy, x, w, -0.01f, p, {.available_memory_proportion = 0.3});
  tb::Engine engine{tb::compile(g, {.allow_out_of_memory = true}, prog), {.host_threads = kThreads}};
  engine.write(x, std::vector<float>(x.num_elements(), 0.5f));
  engine.write(w, std::vector<float>(w.num_elements(), 0.25f));
  engine.write(dy, std::vector<float>(dy.num_elements(), 0.125f));
  for (auto _ : state) engine.run();
  set_rate(state, p);
}

#if TILEBSP_HAVE_DNNL
void BM_Onednn_Conv(benchmark::State& state, Layer l, Pass pass) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  auto const p = l.params();
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  std::int64_t const out = (l.field + 2 * (l.kernel / 2) - l.kernel) / l.stride + 1;
  memory::dims const src_dims{kBatch, l.cin, l.field, l.field}, dst_dims{kBatch, l.cout, out, out};
  memory::dims const w_dims = l.groups > 1 ? memory::dims{l.groups, l.cout / l.groups, l.cin / l.groups, l.kernel, l.kernel}
                                           : memory::dims{l.cout, l.cin, l.kernel, l.kernel};
  memory::dims const strides{l.stride, l.stride}, dilates{0, 0}, pad{l.kernel / 2, l.kernel / 2};
  memory::desc const src_md(src_dims, dt::f32, tag::nhwc), dst_md(dst_dims, dt::f32, tag::nhwc);
  memory::desc const w_any(w_dims, dt::f32, tag::any);
  memory src(src_md, eng), dst(dst_md, eng);
  std::fill_n(static_cast<float*>(src.get_data_handle()), src_md.get_size() / 4, 0.5f);
  std::fill_n(static_cast<float*>(dst.get_data_handle()), dst_md.get_size() / 4, 0.125f);
  auto const kind = pass == Pass::forward ? prop_kind::forward_inference : prop_kind::forward_training;
  convolution_forward::primitive_desc const fwd(
      convolution_forward::desc(kind, algorithm::convolution_direct, src_md, w_any, dst_md, strides, dilates, pad, pad), eng);
  memory w(fwd.weights_desc(), eng);
  std::fill_n(static_cast<float*>(w.get_data_handle()), fwd.weights_desc().get_size() / 4, 0.25f);
  if (pass == Pass::forward) {
    convolution_forward conv(fwd);
    for (auto _ : state) {
      conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst}});
      s.wait();
    }
  } else if (pass == Pass::backward_input) {
    convolution_backward_data::primitive_desc const bwd(
        convolution_backward_data::desc(algorithm::convolution_direct, src_md, w_any, dst_md, strides, dilates, pad, pad),
        eng, fwd);
    memory wb(bwd.weights_desc(), eng);
    std::fill_n(static_cast<float*>(wb.get_data_handle()), bwd.weights_desc().get_size() / 4, 0.25f);
    convolution_backward_data conv(bwd);
    for (auto _ : state) {
      conv.execute(s, {{DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DIFF_SRC, src}});
      s.wait();
    }
  } else {
    // Gradients in oneDNN's preferred layout too: with plain goihw it falls back to a reference kernel (~1 GFLOP/s).
    convolution_backward_weights::primitive_desc const bwd(
        convolution_backward_weights::desc(algorithm::convolution_direct, src_md, w_any, dst_md, strides, dilates, pad, pad),
        eng, fwd);
    // The weight update does the work of ours (conv_weight_update): the gradient, then the SGD step w += -0.01 dw on
    // weights kept in the gradient's layout, in place by oneDNN's sum primitive (its first source may be its
    // destination).
    memory dw(bwd.diff_weights_desc(), eng), wt(bwd.diff_weights_desc(), eng);
    std::fill_n(static_cast<float*>(wt.get_data_handle()), bwd.diff_weights_desc().get_size() / 4, 0.25f);
    convolution_backward_weights conv(bwd);
    sum update(sum::primitive_desc({1.0f, -0.01f}, {bwd.diff_weights_desc(), bwd.diff_weights_desc()}, eng));
    for (auto _ : state) {
      conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dst}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
      if (pass == Pass::weight_update)
        update.execute(s, {{DNNL_ARG_MULTIPLE_SRC, wt}, {DNNL_ARG_MULTIPLE_SRC + 1, dw}, {DNNL_ARG_DST, wt}});
      s.wait();
    }
  }
  set_rate(state, p);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if TILEBSP_HAVE_OPENMP
  omp_set_num_threads(kThreads);  // oneDNN's OpenMP runtime
#endif
  tb::set_warning_handler([](std::string_view) {});
  struct P {
    Pass pass;
    char const* prefix;
  };
  for (P const pp : {P{Pass::forward, "Conv"}, P{Pass::backward_input, "ConvBackwardInput"},
                     P{Pass::weight_gradient, "ConvWeightGradient"}, P{Pass::weight_update, "ConvWeightUpdate"}})
    for (Layer const& l : kLayers) {
      if (pp.pass != Pass::forward && l.groups == 1) continue;  // the backward passes: grouped layers
      std::string const suffix = std::string(pp.prefix) + "/" + l.name;
      benchmark::RegisterBenchmark(("BM_" + suffix).c_str(), BM_Conv, l, pp.pass)->UseRealTime();
#if TILEBSP_HAVE_DNNL
      benchmark::RegisterBenchmark(("BM_Onednn_" + suffix).c_str(), BM_Onednn_Conv, l, pp.pass)->UseRealTime();
#endif
    }
#if TILEBSP_HAVE_DNNL
  return tilebsp_bench::run_main(argc, argv, tilebsp_bench::onednn_isa());
#else
  return tilebsp_bench::run_main(argc, argv);
#endif
}
