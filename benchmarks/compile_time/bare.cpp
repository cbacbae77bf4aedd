// Compile-time probe: the umbrella header alone.
#include <tilebsp/tilebsp.hpp>

int main() {}
