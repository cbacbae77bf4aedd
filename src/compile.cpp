// tilebsp::compiled: compile()'s definitions and the planners' (plan_matmul, plan_conv: each planner's memo once), compiled
// once for every target that links the library.
#include <tilebsp/plan/conv_impl.hpp>
#include <tilebsp/plan/matmul_impl.hpp>
#include <tilebsp/program/compile_impl.hpp>
