# Checks the layer rules of DESIGN.md and docs/10-architecture.md on the headers under include/tilebsp/:
#  1. a layer includes only the layers below it (the table below, one line per layer);
#  2. a layer's internals live in its own namespace, tilebsp::<layer>::detail (no shared tilebsp::detail);
#  3. a layer names another layer's internals (<other>::detail::<name>, outside comments) only where they are one of
#     the contracts below that it is allowed; docs/10, "Contracts between layers", says why each exists;
#  4. an operator includes no other operator's headers but ops/map.hpp and the pairs listed below (what operators
#     share lives in ops/detail/).
# Run: cmake -DSOURCE_DIR=<repo> -P check.cmake. Fails with every violation listed.

cmake_minimum_required(VERSION 3.25)

# layer -> what its headers may include (besides its own folder and config.hpp)
set(allowed_core "")
set(allowed_vertex "core/")
set(allowed_plan "core/;simd/conv_loop.hpp")
set(allowed_program "core/;vertex/;plan/cost.hpp")
set(allowed_exec "core/;vertex/;program/;plan/cost.hpp")
set(allowed_simd "core/half.hpp;core/caches.hpp")
set(allowed_expr "simd/;core/half.hpp;core/types.hpp;core/error.hpp")
set(allowed_ops "core/;vertex/;plan/;program/;simd/;expr/")
set(allowed_report "core/;vertex/;program/;exec/;plan/cost.hpp")
# The ONNX importer's API: graphs, programs and host contexts to build and fill; its operators are in src/onnx/.
set(allowed_onnx "core/;program/")
set(layers core vertex plan program exec simd expr ops report onnx)

# The contracts: internals of one layer that the layers above it read (docs/10, "Contracts between layers").
# core's stored graph: variables, their mappings and element runs, vertex records and their fields
set(contract_graph "core::detail::GraphImpl;core::detail::VertexRecord;core::detail::FieldBinding;core::detail::FieldConnection;core::detail::FieldKind;core::detail::VertexOps;core::detail::Run;core::detail::RowSeries;core::detail::VariableMapping;core::detail::for_each_mapped;core::detail::reads;core::detail::writes;core::detail::max_view_rank;core::detail::Affine;core::detail::group_by_tile;core::detail::operator_kernels;core::detail::distinct_kernels")
# core's vertex hashing and cost estimate (executable cache keys, compute-set plans)
set(contract_vertex_hash "core::detail::Hasher;core::detail::hash_vertex;core::detail::vertex_estimate")
# core's support: the parallel-for of build and compile passes, the JSON reader and writer
set(contract_support "core::detail::parallel_for;core::detail::JsonScalar;core::detail::parse_json_object;core::detail::json_escape")
# plan's cost model: transfers and their cycles, vertex and tile cycles, conv and matmul shapes and the AMP check
set(contract_cost "plan::detail::Transfer;plan::detail::ExchangeLoad;plan::detail::default_vertex_cycles;plan::detail::exchange_cycles;plan::detail::sync_cycles;plan::detail::tile_compute_cycles;plan::detail::macs_per_cycle;plan::detail::sum_partials_cycles;plan::detail::matmul_vertex_cycles;plan::detail::conv_block_macs;plan::detail::conv_problem;plan::detail::source_range;plan::detail::check_amp")
# program's analyses of a schedule that exec repeats: liveness with detail (the profile), the fingerprints (MPI)
set(contract_schedule_analyses "program::detail::account_memory;program::detail::MemoryDetail;program::detail::variable_uses;program::detail::schedule_fingerprint;program::detail::kernels_fingerprint")
# core's cache sizes in force, which simd's kernels size their cache blocks from (never throwing, unlike cache_sizes())
set(contract_caches "core::detail::blocking_cache_sizes")
# simd's scratch buffers that operators size
set(contract_scratch "simd::detail::Scratch;simd::detail::conv_scratch")
# expr's element typing of expressions, which ops::map instantiates
set(contract_expr_types "expr::detail::Inferred;expr::detail::describe;expr::detail::element_of;expr::detail::name_of;expr::detail::vt_of;expr::detail::width")
# exec's auto-report hook, which including the report layer sets
set(contract_report_hook "exec::detail::report_writer")
# operator -> the other operators whose headers it may include (besides ops/map.hpp, which every operator may use:
# add_bias and the host kernels' elementwise steps are maps); what operators share is in ops/detail/ (docs/10)
set(operator_uses_loss reduce)
# ops/kernels.hpp is not an operator: the compiled library's table of every operator's entry points (docs/11)
set(operator_uses_kernels conv loss matmul pool reduce)

