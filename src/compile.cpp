// tilebsp::compiled: compile()'s definitions, compiled once for every target that links the library.
#include <tilebsp/program/compile_impl.hpp>
