#include "sph/sph_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "config/mesh_shape.hpp"
#include "config/yaml_reader.hpp"
#include "sph/case_setup.hpp"

namespace apron::sph {
namespace {

using config::box_inside;
using config::box_text;
using config::MapReader;
using config::read_box;
using config::read_mesh_shape;

SphConfig read_sph(MapReader r) {
  SphConfig c;
  c.spacing = r.positive("spacing");
  c.smoothing_ratio = r.in_range("smoothing_ratio", 1.0, 2.5, c.smoothing_ratio);
  c.rest_density = r.positive("rest_density", c.rest_density);
  if (r.has("sound_speed"))
    c.sound_speed = r.positive("sound_speed");
  else
    r.optional<double>("sound_speed");
  c.alpha = r.in_range("alpha", 0, 1, c.alpha);
  c.viscosity = r.get<double>("viscosity", 0.0);
  if (!(c.viscosity >= 0)) r.fail("viscosity", "must be 0 (none) or positive [m^2/s]");
  if (r.has("wall_viscosity") && r.has("wall_alpha"))
    r.fail("wall_viscosity", "give either wall_alpha or wall_viscosity, not both");
  c.wall_alpha = r.in_range("wall_alpha", 0, 1, c.wall_alpha);
  c.wall_viscosity = r.get<double>("wall_viscosity", 0.0);
  if (c.wall_viscosity < 0) r.fail("wall_viscosity", "must be 0 (use wall_alpha) or positive");
  c.gravity = r.vec3("gravity", c.gravity);
  c.cfl = r.in_range("cfl", 1e-3, 0.5, c.cfl);
  c.force_factor = r.in_range("force_factor", 1e-3, 0.5, c.force_factor);
  c.clamp_negative_pressure = r.get<bool>("clamp_negative_pressure", true);
  c.cell_divisions = r.get<int>("cell_divisions", c.cell_divisions);
  if (c.cell_divisions < 1 || c.cell_divisions > 3) r.fail("cell_divisions", "must be 1, 2 or 3");
  c.hydrostatic_start =
      r.choice("initial_state", {"hydrostatic", "lattice"}, "hydrostatic") == "hydrostatic";
  c.lattice_gradient_correction =
      r.choice("gradient_correction", {"lattice", "none"}, "lattice") == "lattice";
  c.continuity_density =
      r.choice("density", {"summation", "continuity"}, "summation") == "continuity";
  c.density_diffusion = r.in_range("density_diffusion", 0, 1, c.density_diffusion);
  r.finish();
  return c;
}

}  // namespace

int BoundaryConfig::moving_solids() const {
  int n = 0;
  for (const auto* motions : {&box_motions, &mesh_motions})
    for (const PrescribedMotion& m : *motions) n += m.moves();
  return n;
}

namespace {

BoundaryConfig read_boundary(MapReader r) {
  BoundaryConfig c;
  c.ghost_particles = r.get<bool>("ghost_particles", true);
  c.wall_pressure_from_fluid =
      r.choice("wall_pressure", {"fluid_average", "mirror"}, "fluid_average") == "fluid_average";
  c.layers = r.get<int>("layers", 3);
  if (c.layers < 1 || c.layers > 8) r.fail("layers", "must be between 1 and 8");
  if (r.has("tank")) {
    auto tank = r.child("tank");
    c.has_tank = true;
    if (tank.has("mesh")) {
      c.tank_mesh = read_mesh_shape(tank, true);
      c.tank = c.tank_mesh->bounds;
      c.tank_closed_top = !c.tank_mesh->open;
    } else {
      c.tank = read_box(tank);
      c.tank_closed_top = tank.get<bool>("closed_top", false);
    }
    tank.finish();
  } else {
    r.child("tank");
  }
  for (auto& s : r.list("solids")) {
    if (s.has("mesh")) {
      c.solid_meshes.push_back(read_mesh_shape(s, false));
      c.mesh_motions.push_back(read_motion(s));
    } else {
      c.solids.push_back(read_box(s));
      c.box_motions.push_back(read_motion(s));
    }
    s.finish();
  }
  if (c.moving_solids() > kMaxMovingSolids)
    r.fail("solids", std::to_string(c.moving_solids()) + " solids move; at most " +
                         std::to_string(kMaxMovingSolids) + " may");
  r.finish();
  return c;
}

// The overlap of two boxes, thicker than round-off in every axis.
bool overlap(const Box& a, const Box& b) {
  for (int d = 0; d < 3; ++d) {
    const double tol = 1e-9 * std::max(a.extent(d), b.extent(d));
    if (std::min(a.hi[d], b.hi[d]) - std::max(a.lo[d], b.lo[d]) <= tol) return false;
  }
  return true;
}

// Overlapping fluid blocks would put two particles at one place (and blow up); fluid inside a
// solid would start inside a wall.
void check_overlaps(const SphCase& c, MapReader& root) {
  const auto& fluid = c.fluid_blocks;
  for (std::size_t i = 0; i < fluid.size(); ++i) {
    for (std::size_t j = i + 1; j < fluid.size(); ++j)
      if (overlap(fluid[i], fluid[j]))
        root.fail("fluid", "blocks " + std::to_string(i) + " " + box_text(fluid[i]) + " and " +
                               std::to_string(j) + " " + box_text(fluid[j]) +
                               " overlap; split them so that they only touch");
    for (std::size_t k = 0; k < c.boundary.solids.size(); ++k)
      if (overlap(fluid[i], c.boundary.solids[k]))
        root.fail("boundary", "solids[" + std::to_string(k) + "] " +
                                  box_text(c.boundary.solids[k]) + " overlaps fluid block " +
                                  std::to_string(i) + " " + box_text(fluid[i]) +
                                  "; fluid cannot start inside a solid");
  }
}

// The lattice counts and the cell grid, in float64 before anything is allocated: a spacing far
// below the blocks' size (or a domain far beyond them) would overflow their integer sizes.
void check_particle_count(const Box& domain, const SphCase& c, MapReader& root) {
  double total = 0;
  std::vector<Box> blocks = c.fluid_blocks;  // a fluid mesh fills at most its bounds' lattice
  for (const MeshShape& m : c.fluid_meshes) blocks.push_back(m.bounds);
  for (const Box& b : blocks) {
    double n = 1;
    for (int d = 0; d < 3; ++d) n *= lattice_points(b.extent(d), c.sph.spacing);
    total += n;
  }
  constexpr double kMaxParticles = 1e13;  // far beyond any machine, far within int64
  if (!(total <= kMaxParticles)) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "gives %.3g fluid particles (at most 1e13 can be counted); increase it", total);
    root.fail("sph", std::string("spacing ") + text);
  }
  // The cell grid over the domain (cells of 2h / cell_divisions) has 32-bit cell indices. A
  // grid too large because there are too many particles is the memory check's to report (with
  // the GiB they need); one too large because the domain dwarfs the fluid is reported here.
  double cells = 1;
  const double cell = 2 * c.sph.smoothing_ratio * c.sph.spacing / c.sph.cell_divisions;
  for (int d = 0; d < 3; ++d) cells *= std::ceil(domain.extent(d) / cell);
  if (!(cells < 4e9) && !(cells <= 1000 * total)) {
    char text[240];
    std::snprintf(text, sizeof text,
                  "needs a cell grid of %.3g cells at sph.spacing (at most 4e9), more than 1000 "
                  "per fluid particle; shrink the domain to where the fluid can go",
                  cells);
    root.fail("domain", text);
  }
}

