// FLIP: sparse bricks equal a dense grid. A plain, slow dense-grid FLIP step written here (float64
// loops over every voxel of the domain) takes the sparse-brick solver's particles at the start of
// each step and does what the step's grid part must do: particle-to-grid with trilinear hats,
// gravity on faces that received weight, zero normal velocity on faces touching a solid voxel,
// fluid marking, the pressure solve (conjugate gradient in float64 to round-off) and the gradient
// update. After FlipSolver::advance(), every voxel the sparse solver holds must have the dense
// grid's marker, cell-centred velocity, divergence and pressure to within the float32 arithmetic
// and the sparse solver's CG tolerance; every voxel the dense grid touches must be held. Each step
// starts again from the sparse solver's particles, so the comparison follows the bricks as the
// fluid falls, spreads under a tilted gravity and runs into a solid box (moving topology).
#include <gtest/gtest.h>
#include <filesystem>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "config/case_config.hpp"
#include "flip/flip_solver.hpp"
#include "runtime/runtime.hpp"
#include "workload_registry.hpp"

namespace apron::flip {
namespace {

// 16^3 voxels of 1 cm; a block of water against the x = 0 wall, 3 cm above the floor, a solid
// box in its way, gravity tilted so that the fluid also moves along x and y. The CG stops at
// max |div u| dt < 1e-6, checked every iteration.
std::string case_text(int brick_size, const std::string& out) {
  std::string text = R"(workload: flip
name: flip_dense
domain: {lo: [0, 0, 0], hi: [0.16, 0.16, 0.16]}
flip:
  voxel_size: 0.01
  brick_size: BRICK
  particles_per_voxel: 8
  flip_ratio: 0.95
  cfl: 0.5
  max_dt: 0.01
  density: 1000
  gravity: [3.0, 1.5, -9.81]
  pressure: {tolerance: 1.0e-6, max_iterations: 5000, preconditioner: jacobi, check_every: 1}
fluid:
  - {lo: [0, 0.01, 0.03], hi: [0.06, 0.08, 0.11]}
solids:
  - {lo: [0.09, 0, 0], hi: [0.12, 0.07, 0.04]}
time: {end: 10}
output: {dir: OUT, every: 0, diagnostics_every: 1000}
)";
  text.replace(text.find("BRICK"), 5, std::to_string(brick_size));
  text.replace(text.find("OUT"), 3, out);
  return text;
}

std::string folder(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value ? value : built_in;
}

// The dense grid: the MAC layout of kernels/flip/flip_kernels.hpp over the whole domain. Face
// component c of voxel (i, j, k) sits on its lower face along c; faces on the domain's upper
// walls (index n along c) are solid walls and always 0, so they are not stored.
struct Dense {
  BrickGrid grid;
  int n[3];
  std::vector<std::array<int, 6>> solid_boxes;  // voxel index ranges [lo, hi)
  std::size_t count = 0;

  std::vector<std::array<double, 3>> mom, weight, u;
  std::vector<int> particles;  // per voxel
  std::vector<char> solid, fluid;
  std::vector<double> s;  // the projection's solution (velocity units)

  Dense(const BrickGrid& g, std::vector<std::array<int, 6>> boxes)
      : grid(g), n{g.voxels[0], g.voxels[1], g.voxels[2]}, solid_boxes(std::move(boxes)) {
    count = static_cast<std::size_t>(n[0]) * n[1] * n[2];
    solid.assign(count, 0);
    for (int k = 0; k < n[2]; ++k)
      for (int j = 0; j < n[1]; ++j)
        for (int i = 0; i < n[0]; ++i)
          for (const auto& q : solid_boxes)
            if (i >= q[0] && j >= q[1] && k >= q[2] && i < q[3] && j < q[4] && k < q[5])
              solid[index(i, j, k)] = 1;
  }

