// Pipelined ONNX models: the nodes' costs measured by building each on one IPU, and the balanced split (`auto`).
#include "importer.hpp"

#include <tilebsp/onnx/pipeline.hpp>
#include <tilebsp/program/compile.hpp>

#include <algorithm>
#include <limits>
#include <set>

namespace tilebsp::onnx {

std::vector<NodeCost> node_costs(Model const& model, ImportOptions const& options, Target const& ipu, std::size_t threads) {
  if (ipu.ipus != 1) throw option_error("node_costs: the target must be one IPU (a stage plans on its own IPU)");
  ImportOptions o = options;
  o.manual_sharding.clear();
  o.pipeline_stages.clear();
  o.pipeline_split.clear();
  Graph g{ipu};
  g.set_build_threads(threads);
  Sequence unused;
  std::vector<detail::NodeBuild> built;
  detail::import_model(g, unused, model, o, &built);
  std::vector<Program> programs;
  for (auto& b : built) programs.emplace_back(std::move(b.program));
  Executable const exe = compile(g, {.allow_out_of_memory = true, .threads = threads}, programs);
  auto const& m = model.data();
  // Who reads each value last, in the model's order.
  std::map<std::string, std::size_t> last_reader;
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    for (auto const& in : m.nodes[i].inputs)
      if (!in.empty()) last_reader[in] = i;
  std::vector<NodeCost> costs(m.nodes.size());
  std::set<std::string> counted;  // an initializer read by several nodes costs once, where it is first read
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    NodeCost& c = costs[i];
    c.cycles = exe.estimated_cycles(i);
    for (auto const& in : m.nodes[i].inputs) {
      auto it = m.initializers.find(in);
      if (in.empty() || it == m.initializers.end() || !counted.insert(in).second) continue;
      std::size_t const bytes = is_floating(it->second.type) ? (o.precision == Precision::fp16 ? 2 : 4) : 4;
      c.parameter_bytes += static_cast<std::uint64_t>(it->second.size()) * bytes;
    }
    for (auto const& [name, bytes] : built[i].computed)
      if (auto r = last_reader.find(name); r != last_reader.end() && r->second > i) c.outputs.push_back({r->second, bytes});
  }
  return costs;
}

namespace {

/// The contiguous split of `cycles` (per node) into exactly K stages whose slowest stage plus dearest transfer
/// (`cut[i]`: cycles of moving what crosses the boundary before node i) is least, each stage's parameters within
/// `cap` where `capped`. Empty when no split of K stages exists.
std::vector<std::size_t> balanced_split(std::vector<std::uint64_t> const& cost, std::vector<std::uint64_t> const& params,
                                        std::vector<std::uint64_t> const& cut, std::size_t K, std::uint64_t cap, bool capped,
                                        std::uint64_t& best_value) {
  std::size_t const N = cost.size();
  best_value = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::size_t> best;
  if (K == 0 || K > N) return best;
  std::vector<std::uint64_t> limits(cut.begin() + 1, cut.end());
  limits.push_back(0);
  std::sort(limits.begin(), limits.end());
  limits.erase(std::unique(limits.begin(), limits.end()), limits.end());
  std::uint64_t total = 0;
  for (auto c : cost) total += c;
  // The fewest stages whose cycles stay within S using only boundaries whose transfer stays within T; the split.
  auto const greedy = [&](std::uint64_t S, std::uint64_t T, std::vector<std::size_t>* starts) -> std::size_t {
    std::size_t stages = 0, start = 0;
    if (starts) starts->clear();
    while (start < N) {
      if (starts) starts->push_back(start);
      ++stages;
      std::uint64_t sum = 0, p = 0;
      std::size_t i = start, furthest = 0;  // furthest allowed boundary within S
      for (; i < N; ++i) {
        sum += cost[i];
        p += params[i];
        if (sum > S || (capped && p > cap)) break;
        if (i + 1 < N && cut[i + 1] <= T) furthest = i + 1;
      }
      if (i == N) break;
      if (furthest <= start) return std::numeric_limits<std::size_t>::max();
      start = furthest;
    }
    return stages;
  };
  for (std::uint64_t T : limits) {
    std::size_t allowed = 0;
    for (std::size_t i = 1; i < N; ++i) allowed += cut[i] <= T;
    if (allowed + 1 < K) continue;
    // The least S for which K stages fit (adding allowed boundaries never raises a stage's cycles).
    std::uint64_t lo = 0, hi = total;
    if (greedy(hi, T, nullptr) > K) continue;
    while (lo < hi) {
      std::uint64_t const mid = lo + (hi - lo) / 2;
      if (greedy(mid, T, nullptr) <= K) hi = mid;
      else lo = mid + 1;
    }
    if (lo + T >= best_value) continue;
    std::vector<std::size_t> starts;
    greedy(lo, T, &starts);
    // More boundaries up to K where the greedy split needs fewer: any allowed ones (they raise no stage's cycles).
    std::set<std::size_t> chosen(starts.begin(), starts.end());
    while (chosen.size() < K) {
      std::size_t pick = 0;
      for (std::size_t i = 1; i < N && !pick; ++i)
        if (cut[i] <= T && !chosen.contains(i)) pick = i;
      if (!pick) break;
      chosen.insert(pick);
    }
    if (chosen.size() != K) continue;
    // The value of the split itself: its slowest stage and dearest boundary.
    std::vector<std::size_t> s(chosen.begin(), chosen.end());
    std::uint64_t slowest = 0, dearest = 0;
    for (std::size_t k = 0; k < K; ++k) {
      std::uint64_t sum = 0;
      for (std::size_t i = s[k]; i < (k + 1 < K ? s[k + 1] : N); ++i) sum += cost[i];
      slowest = std::max(slowest, sum);
      if (k > 0) dearest = std::max(dearest, cut[s[k]]);
    }
    if (slowest + dearest < best_value) best_value = slowest + dearest, best = std::move(s);
  }
  return best;
}

}  // namespace

