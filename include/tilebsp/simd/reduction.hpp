// The reductions the SIMD segment kernels (<tilebsp/simd/reduce.hpp>) and ops::reduce offer.
#pragma once

namespace tilebsp::simd {

/// add, mul, max, min, square_add (sum of squares) and log_add (log of the sum of exponentials).
enum class Reduction { add, mul, max, min, square_add, log_add };

}  // namespace tilebsp::simd
