// tilebsp::compiled: the definitions of Tensor, Graph, map_linearly, the cache sizes, vertex records and
// add_vertices' records, compiled once for every target that links the library, and the process's log state and
// warning handler (core/log_impl.hpp, core/warning_impl.hpp), which the kernel sets share.
#include <tilebsp/core/caches_impl.hpp>
#include <tilebsp/core/graph_impl.hpp>
#include <tilebsp/core/log_impl.hpp>
#include <tilebsp/core/mapping_impl.hpp>
#include <tilebsp/core/tensor_impl.hpp>
#include <tilebsp/core/vertex_record_impl.hpp>
#include <tilebsp/core/warning_impl.hpp>
#include <tilebsp/vertex/add_vertex_impl.hpp>
