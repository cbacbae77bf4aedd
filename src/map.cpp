// tilebsp::compiled: ops::map's definitions that do not depend on the expression (operand shapes, aliasing, the
// pieces of each tile's work), compiled once for every target that links the library.
#include <tilebsp/ops/map_impl.hpp>
