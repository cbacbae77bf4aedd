// tilebsp: the umbrella header; it only includes. It holds the public API (core, vertices, programs, the engine,
// expressions, operators and their plans); the kernels (<tilebsp/simd/...>) and an operator's vertices
// (<tilebsp/ops/<op>_impl.hpp>) are included on their own by code that uses them directly.
#pragma once

#include <tilebsp/config.hpp>

#include <tilebsp/core/caches.hpp>
#include <tilebsp/core/checked.hpp>
#include <tilebsp/core/error.hpp>
#include <tilebsp/core/graph.hpp>
#include <tilebsp/core/half.hpp>
#include <tilebsp/core/mapping.hpp>
#include <tilebsp/core/shape.hpp>
#include <tilebsp/core/target.hpp>
#include <tilebsp/core/tensor.hpp>
#include <tilebsp/core/tile_mapping.hpp>
#include <tilebsp/core/types.hpp>
#include <tilebsp/core/log.hpp>
#include <tilebsp/core/warning.hpp>

#include <tilebsp/vertex/add_vertex.hpp>
#include <tilebsp/vertex/fields.hpp>
#include <tilebsp/vertex/reflect.hpp>

#include <tilebsp/program/all_reduce.hpp>
#include <tilebsp/program/compile.hpp>
#include <tilebsp/program/host_context.hpp>
#include <tilebsp/program/host_path.hpp>
#include <tilebsp/program/host_task.hpp>
#include <tilebsp/program/pipeline.hpp>
#include <tilebsp/program/programs.hpp>

#include <tilebsp/exec/communicator.hpp>
#include <tilebsp/exec/engine.hpp>
#include <tilebsp/exec/profile.hpp>

#include <tilebsp/expr/eval.hpp>
#include <tilebsp/expr/expr.hpp>

#include <tilebsp/ops/collective.hpp>
#include <tilebsp/ops/conv.hpp>
#include <tilebsp/ops/kernels.hpp>
#include <tilebsp/ops/loss.hpp>
#include <tilebsp/ops/map.hpp>
#include <tilebsp/ops/matmul.hpp>
#include <tilebsp/ops/pool.hpp>
#include <tilebsp/ops/reduce.hpp>
#include <tilebsp/report/report.hpp>