// Mesh files hold float32 coordinates: a mesh drawn to a domain's face may pass it by one
// float rounding, which is not outside.
double float_slack(const Box& b) {
  double largest = 0;
  for (int d = 0; d < 3; ++d) largest = std::max({largest, std::fabs(b.lo[d]), std::fabs(b.hi[d])});
  return 1e-6 * largest + 1e-9;
}

// Solid meshes (with their inner wall layers) and fluid meshes lie inside the domain; fluid
// meshes inside the tank.
void check_mesh_bounds(const Box& domain, const SphCase& c, MapReader& root) {
  for (std::size_t k = 0; k < c.boundary.solid_meshes.size(); ++k) {
    const MeshShape& m = c.boundary.solid_meshes[k];
    if (!box_inside(m.bounds, domain, float_slack(m.bounds)))
      root.fail("boundary", "solids[" + std::to_string(k) + "] mesh '" + m.file + "' placed at " +
                                box_text(m.bounds) + " is not inside the domain " +
                                box_text(domain) + "; move it (offset) or enlarge 'domain'");
  }
  for (std::size_t k = 0; k < c.fluid_meshes.size(); ++k) {
    const MeshShape& m = c.fluid_meshes[k];
    const Box& limit = c.boundary.has_tank ? c.boundary.tank : domain;
    if (!box_inside(m.bounds, limit, float_slack(m.bounds)))
      root.fail("fluid", "mesh '" + m.file + "' placed at " + box_text(m.bounds) +
                             " is not inside " +
                             (c.boundary.has_tank ? "boundary.tank " : "the domain ") +
                             box_text(limit) + "; move it (offset) or scale it");
  }
}

