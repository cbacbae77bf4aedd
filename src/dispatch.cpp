// tilebsp::compiled: the operators' entry points, each forwarding to the kernels chosen when the program first
// calls one (<tilebsp/ops/kernels.hpp>, docs/11). Built for baseline x86-64 with the rest of the library's front;
// only the chosen set's code ever runs.
#define TILEBSP_KERNELS_FORWARD  // the entry points are defined here, not declared extern
#include <tilebsp/core/error.hpp>
#include <tilebsp/ops/kernels.hpp>

#include <array>
#include <cstdlib>
#include <string>

namespace tilebsp::ops {
namespace detail {
namespace {

struct Level {
  char const* name;
  char const* cpu_feature;      // what __builtin_cpu_supports needs for it; null: every CPU
  char const* cpu_name;         // how an error names it
  KernelTable const* table;     // null: the library was built without it
};

// Highest first. TILEBSP_KERNELS_<LEVEL> names the sets this library was built with (cmake/kernels.cmake).
std::array<Level, 3> levels() noexcept {
  return {{
      {"avx512", "x86-64-v4", "AVX-512 (F, BW, DQ, VL)",
#ifdef TILEBSP_KERNELS_AVX512
       &tilebsp_kernels_avx512
#else
       nullptr
#endif
      },
      {"avx2", "x86-64-v3", "AVX2 with FMA",
#ifdef TILEBSP_KERNELS_AVX2
       &tilebsp_kernels_avx2
#else
       nullptr
#endif
      },
      {"generic", nullptr, "baseline x86-64",
#ifdef TILEBSP_KERNELS_GENERIC
       &tilebsp_kernels_generic
#else
       nullptr
#endif
      },
  }};
}

bool cpu_runs(Level const& l) noexcept {
  if (l.cpu_feature == nullptr) return true;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (std::string_view(l.cpu_feature) == "x86-64-v4") return __builtin_cpu_supports("x86-64-v4");
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;
#endif
}

std::string built_list() {
  std::string s;
  for (Level const& l : levels())
    if (l.table != nullptr) s += (s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

}  // namespace

TILEBSP_API KernelTable const& choose_kernels(char const* cap) {
  auto const all = levels();
  std::size_t first = 0;  // the highest level allowed
  if (cap != nullptr && *cap != '\0') {
    std::string_view const want(cap);
    first = all.size();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (want == all[i].name) first = i;
    if (first == all.size())
      throw option_error("TILEBSP_ISA=" + std::string(want) +
                         ": not an instruction-set level; expected avx512, avx2 or generic");
    if (!cpu_runs(all[first]))
      throw option_error("TILEBSP_ISA=" + std::string(want) + ": this CPU does not run " + all[first].cpu_name +
                         " kernels; ask for a lower level (avx2 or generic) or unset it");
  }
  for (std::size_t i = first; i < all.size(); ++i) {
    Level const& l = all[i];
    if (l.table == nullptr || !cpu_runs(l)) continue;
    if (l.table->size != sizeof(KernelTable))
      throw option_error(std::string("tilebsp::compiled: the ") + l.name +
                         " kernels were built from other headers than the library's entry points; rebuild the library");
    return *l.table;
  }
  throw option_error(std::string("tilebsp::compiled holds kernels for ") + built_list() + " only, and " +
                     (first == 0 ? std::string("this CPU runs none of them")
                                 : "none at or below TILEBSP_ISA=" + std::string(cap) + " that this CPU runs") +
                     "; rebuild it with TILEBSP_KERNEL_ISAS including generic");
}

TILEBSP_API KernelTable const& kernels() {
  static KernelTable const& chosen = choose_kernels(std::getenv("TILEBSP_ISA"));
  return chosen;
}

}  // namespace detail

TILEBSP_API std::string_view kernels_level() { return detail::kernels().level; }
TILEBSP_API std::string_view kernels_isa() { return detail::kernels().isa; }

#define TILEBSP_DETAIL_FORWARD(R, NAME, PARAMS) \
  template <>                                   \
  TILEBSP_API R NAME TILEBSP_DETAIL_NAMED PARAMS { \
    return detail::kernels().NAME TILEBSP_DETAIL_ARGS PARAMS; \
  }
TILEBSP_OPS_ALL_INSTANCES(TILEBSP_DETAIL_FORWARD)
#undef TILEBSP_DETAIL_FORWARD

}  // namespace tilebsp::ops
