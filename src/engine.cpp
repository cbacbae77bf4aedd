// tilebsp::compiled: the Engine's definitions, compiled once for every target that links the library.
#include <tilebsp/exec/engine_impl.hpp>
