// tilebsp::compiled: compile()'s definitions and the planners' (plan_matmul and plan_conv, each with its memo once;
// which convolution implementation runs a pass), compiled once for every target that links the library.
#include <tilebsp/plan/conv_impl.hpp>
#include <tilebsp/plan/conv_implementations_impl.hpp>
#include <tilebsp/plan/matmul_impl.hpp>
#include <tilebsp/program/compile_impl.hpp>
