// A planner's side of the horizon topics written from docs/ros.md alone ("The planner's horizon",
// "In C++"): builds a request's data from knots and reads an answer's knots, each knot's record
// read with the record recipe on its slice. On std::vector<double> (what
// std_msgs::msg::Float64MultiArray holds); test_ros_record_cpp.py compares both with Python.
//   horizon_client request KNOTS.bin N NQ NV NJ C ID DESCRIPTION DT OUT.bin [RESTITUTION]
//       KNOTS.bin: N rows of q, v, tau, active (raw little-endian float64); writes the request's data
//   horizon_client answer ANSWER.bin ID DESCRIPTION
//       prints, per knot, what a planner uses
// SPDX-License-Identifier: BSD-3-Clause
#include <Eigen/Dense>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

static std::vector<double> read_doubles(const char* path) {
  std::ifstream raw(path, std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<size_t>(raw.tellg());
  raw.seekg(0);
  std::vector<double> d(bytes / sizeof(double));
  raw.read(reinterpret_cast<char*>(d.data()), static_cast<std::streamsize>(bytes));
  return d;
}

// a record's section k, the record starting at r (offsets count from r)
struct Section { const double* p; int n; };
static Section section(const double* r, int k) {
  return {r + static_cast<size_t>(r[11 + 2 * k]), static_cast<int>(r[12 + 2 * k])};
}

int main(int argc, char** argv) {
  if (argc >= 12 && std::strcmp(argv[1], "request") == 0) {
    const std::vector<double> knots = read_doubles(argv[2]);
    const int N = std::atoi(argv[3]), nq = std::atoi(argv[4]), nv = std::atoi(argv[5]), nj = std::atoi(argv[6]),
              C = std::atoi(argv[7]);
    const double id = std::atof(argv[8]), description = std::atof(argv[9]), dt = std::atof(argv[10]);
    const double restitution = argc >= 13 ? std::atof(argv[12]) : 0.0;
    const int S = nq + nv + nj + C;  // contact_mode rigid: F = 0
    std::vector<double> data = {2.0, id, description, static_cast<double>(N), dt, 0.0, 0.0,
                                static_cast<double>(nq), static_cast<double>(nv), static_cast<double>(nj),
                                static_cast<double>(C), 0.0, restitution};
    data.insert(data.end(), knots.begin(), knots.begin() + static_cast<long>(N) * S);
    // the message: layout.dim = [("knots", N, N*S), ("values", S, S)], data_offset = 13
    std::printf("layout knots %d %d values %d %d offset 13\n", N, N * S, S, S);
    std::ofstream out(argv[11], std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(double)));
    return 0;
  }
  if (argc >= 5 && std::strcmp(argv[1], "answer") == 0) {
    const std::vector<double> d = read_doubles(argv[2]);
    const double id = std::atof(argv[3]), description = std::atof(argv[4]);
    if (d.size() < 6 || d[0] != 1.0 || d[1] != id) {
      std::printf("not an answer to request %.0f\n", id);
      return 1;
    }
    if (d[3] != 0.0) {
      std::printf("status %.0f bad knot %.0f\n", d[3], d[5] - 1.0);
      return 2;
    }
    const int N = static_cast<int>(d[4]);
    std::printf("knots %d\n", N);
    for (int k = 0; k < N; ++k) {
      const double* r = d.data() + static_cast<size_t>(d[6 + 2 * k]);
      if (r[0] != 3.0 || r[10] != 20.0 || r[1] != description) {
        std::printf("knot %d: not a record of this format and description\n", k);
        return 1;
      }
      const int nv = static_cast<int>(r[5]), nw = static_cast<int>(r[7]), m = static_cast<int>(r[8]);
      auto Ad = section(r, 8), Bd = section(r, 9), forces = section(r, 12), q_next = section(r, 10);
      if (Ad.n != 4 * nv * nv || Bd.n != 2 * nv * nw || forces.n != m) {
        std::printf("knot %d: sizes do not fit\n", k);
        return 1;
      }
      Eigen::Map<const RowMajor> Adm(Ad.p, 2 * nv, 2 * nv), Bdm(Bd.p, 2 * nv, nw);
      const int64_t stamp_ns = static_cast<int64_t>(r[3]) * 1000000000 + static_cast<int64_t>(r[4]);
      std::printf("knot %d seq %.0f stamp_ns %lld m %d Ad[1][%d] %.17g Bd[%d][0] %.17g q_next[0] %.17g", k, r[2],
                  static_cast<long long>(stamp_ns), m, nv, Adm(1, nv), 2 * nv - 1, Bdm(2 * nv - 1, 0), q_next.p[0]);
      if (m > 0) std::printf(" forces[%d] %.17g", m - 1, forces.p[m - 1]);
      auto reset = section(r, 16), v_plus = section(r, 17), impulses = section(r, 18);   // a touchdown knot's
      if (reset.n == 4 * nv * nv && v_plus.n == nv && impulses.n == m) {
        Eigen::Map<const RowMajor> R(reset.p, 2 * nv, 2 * nv);
        std::printf(" reset[%d][0] %.17g v_plus[0] %.17g impulses[0] %.17g", nv, R(nv, 0), v_plus.p[0],
                    impulses.p[0]);
      }
      std::printf("\n");
    }
    return 0;
  }
  std::printf("usage: horizon_client request ... | answer ...\n");
  return 1;
}
