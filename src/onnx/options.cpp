// onnx::RunOptions: the tool's options by name, from JSON config files, and the model's options written back.
#include "json.hpp"

#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/onnx/options.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

namespace tilebsp::onnx {

using detail::Json;
using detail::JsonReader;

namespace {

/// "--batch_size" and "batch-size" alike: no leading dashes, dashes for underscores.
std::string canonical(std::string_view name) {
  std::string n(name);
  while (!n.empty() && n[0] == '-') n.erase(0, 1);
  std::replace(n.begin(), n.end(), '_', '-');
  return n;
}

std::int64_t integer(std::string const& name, std::string const& v, std::int64_t least) {
  std::int64_t x = 0;
  auto const [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < least || x > (std::int64_t{1} << 31))
    throw option_error("--" + name + " must be an integer in [" + std::to_string(least) + ", 2^31], got '" + v + "'");
  return x;
}

double proportion(std::string const& name, std::string const& v) {
  char* end = nullptr;
  double const x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(x >= 0 && x <= 1))
    throw option_error("--" + name + " must be a number in [0, 1], got '" + v + "'");
  return x;
}

ElementType partials(std::string const& name, std::string const& v) {
  if (v == "float" || v == "FLOAT" || v == "f32") return ElementType::f32;
  if (v == "half" || v == "HALF" || v == "f16") return ElementType::f16;
  throw option_error("--" + name + " must be float or half, got '" + v + "'");
}

std::vector<std::string> comma_list(std::string const& v) {
  std::vector<std::string> r;
  std::size_t start = 0;
  while (start <= v.size()) {
    std::size_t const comma = v.find(',', start);
    std::string const item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) r.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

}  // namespace

void set_option(RunOptions& o, std::string_view raw, std::string const& v) {
  std::string const name = canonical(raw);
  if (name == "batch-size") o.import.batch_size = integer(name, v, 1);
  else if (name == "batch-per-step") o.batch_per_step = integer(name, v, 1);
  else if (name == "iterations") o.iterations = static_cast<int>(integer(name, v, 1));
  else if (name == "precision-mode") {
    if (v == "FP32" || v == "fp32") o.import.precision = Precision::fp32;
    else if (v == "FP16" || v == "fp16") o.import.precision = Precision::fp16;
    else throw option_error("--precision-mode must be FP32 or FP16, got '" + v + "'");
  } else if (name == "matmul-amp") o.import.matmul_amp = proportion(name, v);
  else if (name == "conv-amp") o.import.conv_amp = proportion(name, v);
  else if (name == "matmul-partial-type") o.import.matmul_partials = partials(name, v);
  else if (name == "conv-partial-type") o.import.conv_partials = partials(name, v);
  else if (name == "num-ipus") o.num_ipus = static_cast<std::size_t>(integer(name, v, 1));
  else if (name == "manual-sharding") o.import.manual_sharding = comma_list(v);
  else if (name == "precision-conversion-excluded-nodes") o.import.precision_conversion_excluded_nodes = comma_list(v);
  else if (name == "host-threads") o.host_threads = static_cast<std::size_t>(integer(name, v, 0));
  else if (name == "reuse-host-memory") {
    if (v != "true" && v != "false") throw option_error("--reuse-host-memory must be true or false, got '" + v + "'");
    o.reuse_host_memory = v == "true";
  }
  else if (name == "executable-cache") o.executable_cache = v;
  else if (name == "report") o.report = v;
  else if (name == "outdir") o.outdir = v;
  else if (name == "inputs") o.inputs.push_back(v);
  else if (name == "pipeline-cfg") {  // a JSON object, or a file holding one
    auto const first = v.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && v[first] == '{') {
      o.pipeline = parse_pipeline_config(v, "--pipeline-cfg");
    } else {
      std::ifstream f(v, std::ios::binary);
      if (!f) throw option_error("--pipeline-cfg: cannot read '" + v + "' (give a JSON object or a file holding one)");
      std::ostringstream text;
      text << f.rdbuf();
      o.pipeline = parse_pipeline_config(text.str(), v);
    }
  }
  else if (name == "replicas") o.replicas = static_cast<std::size_t>(integer(name, v, 1));
  else if (name == "excluded-nodes") o.import.excluded_nodes = comma_list(v);
  else {
    throw option_error("unknown option --" + name);
  }
}