  bool inside(int i, int j, int k) const {
    return i >= 0 && j >= 0 && k >= 0 && i < n[0] && j < n[1] && k < n[2];
  }
  std::size_t index(int i, int j, int k) const {
    return (static_cast<std::size_t>(k) * n[1] + j) * n[0] + i;
  }
  bool is_solid(int i, int j, int k) const { return !inside(i, j, k) || solid[index(i, j, k)]; }
  bool is_fluid(int i, int j, int k) const { return inside(i, j, k) && fluid[index(i, j, k)]; }
  // Face component c of voxel (i, j, k); 0 outside the domain (walls).
  double face(int c, int i, int j, int k) const {
    return inside(i, j, k) ? u[index(i, j, k)][c] : 0.0;
  }
  // dx div u of voxel (i, j, k) (velocity units).
  double flux(int i, int j, int k) const {
    const double* f = u[index(i, j, k)].data();
    return face(0, i + 1, j, k) - f[0] + face(1, i, j + 1, k) - f[1] + face(2, i, j, k + 1) - f[2];
  }

  static double hat(double r) {
    const double a = std::abs(r);
    return a < 1 ? 1 - a : 0;
  }

  // Particle-to-grid by scatter, then velocities, gravity, solid walls and the fluid marker.
  void particles_to_grid(const FlipSolver::Snapshot& p, const std::array<double, 3>& gravity,
                         double dt) {
    mom.assign(count, {0, 0, 0});
    weight.assign(count, {0, 0, 0});
    particles.assign(count, 0);
    for (std::size_t q = 0; q < p.pos.size(); ++q) {
      const float x[3] = {p.pos[q].x, p.pos[q].y, p.pos[q].z};
      const double v[3] = {p.vel[q].x, p.vel[q].y, p.vel[q].z};
      // Voxel units, converted in float as the solver converts positions.
      double gc[3];
      int cell[3];
      for (int d = 0; d < 3; ++d) {
        gc[d] = grid.grid_coord(x[d], d);
        cell[d] = grid.voxel_coord(x[d], d);
      }
      ++particles[index(cell[0], cell[1], cell[2])];
      for (int k = cell[2] - 1; k <= cell[2] + 2; ++k)
        for (int j = cell[1] - 1; j <= cell[1] + 2; ++j)
          for (int i = cell[0] - 1; i <= cell[0] + 2; ++i) {
            if (!inside(i, j, k)) continue;  // wall faces: zero whatever they receive
            const int f[3] = {i, j, k};
            double node[3], centre[3];
            for (int d = 0; d < 3; ++d) {
              node[d] = hat(gc[d] - f[d]);
              centre[d] = hat(gc[d] - f[d] - 0.5);
            }
            const std::size_t row = index(i, j, k);
            for (int c = 0; c < 3; ++c) {
              double w = 1;
              for (int d = 0; d < 3; ++d) w *= d == c ? node[d] : centre[d];
              mom[row][c] += w * v[c];
              weight[row][c] += w;
            }
          }
    }
    u.assign(count, {0, 0, 0});
    fluid.assign(count, 0);
    for (int k = 0; k < n[2]; ++k)
      for (int j = 0; j < n[1]; ++j)
        for (int i = 0; i < n[0]; ++i) {
          const std::size_t row = index(i, j, k);
          const int f[3] = {i, j, k};
          for (int c = 0; c < 3; ++c) {
            const double w = weight[row][c];
            double value = w > 0 ? mom[row][c] / w + dt * gravity[c] : 0;
            const int below[3] = {f[0] - (c == 0), f[1] - (c == 1), f[2] - (c == 2)};
            if (is_solid(i, j, k) || is_solid(below[0], below[1], below[2])) value = 0;
            u[row][c] = value;
          }
          fluid[row] = !is_solid(i, j, k) && particles[row] > 0;
        }
  }

