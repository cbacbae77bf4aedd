// tilebsp::compiled: the report layer's definitions (text summary, JSON, the HTML page), compiled once.
#include <tilebsp/report/report_impl.hpp>
