// tilebsp::compiled: the lowering's and the pipeline's definitions, compiled once for every target that links the
// library.
#include <tilebsp/program/lower_impl.hpp>
#include <tilebsp/program/pipeline_impl.hpp>
