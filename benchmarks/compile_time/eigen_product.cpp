// Compile-time probe (peer): one Eigen product of two 256x256 float matrices.
#include <Eigen/Dense>

#include <cstdio>

int main() {
  Eigen::MatrixXf a = Eigen::MatrixXf::Constant(256, 256, 1.0f);
  Eigen::MatrixXf b = Eigen::MatrixXf::Constant(256, 256, 2.0f);
  Eigen::MatrixXf c = a * b;
  std::printf("%g\n", static_cast<double>(c(0, 0)));
}