# layer -> the contracts it may use
set(contracts_vertex graph vertex_hash support)
set(contracts_program graph vertex_hash support cost)
set(contracts_exec graph support schedule_analyses)
set(contracts_simd caches)
set(contracts_ops graph cost scratch expr_types)
set(contracts_report support report_hook)

set(root ${SOURCE_DIR}/include/tilebsp)
set(problems "")
file(GLOB_RECURSE headers RELATIVE ${root} ${root}/*.hpp)
foreach(h IN LISTS headers)
  if(NOT h MATCHES "^([a-z]+)/")
    continue()  # tilebsp.hpp, config.hpp: the umbrella and the configuration
  endif()
  set(layer ${CMAKE_MATCH_1})
  if(NOT layer IN_LIST layers)
    list(APPEND problems "${h}: folder '${layer}' is not a layer in tests/layers/check.cmake")
    continue()
  endif()
  set(allowed_names "")
  foreach(c IN LISTS contracts_${layer})
    list(APPEND allowed_names ${contract_${c}})
  endforeach()
  file(STRINGS ${root}/${h} code REGEX "::detail::")
  foreach(line IN LISTS code)
    string(REGEX REPLACE "//.*$" "" line "${line}")
    string(REGEX MATCHALL "[a-z]+::detail::[A-Za-z_0-9]+" names "${line}")
    foreach(name IN LISTS names)
      string(REGEX MATCH "^[a-z]+" owner "${name}")
      if(owner STREQUAL layer OR NOT owner IN_LIST layers)
        continue()
      endif()
      if(NOT name IN_LIST allowed_names)
        list(APPEND problems "${h}: layer '${layer}' uses ${name}, not one of the contracts it may use")
      endif()
    endforeach()
  endforeach()
  file(STRINGS ${root}/${h} lines REGEX "^#include <tilebsp/|namespace ")
  foreach(line IN LISTS lines)
    if(line MATCHES "^#include <tilebsp/([^>]+)>")
      set(inc ${CMAKE_MATCH_1})
      # 4. an operator includes no other operator's headers (ops/<op>.hpp, <op>_impl.hpp, <op>/...) but map's and
      # those listed above: ops/conv* nothing of ops/matmul*, for one.
      if(layer STREQUAL "ops" AND h MATCHES "^ops/([a-z0-9]+)(_impl)?[./]" AND inc MATCHES "^ops/([a-z0-9]+)(_impl)?[./]")
        string(REGEX MATCH "^ops/([a-z0-9]+)" _ "${h}")
        set(mine ${CMAKE_MATCH_1})
        string(REGEX MATCH "^ops/([a-z0-9]+)" _ "${inc}")
        set(theirs ${CMAKE_MATCH_1})
        if(NOT theirs STREQUAL mine AND NOT theirs STREQUAL "detail" AND NOT inc STREQUAL "ops/map.hpp"
           AND NOT theirs IN_LIST operator_uses_${mine})
          list(APPEND problems "${h}: operator '${mine}' includes another operator's <tilebsp/${inc}>")
        endif()
      endif()
      if(inc STREQUAL "config.hpp" OR inc MATCHES "^${layer}/")
        continue()
      endif()
      set(ok FALSE)
      foreach(prefix IN LISTS allowed_${layer})
        string(LENGTH "${prefix}" n)
        string(SUBSTRING "${inc}" 0 ${n} head)
        if(head STREQUAL prefix)
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        list(APPEND problems "${h}: layer '${layer}' includes <tilebsp/${inc}>")
      endif()
    elseif(line MATCHES "namespace (tilebsp::)?([a-z_:]*)detail[ {]")
      # tilebsp::<layer>::detail or, nested in namespace tilebsp, <layer>::detail; a bare `detail` only where the
      # file's enclosing namespace is already its layer's (ops, simd, expr, report open tilebsp::<layer> first)
      set(prefix "${CMAKE_MATCH_1}")
      set(path "${CMAKE_MATCH_2}")
      if(path STREQUAL "" AND prefix STREQUAL "tilebsp::")
        list(APPEND problems "${h}: '${line}': internals of '${layer}' belong in tilebsp::${layer}::detail")
      elseif(path STREQUAL "")
        if(NOT layer MATCHES "^(ops|simd|expr|report)$")
          list(APPEND problems "${h}: '${line}': internals of '${layer}' belong in tilebsp::${layer}::detail")
        endif()
      elseif(NOT path STREQUAL "${layer}::")
        list(APPEND problems "${h}: '${line}': internals of '${layer}' belong in tilebsp::${layer}::detail")
      endif()
    endif()
  endforeach()
endforeach()

list(REMOVE_DUPLICATES problems)
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layer rules broken:\n  ${text}")
endif()
list(LENGTH headers n)
message(STATUS "layers: ${n} headers follow the include, namespace and contract rules")
