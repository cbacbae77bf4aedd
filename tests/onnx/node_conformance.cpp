// ONNX's backend node tests (../shared/onnx/make_node_tests.py) run through tilebsp::onnx: each case's model is
// imported, compiled and run on its input_*.pb, and every output compared with output_*.pb as ONNX's own runner
// compares (|ours - theirs| <= atol + rtol * |theirs|, rtol 1e-3, atol 1e-7; integers and booleans exactly).
// A case passes, is refused with onnx::unsupported_error or onnx::model_error, or fails (a wrong value, another
// exception). The run fails when any case fails, when a case is refused that tests/onnx/refused.txt does not list,
// or when a listed case passes (the list is kept true). Usage: node_conformance NODE_DIR REFUSED_LIST [FILTER]
// (FILTER: run only the cases whose name contains it; the list is then not checked for passing cases).
#include <tilebsp/onnx/import.hpp>
#include <tilebsp/tilebsp.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace onnx = tilebsp::onnx;

namespace {

struct Outcome {
  enum Kind { pass, refused, fail } kind = pass;
  std::string message;
};

std::vector<onnx::HostTensor> load_set(fs::path const& dir, char const* prefix) {
  std::vector<onnx::HostTensor> r;
  for (std::size_t i = 0;; ++i) {
    fs::path const p = dir / (std::string(prefix) + std::to_string(i) + ".pb");
    if (!fs::exists(p)) return r;
    r.push_back(onnx::load_tensor(p.string()));
  }
}

std::string compare(onnx::HostTensor const& want, onnx::HostTensor const& got, std::string const& name) {
  if (want.shape != got.shape) return name + ": shape differs";
  if (want.size() != got.size()) return name + ": size differs";
  for (std::size_t i = 0; i < want.size(); ++i) {
    double const w = want.value(i), g = got.value(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    bool const ok = onnx::is_floating(want.type) ? (std::abs(w - g) <= 1e-7 + 1e-3 * std::abs(w) || w == g) : w == g;
    if (!ok) return name + "[" + std::to_string(i) + "] = " + std::to_string(g) + ", expected " + std::to_string(w);
  }
  return {};
}

Outcome run_case(fs::path const& dir) {
  Outcome o;
  try {
    onnx::Model const model = onnx::Model::load((dir / "model.onnx").string());
    fs::path const data = dir / "test_data_set_0";
    auto const inputs = load_set(data, "input_");
    auto const outputs = load_set(data, "output_");
    if (inputs.size() != model.inputs().size() || outputs.size() != model.outputs().size())
      return {Outcome::fail, "the test data do not match the model's inputs and outputs"};
    // Values a user would fix at import (weights, shapes, axes, bounds) are inputs of the node tests: fix each
    // input the importer asks to know, and try again.
    onnx::ImportOptions options;
    std::regex const asked(R"(\(input [0-9]+, '([^']*)'\) must be known)");
    tilebsp::Graph g{tilebsp::targets::tiny(16, 1 << 20)};
    tilebsp::Sequence prog;
    onnx::Imported imported;
    for (;;) {
      try {
        g = tilebsp::Graph{tilebsp::targets::tiny(16, 1 << 20)};
        prog = tilebsp::Sequence{};
        imported = onnx::import(g, prog, model, options);
        break;
      } catch (onnx::unsupported_error const& e) {
        std::smatch m;
        std::string const what = e.what();
        if (!std::regex_search(what, m, asked)) throw;
        auto const& ins = model.inputs();
        auto const it = std::find_if(ins.begin(), ins.end(), [&](onnx::ValueInfo const& v) { return v.name == m[1].str(); });
        if (it == ins.end() || options.constant_inputs.contains(it->name)) throw;
        options.constant_inputs[it->name] = inputs[static_cast<std::size_t>(it - ins.begin())];
      }
    }
    // Run twice: on the operators' host kernels, and vertex by vertex on the tiles; both must match the reference,
    // and each other bitwise.
    tilebsp::Executable const exe = tilebsp::compile(g, {.allow_out_of_memory = true}, prog);
    std::vector<onnx::HostTensor> first;
    for (bool host_kernels : {true, false}) {
      tilebsp::Engine engine{exe, {.host_threads = 2, .host_kernels = host_kernels}};
      for (std::size_t i = 0, k = 0; i < inputs.size(); ++i) {
        if (options.constant_inputs.contains(model.inputs()[i].name)) continue;
        onnx::write(engine, imported.inputs.at(k++), inputs[i]);
      }
      engine.run();
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        onnx::HostTensor const got = onnx::read(engine, imported.outputs.at(i));
        std::string const problem = compare(outputs[i], got, imported.outputs[i].name);
        if (!problem.empty()) return {Outcome::fail, problem + (host_kernels ? "" : " (on the tiles)")};
        if (host_kernels) first.push_back(got);
        else if (got.floats != first[i].floats || got.ints != first[i].ints)
          return {Outcome::fail, imported.outputs[i].name + ": the tiles' result differs from the host kernels'"};
      }
    }
  } catch (onnx::unsupported_error const& e) {
    return {Outcome::refused, e.what()};
  } catch (onnx::model_error const& e) {
    return {Outcome::refused, e.what()};
  } catch (std::exception const& e) {
    return {Outcome::fail, std::string("exception: ") + e.what()};
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: node_conformance NODE_DIR REFUSED_LIST [FILTER]\n";
    return 2;
  }
  fs::path const root(argv[1]);
  std::string const filter = argc > 3 ? argv[3] : "";
  std::set<std::string> listed;
  {
    std::ifstream f(argv[2]);
    for (std::string line; std::getline(f, line);)
      if (!line.empty() && line[0] != '#') listed.insert(line.substr(0, line.find(' ')));
  }
  std::vector<fs::path> cases;
  for (auto const& e : fs::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  if (cases.empty()) {
    std::cerr << "no node tests under " << root << "\n";
    return 2;
  }
  std::size_t passed = 0, refused = 0, failed = 0, problems = 0;
  for (auto const& c : cases) {
    std::string const name = c.filename().string();
    Outcome const o = run_case(c);
    bool const is_listed = listed.contains(name);
    switch (o.kind) {
      case Outcome::pass:
        ++passed;
        std::cout << "PASS    " << name << "\n";
        if (is_listed && filter.empty()) {
          std::cout << "  listed as refused in the list, but passes: remove it\n";
          ++problems;
        }
        break;
      case Outcome::refused:
        ++refused;
        std::cout << "REFUSED " << name << ": " << o.message << "\n";
        if (!is_listed) {
          std::cout << "  not in the list of refused cases\n";
          ++problems;
        }
        break;
      case Outcome::fail:
        ++failed;
        ++problems;
        std::cout << "FAIL    " << name << ": " << o.message << "\n";
        break;
    }
  }
  std::cout << passed << " passed, " << refused << " refused, " << failed << " failed of " << cases.size() << "\n";
  return problems == 0 ? 0 : 1;
}