  // A s = -dx div u over the fluid voxels (7-point Laplacian: diagonal = non-solid neighbours,
  // -1 per fluid neighbour; air s = 0, solid Neumann), by plain CG in float64 to round-off; then
  // u -= grad s on every face with a fluid side and no solid side.
  int project() {
    std::vector<std::size_t> rows;  // the fluid voxels
    std::vector<int> of(count, -1);
    for (std::size_t r = 0; r < count; ++r)
      if (fluid[r]) of[r] = static_cast<int>(rows.size()), rows.push_back(r);
    const std::size_t m = rows.size();
    std::vector<std::array<int, 3>> at(m);
    for (std::size_t a = 0; a < m; ++a) {
      const auto r = static_cast<int>(rows[a]);
      at[a] = {r % n[0], (r / n[0]) % n[1], r / (n[0] * n[1])};
    }
    static constexpr int kOff[6][3] = {{-1, 0, 0}, {1, 0, 0},  {0, -1, 0},
                                       {0, 1, 0},  {0, 0, -1}, {0, 0, 1}};
    const auto apply = [&](const std::vector<double>& x, std::vector<double>& y) {
      for (std::size_t a = 0; a < m; ++a) {
        const auto& v = at[a];
        double sum = 0;
        for (const auto& o : kOff) {
          const int i = v[0] + o[0], j = v[1] + o[1], k = v[2] + o[2];
          if (is_solid(i, j, k)) continue;
          sum += x[a];
          if (is_fluid(i, j, k)) sum -= x[static_cast<std::size_t>(of[index(i, j, k)])];
        }
        y[a] = sum;
      }
    };
    const auto dot = [&](const std::vector<double>& a, const std::vector<double>& b) {
      double sum = 0;
      for (std::size_t q = 0; q < m; ++q) sum += a[q] * b[q];
      return sum;
    };
    std::vector<double> x(m, 0), r(m), d(m), q(m);
    for (std::size_t a = 0; a < m; ++a) r[a] = -flux(at[a][0], at[a][1], at[a][2]);
    d = r;
    double rr = dot(r, r);
    const double stop = 1e-26 * std::max(rr, 1e-300);  // |r| <= 1e-13 |b|
    int it = 0;
    while (rr > stop && it < 10000) {
      ++it;
      apply(d, q);
      const double alpha = rr / dot(d, q);
      for (std::size_t a = 0; a < m; ++a) x[a] += alpha * d[a], r[a] -= alpha * q[a];
      const double next = dot(r, r);
      for (std::size_t a = 0; a < m; ++a) d[a] = r[a] + next / rr * d[a];
      rr = next;
    }
    EXPECT_LE(rr, stop) << "the dense CG did not converge";
    s.assign(count, 0);
    for (std::size_t a = 0; a < m; ++a) s[rows[a]] = x[a];
    for (int k = 0; k < n[2]; ++k)
      for (int j = 0; j < n[1]; ++j)
        for (int i = 0; i < n[0]; ++i) {
          if (is_solid(i, j, k)) continue;
          const std::size_t row = index(i, j, k);
          for (int c = 0; c < 3; ++c) {
            const int bi = i - (c == 0), bj = j - (c == 1), bk = k - (c == 2);
            if (is_solid(bi, bj, bk)) continue;
            if (fluid[row] || is_fluid(bi, bj, bk)) u[row][c] -= s[row] - s[index(bi, bj, bk)];
          }
        }
    return it;
  }
};

// Solid boxes as voxel ranges: the voxels whose centres lie in the box (flip_config.hpp).
std::vector<std::array<int, 6>> solid_voxels(const config::CaseConfig& c, const FlipCase& f) {
  std::vector<std::array<int, 6>> out;
  const double dx = f.flip.voxel_size;
  for (const Box& b : f.solids) {
    std::array<int, 6> q;
    for (int d = 0; d < 3; ++d) {
      const double n = std::round(c.domain.extent(d) / dx);
      const auto edge = [&](double x) {
        return static_cast<int>(std::clamp(std::ceil((x - c.domain.lo[d]) / dx - 0.5), 0.0, n));
      };
      q[d] = edge(b.lo[d]);
      q[3 + d] = edge(b.hi[d]);
    }
    out.push_back(q);
  }
  return out;
}

// The largest differences over all compared steps.
struct Worst {
  double velocity = 0;    // |u_sparse - u_dense| at voxel centres [m/s]
  double speed = 0;       // max |u_dense| at voxel centres [m/s]
  double divergence = 0;  // |div_sparse - div_dense| dt
  double pressure = 0;    // |p_sparse - p_dense| / max |p_dense|
  double dense_div = 0;   // max |div_dense| dt (the reference's own round-off)
  double sparse_div = 0;  // max |div_sparse| dt
  std::size_t fluid = 0;  // fluid voxels of the last step
  double div_share = 0;   // divergence / its allowance
  std::size_t bricks_min = 1u << 30, bricks_max = 0;
  int dense_cg = 0, sparse_cg = 0;
  int next_to_box = 0;         // the most fluid voxels next to the solid box in one step
  int added = 0, removed = 0;  // bricks, over all steps
};

void compare_steps(int brick_size, int steps, Worst& worst) {
  const auto ranks = RankInfo::world();
  const std::string out = folder("APRON_BINARY_DIR", APRON_BINARY_DIR) + "/out/flip_dense_b" +
                          std::to_string(brick_size);
  std::filesystem::create_directories(out);  // the driver's work, which this test goes round
  const auto config = config::parse_case_text("flip_dense.yaml", case_text(brick_size, out), {});
  const FlipCase& fc = flip_case(config);
  PhaseTimers timers;
  FlipSolver solver(WorkloadContext{config, ranks, DeviceInfo::select(ranks), timers});
  solver.setup();
  Dense dense(solver.grid(), solid_voxels(config, fc));
  const BrickGrid& grid = solver.grid();
  const double dx = fc.flip.voxel_size, rho = fc.flip.density;
  const auto& g = fc.flip.gravity;
  const double tolerance = fc.flip.pressure.tolerance;

  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("brick size " + std::to_string(brick_size) + ", step " + std::to_string(step));
    const FlipSolver::Snapshot start = solver.snapshot();
    // dt as the solver chooses it: cfl dx / (v_max + sqrt(|g| dx)), at most max_dt.
    double v_max = 0;
    for (const Vec4& v : start.vel)
      v_max = std::max(v_max,
                       std::sqrt(static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
                                 static_cast<double>(v.z) * v.z));
    const double g_norm = std::sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
    const double dt =
        std::min(fc.flip.cfl * dx / (v_max + std::sqrt(g_norm * dx) + 1e-30), fc.flip.max_dt);

    dense.particles_to_grid(start, g, dt);
    worst.dense_cg = std::max(worst.dense_cg, dense.project());
    std::vector<std::uint32_t> before = solver.pool().keys(), after;
    solver.advance();
    after = solver.pool().keys();
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    for (const std::uint32_t key : after)
      worst.added += !std::binary_search(before.begin(), before.end(), key);
    for (const std::uint32_t key : before)
      worst.removed += !std::binary_search(after.begin(), after.end(), key);
    EXPECT_DOUBLE_EQ(solver.last_dt(), dt);
    worst.sparse_cg = std::max(worst.sparse_cg, solver.last_projection().iterations);
    worst.bricks_min = std::min(worst.bricks_min, solver.pool().size());
    worst.bricks_max = std::max(worst.bricks_max, solver.pool().size());

    // The dense reference at voxel centres.
    std::vector<std::array<double, 3>> centre(dense.count);
    double speed = 0, p_max = 0;
    std::size_t fluid = 0;
    int next_to_box = 0;
    for (int k = 0; k < dense.n[2]; ++k)
      for (int j = 0; j < dense.n[1]; ++j)
        for (int i = 0; i < dense.n[0]; ++i) {
          const std::size_t row = dense.index(i, j, k);
          const auto& f = dense.u[row];
          centre[row] = {0.5 * (f[0] + dense.face(0, i + 1, j, k)),
                         0.5 * (f[1] + dense.face(1, i, j + 1, k)),
                         0.5 * (f[2] + dense.face(2, i, j, k + 1))};
          speed = std::max(speed, std::hypot(centre[row][0], centre[row][1], centre[row][2]));
          p_max = std::max(p_max, rho * dx * std::abs(dense.s[row]) / dt);
          if (dense.fluid[row]) {
            ++fluid;
            const bool box = (dense.inside(i - 1, j, k) && dense.solid[dense.index(i - 1, j, k)]) ||
                             (dense.inside(i + 1, j, k) && dense.solid[dense.index(i + 1, j, k)]) ||
                             (dense.inside(i, j - 1, k) && dense.solid[dense.index(i, j - 1, k)]) ||
                             (dense.inside(i, j + 1, k) && dense.solid[dense.index(i, j + 1, k)]) ||
                             (dense.inside(i, j, k - 1) && dense.solid[dense.index(i, j, k - 1)]) ||
                             (dense.inside(i, j, k + 1) && dense.solid[dense.index(i, j, k + 1)]);
            next_to_box += box;
            worst.dense_div = std::max(worst.dense_div, std::abs(dense.flux(i, j, k)) / dx * dt);
          }
        }
    worst.speed = std::max(worst.speed, speed);
    worst.fluid = fluid;
    worst.next_to_box = std::max(worst.next_to_box, next_to_box);
    EXPECT_EQ(solver.last_projection().fluid_voxels, static_cast<std::int64_t>(fluid));

    // Every voxel the sparse solver holds, once.
    std::vector<char> held(dense.count, 0);
    const auto values = solver.voxel_values();
    ASSERT_EQ(values.size(), solver.pool().size() * grid.interior_per_brick());
    double du = 0, ddiv = 0, dp = 0;
    for (const auto& v : values) {
      const auto [i, j, k] = v.voxel;
      ASSERT_TRUE(dense.inside(i, j, k));
      const std::size_t row = dense.index(i, j, k);
      ASSERT_FALSE(held[row]) << "voxel " << i << " " << j << " " << k << " held twice";
      held[row] = 1;
      EXPECT_EQ(v.marker, dense.fluid[row] ? kFluid : kAir)
          << "marker of voxel " << i << " " << j << " " << k;
      const double su[3] = {v.velocity.x, v.velocity.y, v.velocity.z};
      for (int c = 0; c < 3; ++c) du = std::max(du, std::abs(su[c] - centre[row][c]));
      const double div = dense.fluid[row] ? dense.flux(i, j, k) / dx : 0.0;
      ddiv = std::max(ddiv, std::abs(v.divergence - div) * dt);
      worst.sparse_div = std::max(worst.sparse_div, std::abs(double{v.divergence}) * dt);
      if (dense.fluid[row]) dp = std::max(dp, std::abs(v.pressure - rho * dx * dense.s[row] / dt));
    }
    // Every voxel the dense step touched is held: those that received P2G weight or hold a
    // particle, and the faces the projection moved (nonzero after it).
    for (int k = 0; k < dense.n[2]; ++k)
      for (int j = 0; j < dense.n[1]; ++j)
        for (int i = 0; i < dense.n[0]; ++i) {
          const std::size_t row = dense.index(i, j, k);
          if (held[row]) continue;
          const auto& w = dense.weight[row];
          const auto& f = dense.u[row];
          EXPECT_TRUE(w[0] == 0 && w[1] == 0 && w[2] == 0 && dense.particles[row] == 0 &&
                      f[0] == 0 && f[1] == 0 && f[2] == 0)
              << "voxel " << i << " " << j << " " << k << " is touched but not in a brick";
        }

    // Tolerances (float32 unit round-off u32 = 2^-24 = 6e-8; the dense side is float64 and
    // converged to 1e-13, so every difference is the sparse solver's float32 arithmetic and its
    // CG stopping at max |div u| dt < tolerance):
    // - velocity: 1e-5 of the largest centre speed + 1e-6 m/s. The P2G sums and m / w round at
    //   ~u32 |u|; the CG leaves an error of its residual (< tolerance dx / dt ~ 4e-7 m/s here)
    //   spread by the Laplacian's inverse. Measured: ~2e-7 of the speed (3e-7 m/s at 1.6 m/s).
    // - divergence, |div_sparse - div_dense| dt: the CG tolerance plus the float32 floor of the
    //   sparse face field. CG updates s and its residual in float32 over k iterations, so the true
    //   residual drifts from the updated one by ~u32 (|A| max|s|) sqrt(k) (|A| = 12), and the
    //   faces u - grad s round at u32 (|u| + |s|): tolerance + 4 u32 (speed + 12 max|s|)
    //   sqrt(k) dt / dx. Measured: 1.0e-6 at a tolerance of 1e-6 (0.58 of this allowance; the
    //   dense side's is 2e-14). The solver checks its true residual (b - A s), so a tolerance
    //   below the float32 floor (~1e-6, the schema's minimum) would stall, not lie.
    // - pressure at fluid voxels: 1e-4 of the largest |p|, the CG's error in s at a tolerance of
    //   1e-6 (measured 2.7e-5; 2e-6 at 1e-7).
    double s_max = 0;
    for (const double x : dense.s) s_max = std::max(s_max, std::abs(x));
    const int k_cg = std::max(solver.last_projection().iterations, 1);
    const double div_floor = 4 * 0x1p-24 * (speed + 12 * s_max) * std::sqrt(k_cg) * dt / dx;
    EXPECT_LT(du, 1e-5 * speed + 1e-6) << "max speed " << speed;
    EXPECT_LT(ddiv, tolerance + div_floor) << "max speed " << speed << ", max |s| " << s_max;
    EXPECT_LT(dp, 1e-4 * p_max + 1e-6) << "max pressure " << p_max;
    worst.div_share = std::max(worst.div_share, ddiv / (tolerance + div_floor));
    worst.velocity = std::max(worst.velocity, du);
    worst.divergence = std::max(worst.divergence, ddiv);
    worst.pressure = std::max(worst.pressure, p_max > 0 ? dp / p_max : dp);
  }
  std::printf(
      "[flip dense B=%d] %d steps: %zu..%zu bricks (%d added, %d removed), %zu fluid voxels at "
      "the end, up to %d next to the solid box; CG iterations sparse <= %d, dense <= %d\n"
      "  max |u_sparse - u_dense| %.3g m/s (max speed %.3g m/s); max |div_sparse - div_dense| dt "
      "%.3g (%.2f of its allowance; max |div| dt sparse %.3g, dense %.3g); max |dp| / max |p| "
      "%.3g\n",
      brick_size, steps, worst.bricks_min, worst.bricks_max, worst.added, worst.removed,
      worst.fluid, worst.next_to_box, worst.sparse_cg, worst.dense_cg, worst.velocity, worst.speed,
      worst.divergence, worst.div_share, worst.sparse_div, worst.dense_div, worst.pressure);
}

TEST(FlipDense, SparseBricksOf4EqualADenseGrid) {
  if (RankInfo::world().size != 1) GTEST_SKIP() << "a one-rank test";
  Worst w;
  compare_steps(4, 30, w);
  // The case covers what it is meant to: bricks come and go, the fluid reaches the box.
  EXPECT_GT(w.added, 0);
  EXPECT_GT(w.removed, 0);
  EXPECT_GT(w.next_to_box, 0);
  EXPECT_GT(w.speed, 1.0);
}

TEST(FlipDense, SparseBricksOf8EqualADenseGrid) {
  if (RankInfo::world().size != 1) GTEST_SKIP() << "a one-rank test";
  Worst w;
  compare_steps(8, 20, w);
}

}  // namespace
}  // namespace apron::flip
