// tilebsp::compiled: the Engine's and the Profile's definitions, compiled once for every target that links the
// library.
#include <tilebsp/exec/engine_impl.hpp>
#include <tilebsp/exec/profile_impl.hpp>
