// Checks that two executables hold the same schedule: compute-set and exchange plans, cycle estimates and memory.
#pragma once

#include <tilebsp/tilebsp.hpp>

#include <doctest/doctest.h>

namespace tbt {

inline void check_same_transfers(std::vector<tilebsp::plan::detail::Transfer> const& a,
                                 std::vector<tilebsp::plan::detail::Transfer> const& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].src_var == b[i].src_var);
    CHECK(a[i].dst_var == b[i].dst_var);
    CHECK(a[i].src_start == b[i].src_start);
    CHECK(a[i].src_stride == b[i].src_stride);
    CHECK(a[i].dst_start == b[i].dst_start);
    CHECK(a[i].dst_stride == b[i].dst_stride);
    CHECK(a[i].count == b[i].count);
    CHECK(a[i].src_tile == b[i].src_tile);
    CHECK(a[i].dst_tile == b[i].dst_tile);
    CHECK(a[i].elem_bytes == b[i].elem_bytes);
  }
}

inline void check_same_executable(tilebsp::Executable const& one, tilebsp::Executable const& other) {
  auto const& x = one.schedule();
  auto const& y = other.schedule();
  REQUIRE(x.compute_sets.size() == y.compute_sets.size());
  for (std::size_t i = 0; i < x.compute_sets.size(); ++i) {
    auto const& p = x.compute_sets[i];
    auto const& q = y.compute_sets[i];
    CHECK(p.id == q.id);
    CHECK(p.cycles == q.cycles);
    CHECK(p.vars == q.vars);
    CHECK(p.reads == q.reads);
    CHECK(p.writes == q.writes);
    CHECK(p.full_writes == q.full_writes);
    CHECK(p.fetch_cycles == q.fetch_cycles);
    CHECK(p.fetch_bytes == q.fetch_bytes);
    REQUIRE(p.vertices.size() == q.vertices.size());
    for (std::size_t v = 0; v < p.vertices.size(); ++v) {
      CHECK(p.vertices[v].record == q.vertices[v].record);
      CHECK(p.vertices[v].cycles == q.vertices[v].cycles);
      CHECK(p.vertices[v].supervisor == q.vertices[v].supervisor);
      REQUIRE(p.vertices[v].staging.size() == q.vertices[v].staging.size());
      for (std::size_t s = 0; s < p.vertices[v].staging.size(); ++s) {
        CHECK(p.vertices[v].staging[s].field == q.vertices[v].staging[s].field);
        CHECK(p.vertices[v].staging[s].item == q.vertices[v].staging[s].item);
        CHECK(p.vertices[v].staging[s].elements == q.vertices[v].staging[s].elements);
      }
    }
  }
  REQUIRE(x.exchanges.size() == y.exchanges.size());
  for (std::size_t i = 0; i < x.exchanges.size(); ++i) {
    CHECK(x.exchanges[i].staged == y.exchanges[i].staged);
    CHECK(x.exchanges[i].cycles == y.exchanges[i].cycles);
    CHECK(x.exchanges[i].bytes == y.exchanges[i].bytes);
    CHECK(x.exchanges[i].full_writes == y.exchanges[i].full_writes);
    check_same_transfers(x.exchanges[i].transfers, y.exchanges[i].transfers);
  }
  REQUIRE(x.programs.size() == y.programs.size());
  for (std::size_t p = 0; p < x.programs.size(); ++p) {
    CHECK(x.programs[p].cycles == y.programs[p].cycles);
    REQUIRE(x.programs[p].code.size() == y.programs[p].code.size());
    for (std::size_t pc = 0; pc < x.programs[p].code.size(); ++pc) {
      CHECK(x.programs[p].code[pc].op == y.programs[p].code[pc].op);
      CHECK(x.programs[p].code[pc].a == y.programs[p].code[pc].a);
      CHECK(x.programs[p].code[pc].b == y.programs[p].code[pc].b);
      CHECK(x.programs[p].code[pc].n == y.programs[p].code[pc].n);
    }
  }
  REQUIRE(one.memory().size() == other.memory().size());
  for (std::size_t t = 0; t < one.memory().size(); ++t) {
    CHECK(one.memory()[t].always_live == other.memory()[t].always_live);
    CHECK(one.memory()[t].peak_live == other.memory()[t].peak_live);
    CHECK(one.memory()[t].peak_temporary == other.memory()[t].peak_temporary);
  }
}

}  // namespace tbt
