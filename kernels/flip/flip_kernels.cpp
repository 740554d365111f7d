#include "kernels/flip/flip_kernels.hpp"
#include "kernels/common/algorithms.hpp"

#include "kernels/flip/voxel_stencil.hpp"

namespace apron::flip {
namespace {

using namespace detail;

APRON_HD inline float hat(float r) {
  const float a = r < 0 ? -r : r;
  return a < 1 ? 1 - a : 0;
}

APRON_HD inline const float& component(const Vec4& v, int c) {
  return c == 0 ? v.x : (c == 1 ? v.y : v.z);
}
APRON_HD inline float& component(Vec4& v, int c) {
  return c == 0 ? v.x : (c == 1 ? v.y : v.z);
}

struct VoxelKeys {
  SlotGeometry g;
  const std::int32_t* slot_of;
  const Vec4* pos;
  std::uint32_t* keys;
  std::uint32_t* order;
  APRON_HD void operator()(std::size_t p) const {
    const BrickGrid& grid = g.grid;
    order[p] = static_cast<std::uint32_t>(p);
    const Vec4 x = pos[p];
    const int i = grid.voxel_coord(x.x, 0), j = grid.voxel_coord(x.y, 1),
              k = grid.voxel_coord(x.z, 2);
    const auto slot = static_cast<std::uint32_t>(slot_of[grid.brick_key(i, j, k)]);
    keys[p] = grid.interior_index(slot, i % grid.b, j % grid.b, k % grid.b);
  }
};

struct RunBounds {
  const std::uint32_t* keys;
  std::size_t n;
  std::uint32_t* first;
  std::uint32_t* last;
  APRON_HD void operator()(std::size_t p) const {
    const std::uint32_t key = keys[p];
    if (p == 0 || keys[p - 1] != key) first[key] = static_cast<std::uint32_t>(p);
    if (p + 1 == n || keys[p + 1] != key) last[key] = static_cast<std::uint32_t>(p + 1);
  }
};

struct GatherP2G {
  SlotGeometry g;
  const std::uint32_t* first;
  const std::uint32_t* last;
  const Vec4* pos;
  const Vec4* vel;
  GridFields f;

