// A small JSON reader for the tool's options, pipeline configurations and solutions: one value, nested at most 32
// deep, no key twice in one object, scalars kept as text; option_error at the first problem, with its offset.
#pragma once

#include <tilebsp/core/detail/json.hpp>
#include <tilebsp/core/error.hpp>

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tilebsp::onnx::detail {

/// A JSON value: scalars keep their text; arrays and objects their items (objects as key, value pairs).
struct Json {
  enum class Kind { string, number, boolean, null, array, object } kind = Kind::null;
  std::string text;
  std::vector<std::string> keys;  // objects' (arrays: empty)
  std::vector<Json> items;
  /// Where the value lies in the text read: [begin, end).
  std::size_t begin = 0, end = 0;
};

/// A recursive-descent reader of one JSON value, nested at most 32 deep; option_error at the first problem.
class JsonReader {
 public:
  JsonReader(std::string_view s, std::string const& source) : s_(s), source_(source) {}
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
    return core::detail::read_json_string(s_, i_, [this](std::string const& why) { fail(why); });
  }
  Json value(int depth) {
    if (depth > 32) fail("nested more than 32 deep");
    space();
    if (i_ >= s_.size()) fail("expected a value");
    Json v;
    v.begin = i_;
    v = value_at(v, depth);
    v.end = i_;
    return v;
  }
  Json value_at(Json v, int depth) {
    char const c = s_[i_];
    if (c == '"') {
      v.kind = Json::Kind::string;
      v.text = string();
    } else if (c == '{' || c == '[') {
      bool const object = c == '{';
      v.kind = object ? Json::Kind::object : Json::Kind::array;
      ++i_;
      if (take(object ? '}' : ']')) return v;
      std::unordered_set<std::string> seen;  // objects' keys so far
      do {
        std::string key;
        if (object) {
          std::size_t const at = (space(), i_);
          key = string();
          // A key given twice has no one meaning (the first? the last? both?): refused.
          if (!seen.insert(key).second) {
            i_ = at;
            fail("the key \"" + core::detail::json_escape(key) + "\" appears twice in one object");
          }
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

}  // namespace tilebsp::onnx::detail
