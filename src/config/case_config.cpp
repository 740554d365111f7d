#include "config/case_config.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "config/yaml_reader.hpp"

namespace apron::config {
namespace {

Box read_box(MapReader& r, const std::string& key_lo = "lo", const std::string& key_hi = "hi") {
  const auto lo = r.vec3(key_lo);
  const auto hi = r.vec3(key_hi);
  Box b;
  for (int d = 0; d < 3; ++d) {
    if (!(hi[d] > lo[d]))
      r.fail(key_hi, "must be greater than '" + key_lo + "' in every coordinate");
    b.lo[d] = lo[d];
    b.hi[d] = hi[d];
  }
  return b;
}

bool inside(const Box& inner, const Box& outer, double tol) {
  for (int d = 0; d < 3; ++d)
    if (inner.lo[d] < outer.lo[d] - tol || inner.hi[d] > outer.hi[d] + tol) return false;
  return true;
}

std::string box_text(const Box& b) {
  std::ostringstream s;
  s << "[" << b.lo[0] << ", " << b.lo[1] << ", " << b.lo[2] << "] .. [" << b.hi[0] << ", "
    << b.hi[1] << ", " << b.hi[2] << "]";
  return s.str();
}

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
  r.finish();
  return c;
}

BoundaryConfig read_boundary(MapReader r) {
  BoundaryConfig c;
  c.ghost_particles = r.get<bool>("ghost_particles", true);
  c.layers = r.get<int>("layers", 3);
  if (c.layers < 1 || c.layers > 8) r.fail("layers", "must be between 1 and 8");
  if (r.has("tank")) {
    auto tank = r.child("tank");
    c.has_tank = true;
    c.tank = read_box(tank);
    c.tank_closed_top = tank.get<bool>("closed_top", false);
    tank.finish();
  } else {
    r.child("tank");
  }
  for (auto& s : r.list("solids")) {
    c.solids.push_back(read_box(s));
    s.finish();
  }
  r.finish();
  return c;
}

void check_geometry(CaseConfig& c, MapReader& root) {
  const double dx = c.sph.spacing;
  const double support = 2 * c.sph.smoothing_ratio * dx;
  for (std::size_t i = 0; i < c.fluid_blocks.size(); ++i) {
    const Box& b = c.fluid_blocks[i];
    if (!inside(b, c.domain, 1e-9))
      root.fail("fluid", "block " + std::to_string(i) + " " + box_text(b) +
                             " is not inside the domain " + box_text(c.domain) +
                             "; move the block or enlarge 'domain'");
    if (c.boundary.has_tank && !inside(b, c.boundary.tank, 1e-9))
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
    if (!inside(needed, c.domain, 1e-9))
      root.fail("boundary", "the tank " + box_text(c.boundary.tank) + " with " +
                                std::to_string(c.boundary.layers) +
                                " wall layers needs the domain to contain " + box_text(needed) +
                                "; enlarge 'domain'");
  }
  for (int d = 0; d < 3; ++d)
    if (c.domain.extent(d) < support)
      root.fail("domain", "is smaller than the interaction radius 2h = " + std::to_string(support) +
                              " in axis " + std::to_string(d));
}

}  // namespace

CaseConfig parse_case_text(const std::string& file, const std::string& text,
                           const std::vector<std::string>& overrides) {
  CaseConfig c;
  c.file = file;
  c.text = text;
  YAML::Node yaml = load_with_overrides(file, text, overrides);
  MapReader root(yaml, file, "");
  c.workload = root.choice("workload", {"sph", "meshdist"}, std::string("sph"));
  c.name = root.get<std::string>("name", std::string("case"));
  if (c.workload == "meshdist") {  // an analysis of two meshes: none of the SPH sections
    read_meshdist_case(c, root);
    return c;
  }
  {
    auto d = root.child("domain");
    c.domain = read_box(d);
    d.finish();
  }
  c.sph = read_sph(root.child("sph"));
  for (auto& block : root.list("fluid")) {
    c.fluid_blocks.push_back(read_box(block));
    block.finish();
  }
  if (c.fluid_blocks.empty()) root.fail("fluid", "at least one fluid block {lo, hi} is required");
  c.boundary = read_boundary(root.child("boundary"));
  {
    auto t = root.child("time");
    c.time.end = t.positive("end");
    c.time.max_steps = t.get<long>("max_steps", 0L);
    if (c.time.max_steps < 0) t.fail("max_steps", "must be 0 (no limit) or positive");
    t.finish();
  }
  {
    auto o = root.child("output");
    c.output.dir = o.get<std::string>("dir", c.output.dir);
    c.output.every = o.get<double>("every", 0.0);
    if (c.output.every < 0) o.fail("every", "must be 0 (no particle output) or positive");
    c.output.diagnostics_every = o.get<long>("diagnostics_every", c.output.diagnostics_every);
    if (c.output.diagnostics_every < 1) o.fail("diagnostics_every", "must be at least 1");
    c.output.progress_every = o.positive("progress_every", c.output.progress_every);
    o.finish();
  }
  {
    auto d = root.child("decomposition");
    c.decomposition.method = d.choice("method", {"cartesian", "rcb"}, c.decomposition.method);
    const auto dims = d.vec3("dims", std::array<double, 3>{0, 0, 0});
    for (int i = 0; i < 3; ++i) {
      if (dims[i] < 0 || dims[i] != std::floor(dims[i]))
        d.fail("dims", "must be three non-negative integers (0: chosen automatically)");
      c.decomposition.dims[i] = static_cast<int>(dims[i]);
    }
    c.decomposition.rebalance_threshold =
        d.in_range("rebalance_threshold", 1.0, 100.0, c.decomposition.rebalance_threshold);
    c.decomposition.rebalance_check_every =
        d.get<long>("rebalance_check_every", c.decomposition.rebalance_check_every);
    if (c.decomposition.rebalance_check_every < 1)
      d.fail("rebalance_check_every", "must be at least 1");
    d.finish();
  }
  root.finish();
  check_geometry(c, root);
  return c;
}

CaseConfig parse_case(const std::string& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file);
  if (!in)
    throw ConfigError(file + ": cannot open the case file (does it exist and is it readable?)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_case_text(file, text.str(), overrides);
}

}  // namespace apron::config
