// A consumer of the node's linearization record written from docs/ros.md alone ("Reading it",
// C++): the record's data as a std::vector<double> (what std_msgs::msg::Float64MultiArray holds),
// its sections located by the table of contents, A and B mapped row-major with Eigen. Reads one
// record (raw little-endian float64) from the file named on the command line and prints what a
// planner would use; test_ros_record_cpp.py compares it with the Python reader.
// SPDX-License-Identifier: BSD-3-Clause
#include <Eigen/Dense>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Section { const double* p; int n; };
Section section(const std::vector<double>& d, int k) {          // k: 0 = q ... 19 = dimpulses_dz
  return {d.data() + static_cast<size_t>(d[11 + 2 * k]), static_cast<int>(d[12 + 2 * k])};
}

int main(int argc, char** argv) {
  std::ifstream raw(argv[1], std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<size_t>(raw.tellg());
  raw.seekg(0);
  std::vector<double> d(bytes / sizeof(double));
  raw.read(reinterpret_cast<char*>(d.data()), static_cast<std::streamsize>(bytes));
  const double description_id = argc > 2 ? std::atof(argv[2]) : 1.0;
  if (d.size() < 51 || d[0] != 3.0 || d[10] != 20.0 || d[1] != description_id) {
    std::printf("not a record of this format and description\n");
    return 1;
  }
  const int nv = static_cast<int>(d[5]), nw = static_cast<int>(d[7]), m = static_cast<int>(d[8]);
  const int64_t stamp_ns = static_cast<int64_t>(d[3]) * 1000000000 + static_cast<int64_t>(d[4]);
  auto A = section(d, 6), B = section(d, 7), nu_dot = section(d, 5), Ad = section(d, 8);
  if (A.n != 4 * nv * nv || B.n != 2 * nv * nw) {
    std::printf("sizes do not fit\n");
    return 1;
  }
  Eigen::Map<const RowMajor> Am(A.p, 2 * nv, 2 * nv), Bm(B.p, 2 * nv, nw);
  Eigen::Map<const Eigen::VectorXd> a(nu_dot.p, nv);
  std::printf("seq %.0f stamp_ns %lld nv %d nw %d m %d dt %.17g\n", d[2], static_cast<long long>(stamp_ns), nv, nw,
              m, d[9]);
  std::printf("A[1][0] %.17g A[%d][%d] %.17g\n", Am(1, 0), 2 * nv - 1, nv, Am(2 * nv - 1, nv));
  std::printf("B[%d][1] %.17g\n", 2 * nv - 2, Bm(2 * nv - 2, 1));
  std::printf("nu_dot[%d] %.17g\n", nv - 1, a(nv - 1));
  if (Ad.n == 4 * nv * nv) {
    Eigen::Map<const RowMajor> Adm(Ad.p, 2 * nv, 2 * nv);
    std::printf("Ad[0][%d] %.17g\n", nv, Adm(0, nv));
  }
  auto odom = section(d, 15);                                     // n == 0 for a fixed base
  if (odom.n == 2) {
    const int64_t odom_ns = static_cast<int64_t>(odom.p[0]) * 1000000000 + static_cast<int64_t>(odom.p[1]);
    std::printf("odom_stamp_ns %lld (%s)\n", static_cast<long long>(odom_ns),
                odom_ns == stamp_ns ? "the joint state's own stamp" : "another stamp");
  }
  std::printf("trace(A) %.17g\n", Am.trace());
  return 0;
}
