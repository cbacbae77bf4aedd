// tilebsp version: the single source that CMake reads.
#pragma once

#define TILEBSP_VERSION_MAJOR 0
#define TILEBSP_VERSION_MINOR 1
#define TILEBSP_VERSION_PATCH 0

namespace tilebsp {
/// Library version as "major.minor.patch".
inline constexpr char const* version = "0.1.0";
}  // namespace tilebsp

/// What tilebsp::compiled's shared library exports (TILEBSP_SHARED_LIBRARY: built with hidden visibility, so that
/// only this is visible): the definitions below, the operators' entry points and the classes a program must share
/// with it (exceptions). Harmless elsewhere.
#if defined(__GNUC__)
#define TILEBSP_API __attribute__((visibility("default")))
#else
#define TILEBSP_API
#endif

/// How the definitions of non-template functions are declared: inline when header-only (the default), plain and
/// exported (TILEBSP_API) in the files of tilebsp::compiled that compile them (TILEBSP_COMPILED: see docs/10).
#ifdef TILEBSP_COMPILED
#define TILEBSP_INLINE TILEBSP_API
#else
#define TILEBSP_INLINE inline
#endif

/// On the in-class declarations of virtual functions defined out of class (in an _impl.hpp): inline when
/// header-only, so that the class has no key function and a file emits its vtable, and every virtual function the
/// vtable names, only where it constructs one; empty for tilebsp::compiled, whose key function puts them in the
/// library once.
#ifdef TILEBSP_COMPILED
#define TILEBSP_INLINE_VIRTUAL
#else
#define TILEBSP_INLINE_VIRTUAL inline
#endif

/// Marks functions that run once per report or per error (the profile's JSON and HTML, step descriptions):
/// compiled for size, which costs less compile time in every file that instantiates the Engine.
#if defined(__GNUC__)
#define TILEBSP_COLD [[gnu::cold]]
#else
#define TILEBSP_COLD
#endif