PipelineSolution plan_pipeline(Model const& model, ImportOptions const& options, PipelineConfig const& config,
                               std::size_t micro_batches, Target const& ipu, std::size_t threads) {
  auto const& m = model.data();
  std::size_t const N = m.nodes.size();
  std::size_t const lo = config.min_ipu_quantity, hi = std::min({config.max_ipu_quantity, micro_batches, N});
  if (lo > hi)
    throw option_error(m.name + ": pipeline_cfg: no IPU count in [" + std::to_string(config.min_ipu_quantity) + ", " +
                       std::to_string(config.max_ipu_quantity) + "] suits " + std::to_string(micro_batches) +
                       " micro-batches per run (batch_per_step) and " + std::to_string(N) + " nodes: a pipeline needs at "
                       "least one micro-batch and one node per stage");
  std::vector<NodeCost> const costs = node_costs(model, options, ipu, threads);
  std::vector<std::uint64_t> cycles(N), params(N), bytes(N + 1, 0), cut(N + 1, 0);
  // bytes[i]: what crosses the boundary before node i (computed before it, read at or after it).
  std::vector<std::int64_t> delta(N + 2, 0);
  for (std::size_t i = 0; i < N; ++i) {
    cycles[i] = costs[i].cycles;
    params[i] = costs[i].parameter_bytes;
    for (auto const& o : costs[i].outputs) {
      delta[i + 1] += static_cast<std::int64_t>(o.bytes);
      delta[o.last_reader + 1] -= static_cast<std::int64_t>(o.bytes);
    }
  }
  std::int64_t running = 0;
  for (std::size_t i = 1; i <= N; ++i) {
    running += delta[i];
    bytes[i] = static_cast<std::uint64_t>(running);
    cut[i] = static_cast<std::uint64_t>(static_cast<double>(bytes[i]) / ipu.inter_ipu_bytes_per_cycle) + ipu.inter_ipu_latency_cycles;
  }
  std::uint64_t const cap = static_cast<std::uint64_t>(ipu.total_bytes() / 2);
  PipelineSolution best;
  std::uint64_t best_score = std::numeric_limits<std::uint64_t>::max();
  bool const memory = config.priority == PipelineConfig::Priority::memory;
  std::vector<std::uint64_t> const zeros(N + 1, 0);
  for (int pass = 0; pass < 2 && best.first_nodes.empty() && !(memory && pass == 1); ++pass) {  // capped, else not
    for (std::size_t K = lo; K <= hi; ++K) {
      std::uint64_t value = 0;
      // memory: balance the parameters as the cost (no transfers); cycle: cycles and transfers, parameters capped.
      std::vector<std::size_t> const s = memory ? balanced_split(params, zeros, zeros, K, cap, false, value)
                                                : balanced_split(cycles, params, cut, K, cap, pass == 0, value);
      if (s.empty()) continue;
      std::uint64_t score = 0;
      if (memory) {
        if (value > cap) continue;
        score = static_cast<std::uint64_t>(K);  // the fewest IPUs that fit (the first K that does)
        if (!best.first_nodes.empty()) continue;
      } else {
        score = (micro_batches + K - 1) * (value + ipu.inter_ipu_sync_cycles);
        if (score >= best_score) continue;
      }
      best_score = score;
      best = PipelineSolution{};
      best.first_nodes = s;
    }
  }
  if (best.first_nodes.empty())  // memory, and no count fits: the most IPUs, balanced
    for (std::size_t K = hi; K >= lo && best.first_nodes.empty(); --K) {
      std::uint64_t value = 0;
      best.first_nodes = balanced_split(params, zeros, zeros, K, cap, false, value);
    }
  best.model = m.name;
  best.nodes = N;
  best.micro_batches = micro_batches;
  best.priority = config.priority;
  std::size_t const K = best.first_nodes.size();
  std::uint64_t slowest = 0, dearest = 0;
  for (std::size_t k = 0; k < K; ++k) {
    std::size_t const a = best.first_nodes[k], b = k + 1 < K ? best.first_nodes[k + 1] : N;
    best.first_node_names.push_back(m.nodes[a].name);
    std::uint64_t c = 0, p = 0;
    for (std::size_t i = a; i < b; ++i) c += cycles[i], p += params[i];
    best.stage_cycles.push_back(c);
    best.stage_parameter_bytes.push_back(p);
    slowest = std::max(slowest, c);
    if (k > 0) best.transfer_bytes.push_back(bytes[a]), dearest = std::max(dearest, cut[a]);
  }
  best.estimated_run_cycles = (micro_batches + K - 1) * (slowest + dearest + (K > 1 ? ipu.inter_ipu_sync_cycles : 0));
  return best;
}

}  // namespace tilebsp::onnx