void check_geometry(const config::CaseConfig& shared, const SphCase& c, MapReader& root) {
  const Box& domain = shared.domain;
  const double dx = c.sph.spacing;
  const double support = 2 * c.sph.smoothing_ratio * dx;
  for (std::size_t i = 0; i < c.fluid_blocks.size(); ++i) {
    const Box& b = c.fluid_blocks[i];
    if (!box_inside(b, domain, 1e-9))
      root.fail("fluid", "block " + std::to_string(i) + " " + box_text(b) +
                             " is not inside the domain " + box_text(domain) +
                             "; move the block or enlarge 'domain'");
    if (c.boundary.has_tank && !box_inside(b, c.boundary.tank, float_slack(c.boundary.tank)))
      root.fail("fluid", "block " + std::to_string(i) + " " + box_text(b) +
                             " is not inside boundary.tank " + box_text(c.boundary.tank));
    for (int d = 0; d < 3; ++d)
      if (b.extent(d) < dx)
        root.fail("fluid", "block " + std::to_string(i) + " is thinner than sph.spacing in axis " +
                               std::to_string(d));
  }
  if (c.boundary.has_tank) {
    const Box walls = c.boundary.tank.expanded(c.boundary.layers * dx);
    Box needed = walls;
    if (!c.boundary.tank_closed_top) needed.hi[2] = c.boundary.tank.hi[2];
    if (!box_inside(needed, domain, float_slack(needed)))
      root.fail("boundary", "the tank " + box_text(c.boundary.tank) + " with " +
                                std::to_string(c.boundary.layers) +
                                " wall layers needs the domain to contain " + box_text(needed) +
                                "; enlarge 'domain'");
  }
  check_mesh_bounds(domain, c, root);
  check_overlaps(c, root);
  check_particle_count(domain, c, root);
  for (int d = 0; d < 3; ++d)
    if (domain.extent(d) < support)
      root.fail("domain", "is smaller than the interaction radius 2h = " + std::to_string(support) +
                              " in axis " + std::to_string(d));
}

}  // namespace

std::shared_ptr<const SphCase> read_sph_case(const config::CaseConfig& shared, MapReader& root) {
  auto c = std::make_shared<SphCase>();
  c->sph = read_sph(root.child("sph"));
  for (auto& block : root.list("fluid")) {
    if (block.has("mesh"))
      c->fluid_meshes.push_back(read_mesh_shape(block, false));
    else
      c->fluid_blocks.push_back(read_box(block));
    block.finish();
  }
  if (c->fluid_blocks.empty() && c->fluid_meshes.empty())
    root.fail("fluid", "at least one fluid block {lo, hi} or {mesh: file} is required");
  c->boundary = read_boundary(root.child("boundary"));
  for (auto& g : root.list("gauges")) {
    c->gauges.push_back({g.get<double>("x"), g.get<double>("y")});
    const Box& d = shared.domain;
    if (!(c->gauges.back().x >= d.lo[0] && c->gauges.back().x <= d.hi[0] &&
          c->gauges.back().y >= d.lo[1] && c->gauges.back().y <= d.hi[1]))
      g.fail("x", "the gauge (x, y) must lie over the domain");
    g.finish();
  }
  check_geometry(shared, *c, root);
  return c;
}

config::WorkloadSchema sph_schema() {
  return {config::kTimeStepping, [](const config::CaseConfig& c, MapReader& root) {
            return std::shared_ptr<const config::WorkloadSettings>(read_sph_case(c, root));
          }};
}

}  // namespace apron::sph
