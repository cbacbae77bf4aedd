// Pipelined ONNX models: pipeline_cfg read and written, the nodes' costs measured by building each on one IPU, the
// balanced split (`auto`) and its solution file (`load`).
#include "importer.hpp"
#include "json.hpp"

#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/onnx/pipeline.hpp>
#include <tilebsp/program/compile.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

namespace tilebsp::onnx {

using detail::Json;
using detail::JsonReader;

namespace {

std::size_t count_of(Json const& v, std::string const& key, std::string const& source, std::size_t least) {
  std::size_t x = 0;
  auto const [end, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), x);
  if (v.kind != Json::Kind::number || ec != std::errc() || end != v.text.data() + v.text.size() || x < least ||
      x > (std::size_t{1} << 31))
    throw option_error(source + ": \"" + key + "\" must be an integer of at least " + std::to_string(least) + ", got '" + v.text + "'");
  return x;
}

std::string text_of(Json const& v, std::string const& key, std::string const& source) {
  if (v.kind != Json::Kind::string) throw option_error(source + ": \"" + key + "\" must be a string");
  return v.text;
}

std::vector<std::string> strings_of(Json const& v, std::string const& key, std::string const& source) {
  if (v.kind != Json::Kind::array) throw option_error(source + ": \"" + key + "\" must be an array of strings");
  std::vector<std::string> r;
  for (auto const& item : v.items) r.push_back(text_of(item, key, source));
  return r;
}

char const* priority_name(PipelineConfig::Priority p) { return p == PipelineConfig::Priority::memory ? "memory" : "cycle"; }

}  // namespace

PipelineConfig parse_pipeline_config(std::string_view json, std::string const& source) {
  Json const doc = JsonReader(json, source).document();
  if (doc.kind != Json::Kind::object) throw option_error(source + ": pipeline_cfg must be a JSON object");
  PipelineConfig c;
  bool converter = false;
  for (std::size_t k = 0; k < doc.items.size(); ++k) {
    std::string const& key = doc.keys[k];
    Json const& v = doc.items[k];
    if (key == "converter") {
      std::string const x = text_of(v, key, source);
      if (x == "auto") c.converter = PipelineConfig::Converter::automatic;
      else if (x == "manual") c.converter = PipelineConfig::Converter::manual;
      else if (x == "load") c.converter = PipelineConfig::Converter::load;
      else throw option_error(source + ": \"converter\" must be auto, manual or load, got '" + x + "'");
      converter = true;
    } else if (key == "priority") {
      std::string const x = text_of(v, key, source);
      if (x == "cycle") c.priority = PipelineConfig::Priority::cycle;
      else if (x == "memory") c.priority = PipelineConfig::Priority::memory;
      else throw option_error(source + ": \"priority\" must be cycle or memory, got '" + x + "'");
    } else if (key == "min_ipu_quantity") {
      c.min_ipu_quantity = count_of(v, key, source, 1);
    } else if (key == "max_ipu_quantity") {
      c.max_ipu_quantity = count_of(v, key, source, 1);
    } else if (key == "solution_dir") {
      c.solution_dir = text_of(v, key, source);
    } else if (key == "solution_path") {
      c.solution_path = text_of(v, key, source);
    } else if (key == "manual_pipeline_config") {
      c.manual_pipeline_config = strings_of(v, key, source);
    } else if (key == "fine_tune_iterations" || key == "ipu_model" || key == "profiling_root_dir") {
      throw option_error(source + ": \"" + key + "\" (ipu_saved_model_cli's profiling of candidate splits on hardware) does not "
                         "apply: tilebsp balances the stages by its cost model, without running them");
    } else {
      throw option_error(source + ": unknown pipeline_cfg key \"" + key + "\" (converter, priority, min_ipu_quantity, "
                         "max_ipu_quantity, solution_dir, solution_path, manual_pipeline_config)");
    }
  }
  if (!converter) throw option_error(source + ": pipeline_cfg needs a \"converter\": auto, manual or load");
  if (c.min_ipu_quantity > c.max_ipu_quantity)
    throw option_error(source + ": min_ipu_quantity " + std::to_string(c.min_ipu_quantity) + " exceeds max_ipu_quantity " +
                       std::to_string(c.max_ipu_quantity));
  if (c.converter == PipelineConfig::Converter::manual && c.manual_pipeline_config.empty())
    throw option_error(source + ": the manual converter needs \"manual_pipeline_config\": one regular expression per stage");
  if (c.converter == PipelineConfig::Converter::load && c.solution_path.empty())
    throw option_error(source + ": the load converter needs \"solution_path\": a solution written by the auto converter");
  return c;
}

