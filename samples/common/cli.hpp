// samples/common/cli.hpp: command-line values for the samples. A bad value prints "<program>: <why>" and a hint to
// --help on stderr and exits with code 2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>

namespace samples {

class Cli {
 public:
  explicit Cli(std::string program) : program_(std::move(program)) {}

  /// A bad command line: the message, then exit code 2.
  [[noreturn]] void bad(std::string const& why) const {
    std::cerr << program_ << ": " << why << "\n(see " << program_ << " --help)\n";
    std::exit(2);
  }

  /// Walks the command line: --help (or -h) prints `usage` and exits 0; a switch named in `switches` calls
  /// on(flag, ""); any other --flag takes the next argument as its value and calls on(flag, value), which handles
  /// the flags it knows and calls bad() for the others.
  template <class F>
  void parse(int argc, char** argv, char const* usage, std::initializer_list<std::string_view> switches, F&& on) const {
    for (int i = 1; i < argc; ++i) {
      std::string const a = argv[i];
      if (a == "--help" || a == "-h") {
        std::cout << usage;
        std::exit(0);
      }
      if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
        on(a, std::string());
        continue;
      }
      if (a.rfind("--", 0) != 0) bad("unexpected argument '" + a + "'");
      if (i + 1 >= argc) bad(a + " needs a value");
      on(a, std::string(argv[++i]));
    }
  }

  /// The integer `v` given to `flag`, at least `least`.
  std::int64_t integer(std::string const& flag, std::string const& v, std::int64_t least) const {
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (used != v.size() || v.empty()) bad(flag + " needs an integer, got '" + v + "'");
    if (x < least) bad(flag + " must be at least " + std::to_string(least) + ", got " + v);
    return x;
  }

  /// The number `v` given to `flag`, in [lo, hi]; `range` says so in the message ("a number in [0, 1]").
  double number(std::string const& flag, std::string const& v, double lo, double hi, std::string const& range) const {
    std::size_t used = 0;
    double x = lo - 1;
    try {
      x = std::stod(v, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (used != v.size() || v.empty() || !(x >= lo && x <= hi)) bad(flag + " must be " + range + ", got '" + v + "'");
    return x;
  }

 private:
  std::string program_;
};

}  // namespace samples
