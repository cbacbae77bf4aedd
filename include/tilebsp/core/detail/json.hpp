// JSON for options and reports: a small reader for option strings (TILEBSP_ENGINE_OPTIONS: one object of keys
// and scalar values) and the escaping of strings the profile writes.
#pragma once

#include <tilebsp/core/error.hpp>

#include <cctype>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tilebsp::core::detail {

/// `s` as the body of a JSON string (quotes and backslashes escaped, control characters dropped).
inline std::string json_escape(std::string const& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;
    r += c;
  }
  return r;
}
/// A scalar value of a JSON object: its text (strings unescaped; numbers, true, false and null as written).
struct JsonScalar {
  enum class Kind { string, number, boolean, null } kind = Kind::string;
  std::string text;
};

/// Reads the JSON string at s[i] into its unescaped text (\uXXXX as UTF-8), leaving i after its
/// closing quote. At the first problem calls fail(why) with i where it is; fail must throw. The one string reader
/// of tilebsp's JSON readers (this file's, the ONNX tool's).
template <class Fail>
std::string read_json_string(std::string_view s, std::size_t& i, Fail const& fail) {
  std::string r;
  if (i >= s.size() || s[i] != '"') fail("expected a string in double quotes");
  for (++i;; ++i) {
    if (i >= s.size()) fail("the string does not end");
    char c = s[i];
    if (c == '"') break;
    if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
    if (c == '\\') {
      if (++i >= s.size()) fail("the string does not end");
      switch (s[i]) {
        case '"': case '\\': case '/': c = s[i]; break;
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'u': {
          if (i + 4 >= s.size()) fail("a \\u escape needs four hex digits");
          unsigned v = 0;
          for (int k = 1; k <= 4; ++k) {
            char const h = s[i + static_cast<std::size_t>(k)];
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail("a \\u escape needs four hex digits");
            v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
          }
          i += 4;
          if (v < 0x80) {
            r += static_cast<char>(v);
          } else if (v < 0x800) {
            r += static_cast<char>(0xC0 | (v >> 6)), r += static_cast<char>(0x80 | (v & 0x3F));
          } else {
            r += static_cast<char>(0xE0 | (v >> 12)), r += static_cast<char>(0x80 | ((v >> 6) & 0x3F));
            r += static_cast<char>(0x80 | (v & 0x3F));
          }
          continue;
        }
        default: fail(std::string("an unknown escape \\") + s[i]);
      }
    }
    r += c;
  }
  ++i;
  return r;
}

/// Parses `s`, which must be one JSON object whose values are strings, numbers, booleans or null, into its
/// (key, value) pairs in order, no key twice. Throws option_error naming `what` and the offset of the first problem.
inline std::vector<std::pair<std::string, JsonScalar>> parse_json_object(std::string_view s, std::string const& what) {
  std::size_t i = 0;
  auto const fail = [&](std::string const& why) -> void {
    throw option_error(what + ": not a valid JSON object of options at offset " + std::to_string(i) + ": " + why);
  };
  auto const space = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  };
  auto const string = [&] { return read_json_string(s, i, fail); };
  std::vector<std::pair<std::string, JsonScalar>> out;
  space();
  if (i >= s.size() || s[i] != '{') fail("expected '{'");
  ++i;
  space();
  if (i < s.size() && s[i] == '}') {
    ++i;
  } else {
    for (;;) {
      space();
      std::size_t const at = i;
      std::string key = string();
      for (auto const& [k, _] : out)  // a key given twice has no one meaning: refused
        if (k == key) {
          i = at;
          fail("the key \"" + key + "\" appears twice");
        }
      space();
      if (i >= s.size() || s[i] != ':') fail("expected ':' after the key \"" + key + "\"");
      ++i;
      space();
      JsonScalar v;
      if (i < s.size() && s[i] == '"') {
        v.text = string();
      } else if (i < s.size() && (s[i] == '{' || s[i] == '[')) {
        fail("the value of \"" + key + "\" must be a string, number, true, false or null");
      } else {
        std::size_t const b = i;
        while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '+' || s[i] == '.')) ++i;
        v.text = std::string(s.substr(b, i - b));
        if (v.text == "true" || v.text == "false") {
          v.kind = JsonScalar::Kind::boolean;
        } else if (v.text == "null") {
          v.kind = JsonScalar::Kind::null;
        } else {
          std::size_t used = 0;
          try {
            (void)std::stod(v.text, &used);
          } catch (...) {
            used = 0;
          }
          if (v.text.empty() || used != v.text.size()) {
            i = b;
            fail("the value of \"" + key + "\" is not a JSON value");
          }
          v.kind = JsonScalar::Kind::number;
        }
      }
      out.emplace_back(std::move(key), std::move(v));
      space();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == '}') {
        ++i;
        break;
      }
      fail("expected ',' or '}'");
    }
  }
  space();
  if (i != s.size()) fail("unexpected text after the object");
  return out;
}

}  // namespace tilebsp::core::detail
