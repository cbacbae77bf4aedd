// tilebsp version: the single source that CMake reads.
#pragma once

#define TILEBSP_VERSION_MAJOR 0
#define TILEBSP_VERSION_MINOR 1
#define TILEBSP_VERSION_PATCH 0

namespace tilebsp {
/// Library version as "major.minor.patch".
inline constexpr char const* version = "0.1.0";
}  // namespace tilebsp