std::string to_json(PipelineConfig const& c) {
  using core::detail::json_escape;
  std::string r = "{\"converter\": \"";
  r += c.converter == PipelineConfig::Converter::automatic ? "auto" : c.converter == PipelineConfig::Converter::manual ? "manual" : "load";
  r += "\"";
  switch (c.converter) {
    case PipelineConfig::Converter::automatic:
      r += std::string(", \"priority\": \"") + priority_name(c.priority) + "\", \"min_ipu_quantity\": " +
           std::to_string(c.min_ipu_quantity) + ", \"max_ipu_quantity\": " + std::to_string(c.max_ipu_quantity);
      if (!c.solution_dir.empty()) r += ", \"solution_dir\": \"" + json_escape(c.solution_dir) + "\"";
      break;
    case PipelineConfig::Converter::manual:
      r += ", \"manual_pipeline_config\": [";
      for (std::size_t i = 0; i < c.manual_pipeline_config.size(); ++i)
        r += (i ? ", \"" : "\"") + json_escape(c.manual_pipeline_config[i]) + "\"";
      r += "]";
      break;
    case PipelineConfig::Converter::load: r += ", \"solution_path\": \"" + json_escape(c.solution_path) + "\""; break;
  }
  return r + "}";
}

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

std::string to_json(PipelineSolution const& s) {
  using core::detail::json_escape;
  std::string r = "{\n  \"model\": \"" + json_escape(s.model) + "\",\n  \"nodes\": " + std::to_string(s.nodes) +
                  ",\n  \"micro_batches\": " + std::to_string(s.micro_batches) + ",\n  \"priority\": \"" +
                  priority_name(s.priority) + "\",\n  \"estimated_run_cycles\": " + std::to_string(s.estimated_run_cycles) +
                  ",\n  \"stages\": [";
  for (std::size_t k = 0; k < s.stages(); ++k) {
    r += (k ? ",\n    " : "\n    ");
    r += "{\"first_node\": " + std::to_string(s.first_nodes[k]) + ", \"first_node_name\": \"" +
         json_escape(k < s.first_node_names.size() ? s.first_node_names[k] : "") + "\"";
    if (k < s.stage_cycles.size()) r += ", \"cycles\": " + std::to_string(s.stage_cycles[k]);
    if (k < s.stage_parameter_bytes.size()) r += ", \"parameter_bytes\": " + std::to_string(s.stage_parameter_bytes[k]);
    if (k > 0 && k - 1 < s.transfer_bytes.size()) r += ", \"received_bytes\": " + std::to_string(s.transfer_bytes[k - 1]);
    r += "}";
  }
  return r + "\n  ]\n}\n";
}

PipelineSolution read_solution(std::string_view json, std::string const& source, Model const& model) {
  auto const& m = model.data();
  Json const doc = JsonReader(json, source).document();
  if (doc.kind != Json::Kind::object) throw option_error(source + ": a pipeline solution is a JSON object");
  PipelineSolution s;
  s.model = m.name;
  bool has_nodes = false, has_stages = false;
  for (std::size_t k = 0; k < doc.items.size(); ++k) {
    std::string const& key = doc.keys[k];
    Json const& v = doc.items[k];
    if (key == "nodes") {
      s.nodes = count_of(v, key, source, 1);
      has_nodes = true;
    } else if (key == "micro_batches") {
      s.micro_batches = count_of(v, key, source, 0);
    } else if (key == "priority") {
      s.priority = text_of(v, key, source) == "memory" ? PipelineConfig::Priority::memory : PipelineConfig::Priority::cycle;
    } else if (key == "stages") {
      if (v.kind != Json::Kind::array || v.items.empty())
        throw option_error(source + ": \"stages\" must be an array of at least one stage");
      for (auto const& st : v.items) {
        if (st.kind != Json::Kind::object) throw option_error(source + ": each stage is an object");
        bool first = false;
        std::string name;
        bool named = false;
        for (std::size_t j = 0; j < st.items.size(); ++j) {
          if (st.keys[j] == "first_node") s.first_nodes.push_back(count_of(st.items[j], "first_node", source, 0)), first = true;
          else if (st.keys[j] == "first_node_name") name = text_of(st.items[j], "first_node_name", source), named = true;
        }
        if (!first) throw option_error(source + ": stage " + std::to_string(s.first_nodes.size()) + " has no \"first_node\"");
        s.first_node_names.push_back(named ? name : m.nodes.size() > s.first_nodes.back() ? m.nodes[s.first_nodes.back()].name : "");
        if (named && s.first_nodes.back() < m.nodes.size() && m.nodes[s.first_nodes.back()].name != name)
          throw option_error(source + ": stage " + std::to_string(s.first_nodes.size() - 1) + " begins at node " +
                             std::to_string(s.first_nodes.back()) + " '" + name + "', but that node of " + m.name + " is '" +
                             m.nodes[s.first_nodes.back()].name + "': the solution was made for another model");
      }
      has_stages = true;
    }
  }
  if (!has_nodes || !has_stages) throw option_error(source + ": a pipeline solution needs \"nodes\" and \"stages\"");
  if (s.nodes != m.nodes.size())
    throw option_error(source + ": the solution is for a model of " + std::to_string(s.nodes) + " nodes, but " + m.name + " has " +
                       std::to_string(m.nodes.size()));
  for (std::size_t k = 0; k < s.first_nodes.size(); ++k)
    if ((k == 0 && s.first_nodes[0] != 0) || (k > 0 && s.first_nodes[k] <= s.first_nodes[k - 1]) || s.first_nodes[k] >= s.nodes)
      throw option_error(source + ": stage " + std::to_string(k) + " begins at node " + std::to_string(s.first_nodes[k]) +
                         "; stage 0 begins at node 0 and each later stage after the one before, within the model's nodes");
  return s;
}

}  // namespace tilebsp::onnx
