// tilebsp::compiled: the definitions of Tensor, Graph and map_linearly, compiled once for every target that links
// the library.
#include <tilebsp/core/graph_impl.hpp>
#include <tilebsp/core/mapping_impl.hpp>
#include <tilebsp/core/tensor_impl.hpp>