  APRON_HD void operator()(std::size_t row) const {
    const BrickGrid& grid = g.grid;
    const std::size_t per = grid.stored_per_brick();
    const std::size_t slot = row / per;
    const int s = grid.side();
    const auto r = static_cast<int>(row - slot * per);
    const int i = r % s - BrickGrid::kApron, j = (r / s) % s - BrickGrid::kApron,
              k = r / (s * s) - BrickGrid::kApron;
    const int* o = g.origin + 3 * slot;
    Vec4 m{0, 0, 0, 0}, w{0, 0, 0, 0};
    const int b = grid.b;
    for (int pk = (k > 0 ? k - 1 : 0); pk <= (k + 1 < b ? k + 1 : b - 1); ++pk)
      for (int pj = (j > 0 ? j - 1 : 0); pj <= (j + 1 < b ? j + 1 : b - 1); ++pj)
        for (int pi = (i > 0 ? i - 1 : 0); pi <= (i + 1 < b ? i + 1 : b - 1); ++pi) {
          const std::uint32_t v = grid.interior_index(static_cast<std::uint32_t>(slot), pi, pj, pk);
          const std::uint32_t end = last[v];
          if (pi == i && pj == j && pk == k) w.w += static_cast<float>(end - first[v]);
          for (std::uint32_t p = first[v]; p < end; ++p) {
            const Vec4 x = load(pos + p), u = load(vel + p);
            // The particle in voxel units relative to this voxel's corner.
            const float gx = grid.grid_coord(x.x, 0) - static_cast<float>(o[0] + i);
            const float gy = grid.grid_coord(x.y, 1) - static_cast<float>(o[1] + j);
            const float gz = grid.grid_coord(x.z, 2) - static_cast<float>(o[2] + k);
            const float hx = hat(gx), hy = hat(gy), hz = hat(gz);
            const float cx = hat(gx - 0.5f), cy = hat(gy - 0.5f), cz = hat(gz - 0.5f);
            const float wx = hx * cy * cz, wy = cx * hy * cz, wz = cx * cy * hz;
            m.x += wx * u.x, m.y += wy * u.y, m.z += wz * u.z;
            w.x += wx, w.y += wy, w.z += wz;
          }
        }
    f.momentum[row] = m;
    f.weight[row] = w;
  }
};

struct GridVelocities {
  SlotGeometry g;
  GridFields f;
  Vec3 gravity;
  float dt;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(g.grid, t);
    const std::size_t row = g.grid.row(v.slot, v.i, v.j, v.k);
    const Vec4 m = f.momentum[row], w = f.weight[row];
    Vec4 u{w.x > 0 ? m.x / w.x : 0.0f, w.y > 0 ? m.y / w.y : 0.0f, w.z > 0 ? m.z / w.z : 0.0f,
           0.0f};
    f.vel_old[row] = u;
    if (w.x > 0) u.x += dt * gravity.x;
    if (w.y > 0) u.y += dt * gravity.y;
    if (w.z > 0) u.z += dt * gravity.z;
    const bool solid = g.solid_at(v.slot, v.i, v.j, v.k);
    if (solid || g.solid_at(v.slot, v.i - 1, v.j, v.k)) u.x = 0;
    if (solid || g.solid_at(v.slot, v.i, v.j - 1, v.k)) u.y = 0;
    if (solid || g.solid_at(v.slot, v.i, v.j, v.k - 1)) u.z = 0;
    f.vel[row] = u;
    f.marker[row] = (!solid && w.w > 0) ? kFluid : kAir;
  }
};

struct PressureSystem {
  SlotGeometry g;
  GridFields f;
  APRON_HD float operator()(std::size_t t) const {
    const BrickGrid& grid = g.grid;
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    if (f.marker[row] != kFluid) {
      f.stencil[t] = 0;
      f.rhs[row] = 0;
      return 0;
    }
    int bits = kSelfFluid, diag = 0;
    for (int n = 0; n < 6; ++n) {
      int di, dj, dk;
      neighbour(n, di, dj, dk);
      if (g.solid_at(v.slot, v.i + di, v.j + dj, v.k + dk)) continue;
      ++diag;
      if (f.marker[grid.row(v.slot, v.i + di, v.j + dj, v.k + dk)] == kFluid) bits |= 1 << n;
    }
    f.stencil[t] = bits | (diag << kDiagShift);
    const Vec4 u = f.vel[row];
    const float flux = f.vel[grid.row(v.slot, v.i + 1, v.j, v.k)].x - u.x +
                       f.vel[grid.row(v.slot, v.i, v.j + 1, v.k)].y - u.y +
                       f.vel[grid.row(v.slot, v.i, v.j, v.k + 1)].z - u.z;
    f.rhs[row] = -flux;
    return flux < 0 ? -flux : flux;
  }
};

struct Laplacian {
  SlotGeometry g;
  const std::int32_t* stencil;
  const float* d;
  float* q;
  // Writes q and returns d q: the dot product comes with the pass (a functor with a side effect
  // in a transform-reduce: each index is visited once).
  APRON_HD double operator()(std::size_t t) const {
    const BrickGrid& grid = g.grid;
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    const int bits = stencil[t];
    if (!(bits & kSelfFluid)) {
      q[row] = 0;
      return 0;
    }
    const float sum = apply_row(ApronReader{grid}, v, bits, d);
    q[row] = sum;
    return static_cast<double>(d[row]) * static_cast<double>(sum);
  }
};

struct Precondition {
  BrickGrid grid;
  const std::int32_t* stencil;
  bool jacobi;
  const float* r;
  float* z;
  APRON_HD double operator()(std::size_t t) const {  // writes z, returns r z
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    const int diag = stencil[t] >> kDiagShift;
    const float zr = (jacobi && diag > 0) ? r[row] / static_cast<float>(diag) : r[row];
    z[row] = zr;
    return static_cast<double>(r[row]) * static_cast<double>(zr);
  }
};

struct CgStep {
  BrickGrid grid;
  float alpha;
  const float* d;
  const float* q;
  float* x;
  float* r;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    x[row] += alpha * d[row];
    r[row] -= alpha * q[row];
  }
};

struct CgDirection {
  BrickGrid grid;
  float beta;
  const float* z;
  float* d;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    d[row] = beta == 0 ? z[row] : z[row] + beta * d[row];  // d may hold garbage at first
  }
};

