// tilebsp::compiled: the lowering's definitions, compiled once for every target that links the library.
#include <tilebsp/program/lower_impl.hpp>
