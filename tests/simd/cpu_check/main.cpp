// Built with -march=x86-64-v4 (AVX-512): on a CPU without it, simd/isa/cpu_check.hpp stops the program before
// main, and before this file's static constructor, with a message; elsewhere it prints the kernels' instruction set.
#include <tilebsp/simd/arch.hpp>

#include <cstdio>
#include <cstdlib>

namespace {
// A static constructor compiled for AVX-512, as a user's globals may be: the check runs before it.
struct Early {
  Early() { std::puts("static constructor ran"); }
} const early;
}  // namespace

int main() {
  std::printf("kernels %s\n", tilebsp::simd::isa_name());
  return EXIT_SUCCESS;
}