struct Difference {
  BrickGrid grid;
  const float* a;
  const float* b;
  float* out;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    out[row] = a[row] - b[row];
  }
};

struct InteriorAbs {
  BrickGrid grid;
  const float* a;
  APRON_HD float operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    const float x = a[grid.row(v.slot, v.i, v.j, v.k)];
    return x < 0 ? -x : x;
  }
};

struct PressureGradient {
  SlotGeometry g;
  GridFields f;
  APRON_HD void operator()(std::size_t t) const {
    const BrickGrid& grid = g.grid;
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    if (g.solid_at(v.slot, v.i, v.j, v.k)) return;
    const bool fluid = f.marker[row] == kFluid;
    Vec4 u = f.vel[row];
    for (int c = 0; c < 3; ++c) {
      const int di = c == 0, dj = c == 1, dk = c == 2;
      if (g.solid_at(v.slot, v.i - di, v.j - dj, v.k - dk)) continue;
      const std::size_t below = grid.row(v.slot, v.i - di, v.j - dj, v.k - dk);
      if (fluid || f.marker[below] == kFluid)
        component(u, c) -= f.pressure[row] - f.pressure[below];
    }
    f.vel[row] = u;
  }
};

// Coulomb friction at solid walls: each face velocity tangential to a wall loses mu times the
// velocity the wall stopped along its normal this step (the P2G velocity plus gravity's
// increment on the wall's faces, where it points into the wall), down to zero: a block sliding
// on a floor decelerates by mu g whatever the grid.
struct WallFriction {
  SlotGeometry g;
  GridFields f;
  Vec3 gravity;
  float dt, mu;

  // What the wall stopped on the faces between voxel p and its solid neighbour on side s of
  // axis a (0 where that neighbour is not solid).
  APRON_HD float load(const int p[3], int a, int s, std::size_t slot) const {
    int q[3] = {p[0], p[1], p[2]};
    q[a] += s;
    if (!g.solid_at(slot, q[0], q[1], q[2])) return 0;
    const int* face = s < 0 ? p : q;  // the face is the lower a-face of the upper voxel
    const float gravity_a = a == 0 ? gravity.x : (a == 1 ? gravity.y : gravity.z);
    const float into =
        s * (component(f.vel_old[g.grid.row(slot, face[0], face[1], face[2])], a) + gravity_a * dt);
    return into > 0 ? into : 0.0f;
  }

  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(g.grid, t);
    if (g.solid_at(v.slot, v.i, v.j, v.k)) return;
    const std::size_t row = g.grid.row(v.slot, v.i, v.j, v.k);
    Vec4 u = f.vel[row];
    for (int c = 0; c < 3; ++c) {
      const int upper[3] = {v.i, v.j, v.k};
      const int lower[3] = {v.i - (c == 0), v.j - (c == 1), v.k - (c == 2)};
      if (g.solid_at(v.slot, lower[0], lower[1], lower[2])) continue;  // a wall's own face
      float stopped = 0;  // summed over the face's two voxels: averaged below
      for (int a = 0; a < 3; ++a)
        if (a != c)
          for (int s = -1; s <= 1; s += 2)
            stopped += load(upper, a, s, v.slot) + load(lower, a, s, v.slot);
      const float loss = 0.5f * mu * stopped;
      float& uc = component(u, c);
      uc = uc > loss ? uc - loss : (uc < -loss ? uc + loss : 0.0f);
    }
    f.vel[row] = u;
  }
};

// Trilinear interpolation of one face component around local position (gx, gy, gz) in voxel
// units from the slot's first voxel: components sit at the face centre, offset by half a voxel
// along the two other axes.
APRON_HD inline float interpolate(const BrickGrid& grid, std::size_t slot, const Vec4* field, int c,
                                  float gx, float gy, float gz) {
  const float sx = c == 0 ? gx : gx - 0.5f, sy = c == 1 ? gy : gy - 0.5f,
              sz = c == 2 ? gz : gz - 0.5f;
  const float fx0 = floorf(sx), fy0 = floorf(sy), fz0 = floorf(sz);
  const int i0 = static_cast<int>(fx0), j0 = static_cast<int>(fy0), k0 = static_cast<int>(fz0);
  const float tx = sx - fx0, ty = sy - fy0, tz = sz - fz0;
  float sum = 0;
  for (int dk = 0; dk < 2; ++dk)
    for (int dj = 0; dj < 2; ++dj)
      for (int di = 0; di < 2; ++di) {
        const float w = (di ? tx : 1 - tx) * (dj ? ty : 1 - ty) * (dk ? tz : 1 - tz);
        sum += w * component(field[grid.row(slot, i0 + di, j0 + dj, k0 + dk)], c);
      }
  return sum;
}

