#include "sph/case_setup.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/sph/sph_kernels.hpp"

namespace apron::sph {
namespace {

// A lattice of points lo + (i + 1/2) dx, i in [0, n) per axis.
struct Lattice {
  double lo[3];
  long n[3];
  double dx;

  static Lattice over(const Box& b, double dx) {
    Lattice l{{b.lo[0], b.lo[1], b.lo[2]}, {0, 0, 0}, dx};
    for (int d = 0; d < 3; ++d) l.n[d] = static_cast<long>(lattice_points(b.extent(d), dx));
    return l;
  }
  std::int64_t size() const { return std::int64_t{1} * n[0] * n[1] * n[2]; }
  double coord(int d, long i) const { return lo[d] + (i + 0.5) * dx; }

  // Calls f(point, linear index) for the lattice points inside `filter`.
  template <class F>
  void for_each_in(const Box& filter, F visit) const {
    long first[3], last[3];
    for (int d = 0; d < 3; ++d) {  // the index range that can be inside (clamped in double)
      const double lo_index = std::floor((filter.lo[d] - lo[d]) / dx - 0.5);
      const double hi_index = std::ceil((filter.hi[d] - lo[d]) / dx) + 1;
      first[d] = static_cast<long>(std::clamp(lo_index, 0.0, static_cast<double>(n[d])));
      last[d] = static_cast<long>(std::clamp(hi_index, 0.0, static_cast<double>(n[d])));
    }
    for (long k = first[2]; k < last[2]; ++k)
      for (long j = first[1]; j < last[1]; ++j)
        for (long i = first[0]; i < last[0]; ++i) {
          const Vec4 p{static_cast<float>(coord(0, i)), static_cast<float>(coord(1, j)),
                       static_cast<float>(coord(2, k)), 0};
          if (filter.contains(p)) visit(p, (k * n[1] + j) * n[0] + i);
        }
  }
};

bool strictly_inside(const Vec4& p, const Box& b) {
  return p.x > b.lo[0] && p.x < b.hi[0] && p.y > b.lo[1] && p.y < b.hi[1] && p.z > b.lo[2] &&
         p.z < b.hi[2];
}

}  // namespace

std::int64_t lattice_size(const Box& box, double dx) {
  return Lattice::over(box, dx).size();
}

void append_lattice(const Box& box, double dx, const Box& filter, std::int64_t first_id,
                    HostParticles& out) {
  Lattice::over(box, dx).for_each_in(filter, [&](const Vec4& p, std::int64_t index) {
    out.pos.push_back(p);
    out.id.push_back(first_id + index);
  });
}

std::int64_t block_lattice_size(const SphCase& c) {
  std::int64_t n = 0;
  for (const auto& b : c.fluid_blocks) n += lattice_size(b, c.sph.spacing);
  return n;
}

std::int64_t fluid_count(const SphCase& c) {
  std::int64_t n = block_lattice_size(c);
  for (const auto& m : c.fluid_meshes) n += lattice_size(m.bounds, c.sph.spacing);
  return n;
}

std::int64_t boundary_count_estimate(const SphCase& c) {
  const double dx = c.sph.spacing, t = c.boundary.layers * dx;
  double volume = 0;
  auto shell = [&](const Box& inner) { return inner.expanded(t).volume() - inner.volume(); };
  if (c.boundary.has_tank) volume += shell(c.boundary.tank);
  for (const auto& s : c.boundary.solids) volume += s.volume();
  for (const auto& m : c.boundary.solid_meshes) volume += m.bounds.volume();
  return static_cast<std::int64_t>(volume / (dx * dx * dx)) + 1;
}

HostParticles generate_fluid(const SphCase& c, const Box& filter) {
  HostParticles out;
  std::int64_t first_id = 0;
  for (const auto& block : c.fluid_blocks) {
    append_lattice(block, c.sph.spacing, filter, first_id, out);
    first_id += lattice_size(block, c.sph.spacing);
  }
  return out;
}

std::vector<Vec4> generate_boundary(const SphCase& c, const Box& filter) {
  std::vector<Vec4> out;
  const double dx = c.sph.spacing, t = c.boundary.layers * dx;
  if (c.boundary.has_tank && !c.boundary.tank_mesh) {  // a mesh tank is MeshGeometry's
    // Lattice over the tank grown by the wall thickness (not upwards for an open top); keep
    // the points outside the interior.
    const Box& tank = c.boundary.tank;
    Box outer = tank.expanded(t);
    if (!c.boundary.tank_closed_top) outer.hi[2] = tank.hi[2];
    Lattice::over(outer, dx).for_each_in(filter, [&](const Vec4& p, std::int64_t) {
      if (!strictly_inside(p, tank)) out.push_back(p);
    });
  }
  for (std::size_t k = 0; k < c.boundary.solids.size(); ++k)
    if (!c.boundary.box_motions[k].moves()) append_box_solid(c, c.boundary.solids[k], filter, out);
  return out;
}

void append_box_solid(const SphCase& c, const Box& solid, const Box& filter,
                      std::vector<Vec4>& out) {
  const double dx = c.sph.spacing;
  const Box core = solid.expanded(-c.boundary.layers * dx);
  Lattice::over(solid, dx).for_each_in(filter, [&](const Vec4& p, std::int64_t) {
    if (!strictly_inside(p, core)) out.push_back(p);
  });
}

namespace {

// A fluid region's lattice ids [first, end) and its lowest and highest points along `up`.
struct Column {
  std::int64_t first, end;
  double bottom, top;
};

std::vector<Column> fluid_columns(const SphCase& c, const Vec3& up) {
  std::vector<Column> columns;
  std::int64_t first = 0;
  auto add = [&](const Box& b) {
    Column col{first, first + lattice_size(b, c.sph.spacing), 1e300, -1e300};
    for (int corner = 0; corner < 8; ++corner) {
      const double x = corner & 1 ? b.hi[0] : b.lo[0], y = corner & 2 ? b.hi[1] : b.lo[1],
                   z = corner & 4 ? b.hi[2] : b.lo[2];
      const double height = up.x * x + up.y * y + up.z * z;
      col.bottom = std::min(col.bottom, height);
      col.top = std::max(col.top, height);
    }
    columns.push_back(col);
    first = col.end;
  };
  for (const Box& b : c.fluid_blocks) add(b);
  for (const auto& m : c.fluid_meshes) add(m.bounds);
  return columns;
}

}  // namespace

void compress_hydrostatically(const SphCase& c, const Params& params, HostParticles& fluid) {
  const double g = std::sqrt(static_cast<double>(norm2(params.gravity)));
  if (g == 0 || fluid.pos.empty()) return;
  const Vec3 up = (-1.0f / static_cast<float>(g)) * params.gravity;
  const std::vector<Column> columns = fluid_columns(c, up);
  // At rest the pressure force balances gravity where dp/dz = -rho0 g / G (G: the pair forces'
  // gradient of a linear field on the lattice over the true one, M times the gradient
  // correction; 1 when corrected); the lattice's mass above a point fixes the depth d it stands
  // for. The density there, rho0 (1 + a d)^(1/7) with a = rho0 g / (G B), is reached by
  // compressing the lattice along gravity by the strain ((1 + a d)^(1/7) - 1) / M (M: the
  // lattice's density response), so a layer at height s above the bottom of an uncompressed
  // column of height H goes to Z(s) = s - (integral_0^s (1 + a (H - u))^(1/7) du - s) / M.
  const double response = lattice_compression_response(c.sph.spacing, c.sph.smoothing_ratio);
  const double gradient_response = response * params.gradient_correction;
  const double a = params.rest_density * g / (gradient_response * params.tait_b);
  for (std::size_t i = 0; i < fluid.pos.size(); ++i) {
    const auto col = std::find_if(columns.begin(), columns.end(), [&](const Column& k) {
      return fluid.id[i] >= k.first && fluid.id[i] < k.end;
    });
    if (col == columns.end()) continue;
    Vec4& p = fluid.pos[i];
    const double height = col->top - col->bottom;
    const double s = up.x * p.x + up.y * p.y + up.z * p.z - col->bottom;
    const double column_integral =
        7 / (8 * a) * (std::pow(1 + a * height, 8.0 / 7) - std::pow(1 + a * (height - s), 8.0 / 7));
    const auto shift = static_cast<float>(-(column_integral - s) / response);
    p.x += shift * up.x, p.y += shift * up.y, p.z += shift * up.z;
    if (!fluid.density.empty())
      fluid.density[i] =
          static_cast<float>(params.rest_density * std::pow(1 + a * (height - s), 1.0 / 7));
  }
}

namespace {

// sum over the interior lattice points b of f(r_ab^2, z_ab) around a point a of it.
template <class F>
double lattice_sum(double spacing, double smoothing_ratio, F f) {
  const int reach = static_cast<int>(std::ceil(2 * smoothing_ratio)) + 1;
  double sum = 0;
  for (int i = -reach; i <= reach; ++i)
    for (int j = -reach; j <= reach; ++j)
      for (int k = -reach; k <= reach; ++k)
        sum += f((i * i + j * j + k * k) * spacing * spacing, k * spacing);
  return sum;
}

// sum_b W(r_ab) over the interior lattice: the summation density of unit masses.
double kernel_sum(const Wendland& w, double spacing, double smoothing_ratio) {
  return lattice_sum(spacing, smoothing_ratio,
                     [&](double r2, double) { return w.value(static_cast<float>(r2)); });
}

}  // namespace

double lattice_mass(double rest_density, double spacing, double smoothing_ratio) {
  const Wendland w(static_cast<float>(smoothing_ratio * spacing));
  return rest_density / kernel_sum(w, spacing, smoothing_ratio);
}

double lattice_compression_response(double spacing, double smoothing_ratio) {
  const Wendland w(static_cast<float>(smoothing_ratio * spacing));
  // d/d(strain) of sum_b W(|r_ab|) with z_ab scaled by (1 - strain): sum_b -W'(r)/r z_ab^2.
  const double moment = lattice_sum(spacing, smoothing_ratio, [&](double r2, double z) {
    return -w.gradient_factor(static_cast<float>(r2)) * z * z;
  });
  return moment / kernel_sum(w, spacing, smoothing_ratio);
}

}  // namespace apron::sph
