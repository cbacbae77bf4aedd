// Pipelined ONNX models: pipeline_cfg read and written, and the solution files of the auto converter (written, and
// read back by `load` for the model they were made for). Apart from pipeline.cpp: these need no graph.
#include "ir.hpp"
#include "json.hpp"

#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/onnx/pipeline.hpp>

#include <charconv>
#include <string>
#include <vector>

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