struct GridToParticle {
  SlotGeometry g;
  const std::uint32_t* keys;
  GridFields f;
  G2PParams params;
  Vec4* pos;
  Vec4* vel;

  APRON_HD bool solid_at(const float x[3]) const {
    const BrickGrid& grid = g.grid;
    int v[3];
    for (int d = 0; d < 3; ++d) {
      const float c = floorf(grid.grid_coord(x[d], d));
      if (!(c >= 0 && c < static_cast<float>(grid.voxels[d]))) return true;
      v[d] = static_cast<int>(c);
    }
    return g.solid(grid, v[0], v[1], v[2]);
  }

  APRON_HD void operator()(std::size_t p) const {
    const BrickGrid& grid = g.grid;
    const std::size_t slot = keys[p] / grid.interior_per_brick();
    const int* o = g.origin + 3 * slot;
    Vec4 x = pos[p], v = vel[p];
    const float gx = grid.grid_coord(x.x, 0) - static_cast<float>(o[0]);
    const float gy = grid.grid_coord(x.y, 1) - static_cast<float>(o[1]);
    const float gz = grid.grid_coord(x.z, 2) - static_cast<float>(o[2]);
    float grid_v[3];
    for (int c = 0; c < 3; ++c) {
      const float now = interpolate(grid, slot, f.vel, c, gx, gy, gz);
      const float before = interpolate(grid, slot, f.vel_old, c, gx, gy, gz);
      const float flip = component(v, c) + (now - before);
      component(v, c) = params.flip_ratio * flip + (1 - params.flip_ratio) * now;
      grid_v[c] = now;
    }
    float q[3] = {x.x, x.y, x.z};
    for (int c = 0; c < 3; ++c) {
      const float was = q[c];
      q[c] += params.dt * grid_v[c];
      if (solid_at(q)) {
        q[c] = was;
        component(v, c) = 0;
      }
    }
    x.x = q[0], x.y = q[1], x.z = q[2];
    pos[p] = x;
    vel[p] = v;
  }
};

struct ParticleOwner {
  BrickGrid grid;
  const int* owner;
  const Vec4* pos;
  int* destination;
  APRON_HD void operator()(std::size_t p) const {
    const Vec4 x = pos[p];
    destination[p] = owner[grid.brick_key(grid.voxel_coord(x.x, 0), grid.voxel_coord(x.y, 1),
                                          grid.voxel_coord(x.z, 2))];
  }
};

struct SpeedSums {
  const Vec4* pos;
  const Vec4* vel;
  APRON_HD ParticleSums operator()(std::size_t p) const {
    const Vec4 v = vel[p];
    const double s2 = static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
                      static_cast<double>(v.z) * v.z;
    return {s2, sqrt(s2), static_cast<double>(pos[p].x)};
  }
};

struct CombineSums {
  APRON_HD ParticleSums operator()(const ParticleSums& a, const ParticleSums& b) const {
    return {a.speed2 + b.speed2, a.max_speed > b.max_speed ? a.max_speed : b.max_speed,
            a.max_x > b.max_x ? a.max_x : b.max_x};
  }
};

struct IsFluid {
  BrickGrid grid;
  const std::int32_t* marker;
  APRON_HD std::size_t operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    return marker[grid.row(v.slot, v.i, v.j, v.k)] == kFluid ? 1 : 0;
  }
};

}  // namespace

void particle_voxel_keys(const SlotGeometry& g, const std::int32_t* slot_of,
                         const DeviceVector<Vec4>& pos, std::size_t n,
                         DeviceVector<std::uint32_t>& keys, DeviceVector<std::uint32_t>& order) {
  resize_per_particle(keys, n);
  resize_per_particle(order, n);
  for_each_index(n, VoxelKeys{g, slot_of, raw(pos), raw(keys), raw(order)});
}

