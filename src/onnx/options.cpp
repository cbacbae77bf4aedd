// onnx::RunOptions: the tool's options by name, from JSON config files, and the model's options written back.
#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/onnx/options.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tilebsp::onnx {

namespace {

/// A JSON value: scalars keep their text; arrays and objects their items (objects as key, value pairs).
struct Json {
  enum class Kind { string, number, boolean, null, array, object } kind = Kind::null;
  std::string text;
  std::vector<std::string> keys;  // objects' (arrays: empty)
  std::vector<Json> items;
};

/// A recursive-descent reader of one JSON value, nested at most 32 deep; option_error at the first problem.
class Reader {
 public:
  Reader(std::string_view s, std::string const& source) : s_(s), source_(source) {}
  Json document() {
    Json v = value(0);
    space();
    if (i_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  std::string_view s_;
  std::string const& source_;
  std::size_t i_ = 0;

  [[noreturn]] void fail(std::string const& why) const {
    throw option_error(source_ + ": not valid JSON at offset " + std::to_string(i_) + ": " + why);
  }
  void space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string string() {
    space();
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string in double quotes");
    std::string r;
    for (++i_;; ++i_) {
      if (i_ >= s_.size()) fail("the string does not end");
      char c = s_[i_];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c == '\\') {
        if (++i_ >= s_.size()) fail("the string does not end");
        switch (s_[i_]) {
          case '"': case '\\': case '/': c = s_[i_]; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          default: fail("an escape this reader does not take (\\u included)");
        }
      }
      r += c;
    }
    ++i_;
    return r;
  }
  Json value(int depth) {
    if (depth > 32) fail("nested more than 32 deep");
    space();
    if (i_ >= s_.size()) fail("expected a value");
    Json v;
    char const c = s_[i_];
    if (c == '"') {
      v.kind = Json::Kind::string;
      v.text = string();
    } else if (c == '{' || c == '[') {
      bool const object = c == '{';
      v.kind = object ? Json::Kind::object : Json::Kind::array;
      ++i_;
      if (take(object ? '}' : ']')) return v;
      do {
        std::string key;
        if (object) {
          key = string();
          if (!take(':')) fail("expected ':' after a key");
        }
        v.keys.push_back(std::move(key));
        v.items.push_back(value(depth + 1));
      } while (take(','));
      if (!take(object ? '}' : ']')) fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
    } else {
      std::size_t const start = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' || s_[i_] == '.'))
        ++i_;
      v.text = std::string(s_.substr(start, i_ - start));
      if (v.text == "true" || v.text == "false") v.kind = Json::Kind::boolean;
      else if (v.text == "null") v.kind = Json::Kind::null;
      else if (!v.text.empty() && (std::isdigit(static_cast<unsigned char>(v.text[0])) || v.text[0] == '-')) v.kind = Json::Kind::number;
      else fail("expected a value");
    }
    return v;
  }
};

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
  else if (name == "executable-cache") o.executable_cache = v;
  else if (name == "report") o.report = v;
  else if (name == "outdir") o.outdir = v;
  else if (name == "inputs") o.inputs.push_back(v);
  else if (name == "excluded-nodes" || name == "pipeline-cfg") {
    if (std::find(o.unsupported.begin(), o.unsupported.end(), name) == o.unsupported.end()) o.unsupported.push_back(name);
  } else {
    throw option_error("unknown option --" + name);
  }
}

void apply_config(RunOptions& o, std::string_view json, std::string const& source) {
  Json const doc = Reader(json, source).document();
  if (doc.kind != Json::Kind::object) throw option_error(source + ": a config file holds one JSON object of options");
  for (std::size_t k = 0; k < doc.items.size(); ++k) {
    std::string const& key = doc.keys[k];
    Json const& value = doc.items[k];
    std::string const name = canonical(key);
    try {
      if (name == "config-file") throw option_error("a config file cannot name another");
      if (name == "pipeline-cfg" || name == "excluded-nodes") {
        set_option(o, name, "");
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
  r += "  \"manual_sharding\": " + list(o.import.manual_sharding) + ",\n";
  r += "  \"precision_conversion_excluded_nodes\": " + list(o.import.precision_conversion_excluded_nodes) + "\n";
  return r + "}\n";
}

}  // namespace tilebsp::onnx
