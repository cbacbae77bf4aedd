// The cost model applied to a schedule: each step's estimated IPU cycles (compute sets, exchanges, syncs,
// collectives, pipelines), and the cycles of a run of a program. Its figures come from plan/cost.hpp; DESIGN.md's
// performance model and docs/01 say where they come from.
#pragma once

#include <tilebsp/config.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/program/schedule.hpp>
#include <tilebsp/program/tile_memory.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace tilebsp::program::detail {
using core::detail::GraphImpl;
using core::detail::VertexRecord;

/// The IPUs holding elements of `x`.
TILEBSP_INLINE std::vector<std::uint32_t> ipus_of(GraphImpl const& g, Tensor const& x);

TILEBSP_INLINE void estimate_cycles(Schedule& s);

/// Estimated cycles of a cross-replica all-reduce of `bytes` per replica over `replicas` replicas (0 for one).
TILEBSP_INLINE std::uint64_t collective_cycles(Target const& t, std::size_t replicas, std::uint64_t bytes);

/// Estimated cycles of one run of instructions [begin, end) of `p` (repeats multiplied out, conditional steps and
/// host path bodies once, pipeline stages' code left out: the pipeline steps hold their cost).
TILEBSP_INLINE std::uint64_t run_cycles(Schedule const& s, std::size_t program, std::size_t begin, std::size_t end);

}  // namespace tilebsp::program::detail

// Header-only (the default), the definitions follow; a target linking tilebsp::compiled (TILEBSP_COMPILED) gets
// them from the library (src/compile.cpp) instead.
#ifndef TILEBSP_COMPILED
#include <tilebsp/program/estimate_impl.hpp>
#endif