void voxel_ranges(const SlotGeometry& g, const DeviceVector<std::uint32_t>& sorted_keys,
                  std::size_t n, DeviceVector<std::uint32_t>& first,
                  DeviceVector<std::uint32_t>& last) {
  first.resize(g.interior_voxels());
  last.resize(g.interior_voxels());
  apron::fill(first.begin(), first.end(), 0u);
  apron::fill(last.begin(), last.end(), 0u);
  for_each_index(n, RunBounds{raw(sorted_keys), n, raw(first), raw(last)});
}

void particle_to_grid(const SlotGeometry& g, const DeviceVector<std::uint32_t>& first,
                      const DeviceVector<std::uint32_t>& last, const DeviceVector<Vec4>& pos,
                      const DeviceVector<Vec4>& vel, const GridFields& f) {
  for_each_index(g.stored_voxels(), GatherP2G{g, raw(first), raw(last), raw(pos), raw(vel), f});
}

void grid_velocities(const SlotGeometry& g, const GridFields& f, Vec3 gravity, float dt) {
  for_each_index(g.interior_voxels(), GridVelocities{g, f, gravity, dt});
}

float pressure_system(const SlotGeometry& g, const GridFields& f) {
  return transform_reduce(g.interior_voxels(), PressureSystem{g, f}, 0.0f, Maximum{});
}

double apply_laplacian(const SlotGeometry& g, const std::int32_t* stencil, const float* d,
                       float* q) {
  return transform_reduce(g.interior_voxels(), Laplacian{g, stencil, d, q}, 0.0, Plus{});
}

double precondition(const SlotGeometry& g, const std::int32_t* stencil, bool jacobi, const float* r,
                    float* z) {
  return transform_reduce(g.interior_voxels(), Precondition{g.grid, stencil, jacobi, r, z}, 0.0,
                          Plus{});
}

void cg_step(const SlotGeometry& g, double alpha, const float* d, const float* q, float* x,
             float* r) {
  for_each_index(g.interior_voxels(), CgStep{g.grid, static_cast<float>(alpha), d, q, x, r});
}

void cg_direction(const SlotGeometry& g, double beta, const float* z, float* d) {
  for_each_index(g.interior_voxels(), CgDirection{g.grid, static_cast<float>(beta), z, d});
}

void difference(const SlotGeometry& g, const float* a, const float* b, float* out) {
  for_each_index(g.interior_voxels(), Difference{g.grid, a, b, out});
}

float interior_max_abs(const SlotGeometry& g, const float* a) {
  return transform_reduce(g.interior_voxels(), InteriorAbs{g.grid, a}, 0.0f, Maximum{});
}

void clear(DeviceVector<float>& a) {
  apron::fill(a.begin(), a.end(), 0.0f);
}

void clear(DeviceVector<std::int32_t>& a) {
  apron::fill(a.begin(), a.end(), 0);
}

void subtract_pressure_gradient(const SlotGeometry& g, const GridFields& f) {
  for_each_index(g.interior_voxels(), PressureGradient{g, f});
}

void wall_friction(const SlotGeometry& g, const GridFields& f, Vec3 gravity, float dt, float mu) {
  for_each_index(g.interior_voxels(), WallFriction{g, f, gravity, dt, mu});
}

void grid_to_particle(const SlotGeometry& g, const DeviceVector<std::uint32_t>& keys,
                      const GridFields& f, G2PParams params, DeviceVector<Vec4>& pos,
                      DeviceVector<Vec4>& vel, std::size_t n) {
  for_each_index(n, GridToParticle{g, raw(keys), f, params, raw(pos), raw(vel)});
}

void particle_owners(const BrickGrid& grid, const int* owner, const DeviceVector<Vec4>& pos,
                     std::size_t n, DeviceVector<int>& destination) {
  resize_per_particle(destination, n);
  for_each_index(n, ParticleOwner{grid, owner, raw(pos), raw(destination)});
}

ParticleSums particle_sums(const DeviceVector<Vec4>& pos, const DeviceVector<Vec4>& vel,
                           std::size_t n) {
  return transform_reduce(n, SpeedSums{raw(pos), raw(vel)}, ParticleSums{}, CombineSums{});
}

std::size_t fluid_voxels(const SlotGeometry& g, const std::int32_t* marker) {
  return transform_reduce(g.interior_voxels(), IsFluid{g.grid, marker}, std::size_t{0}, Plus{});
}

}  // namespace apron::flip