void apply_config(RunOptions& o, std::string_view json, std::string const& source) {
  Json const doc = JsonReader(json, source).document();
  if (doc.kind != Json::Kind::object) throw option_error(source + ": a config file holds one JSON object of options");
  std::vector<std::string> names;  // canonical: "batch_size" and "batch-size" name one option
  for (std::size_t k = 0; k < doc.items.size(); ++k) {
    std::string const& key = doc.keys[k];
    Json const& value = doc.items[k];
    std::string const name = canonical(key);
    for (std::size_t j = 0; j < names.size(); ++j)
      if (names[j] == name)
        throw option_error(source + ": \"" + key + "\" and \"" + doc.keys[j] + "\" name one option, --" + name + "; give it once");
    names.push_back(name);
    try {
      if (name == "config-file") throw option_error("a config file cannot name another");
      if (name == "pipeline-cfg") {  // an object, or its text in a string
        if (value.kind == Json::Kind::object) o.pipeline = parse_pipeline_config(json.substr(value.begin, value.end - value.begin), source);
        else if (value.kind == Json::Kind::string) o.pipeline = parse_pipeline_config(value.text, source);
        else throw option_error("takes a JSON object");
        continue;
      }
      switch (value.kind) {
        case Json::Kind::array: {
          std::vector<std::string> items;
          for (auto const& item : value.items) {
            if (item.kind == Json::Kind::array || item.kind == Json::Kind::object || item.kind == Json::Kind::null)
              throw option_error("the items of a list must be strings or numbers");
            items.push_back(item.text);
          }
          if (name == "inputs") {
            for (auto const& i : items) set_option(o, name, i);
          } else if (name == "manual-sharding") {
            o.import.manual_sharding = items;
          } else if (name == "excluded-nodes") {
            o.import.excluded_nodes = items;
          } else if (name == "precision-conversion-excluded-nodes") {
            o.import.precision_conversion_excluded_nodes = items;
          } else {
            throw option_error("takes one value, not a list");
          }
          break;
        }
        case Json::Kind::object: throw option_error("takes a value, not an object");
        case Json::Kind::null: throw option_error("takes a value, not null");
        default: set_option(o, name, value.text);
      }
    } catch (option_error const& e) {
      throw option_error(source + ": \"" + key + "\": " + e.what());
    }
  }
}

std::string model_config(RunOptions const& o) {
  using core::detail::json_escape;
  auto const list = [](std::vector<std::string> const& v) {
    std::string r = "[";
    for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", \"" : "\"") + json_escape(v[i]) + "\"";
    return r + "]";
  };
  auto const number = [](double x) {
    char buf[32];
    auto const [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, ec == std::errc() ? end : buf);
  };
  std::string r = "{\n";
  if (o.import.batch_size > 0) r += "  \"batch_size\": " + std::to_string(o.import.batch_size) + ",\n";
  r += "  \"batch_per_step\": " + std::to_string(o.batch_per_step) + ",\n";
  r += std::string("  \"precision_mode\": \"") + (o.import.precision == Precision::fp16 ? "FP16" : "FP32") + "\",\n";
  r += "  \"matmul_amp\": " + number(o.import.matmul_amp) + ",\n";
  r += "  \"conv_amp\": " + number(o.import.conv_amp) + ",\n";
  r += std::string("  \"matmul_partial_type\": \"") + (o.import.matmul_partials == ElementType::f16 ? "half" : "float") + "\",\n";
  r += std::string("  \"conv_partial_type\": \"") + (o.import.conv_partials == ElementType::f16 ? "half" : "float") + "\",\n";
  r += "  \"num_ipus\": " + std::to_string(o.num_ipus) + ",\n";
  r += "  \"replicas\": " + std::to_string(o.replicas) + ",\n";
  if (o.pipeline) r += "  \"pipeline_cfg\": " + to_json(*o.pipeline) + ",\n";
  r += "  \"manual_sharding\": " + list(o.import.manual_sharding) + ",\n";
  r += "  \"precision_conversion_excluded_nodes\": " + list(o.import.precision_conversion_excluded_nodes) + ",\n";
  r += "  \"excluded_nodes\": " + list(o.import.excluded_nodes) + "\n";
  return r + "}\n";
}

}  // namespace tilebsp::onnx
