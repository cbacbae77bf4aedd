// tilebsp::compiled: the definitions of Tensor, Graph and map_linearly, compiled once for every target that links
// the library, and the process's log state and warning handler (TILEBSP_PROCESS_STATE: core/log.hpp).
#define TILEBSP_PROCESS_STATE
#include <tilebsp/core/graph_impl.hpp>
#include <tilebsp/core/mapping_impl.hpp>
#include <tilebsp/core/tensor_impl.hpp>
#include <tilebsp/core/warning.hpp>
