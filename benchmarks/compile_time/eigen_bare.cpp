// Compile-time probe (peer): Eigen's dense module alone.
#include <Eigen/Dense>

int main() {}
