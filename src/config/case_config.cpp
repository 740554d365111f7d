#include "config/case_config.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

CheckpointConfig read_checkpoint(MapReader r) {
  CheckpointConfig c;
  c.every_steps = r.get<long>("every_steps", 0L);
  if (c.every_steps < 0) r.fail("every_steps", "must be 0 (off) or positive");
  c.every_time = r.get<double>("every_time", 0.0);
  if (c.every_time < 0) r.fail("every_time", "must be 0 (off) or positive [simulated s]");
  c.every_wall_minutes = r.get<double>("every_wall_minutes", 0.0);
  if (c.every_wall_minutes < 0) r.fail("every_wall_minutes", "must be 0 (off) or positive");
  c.keep = r.get<int>("keep", c.keep);
  if (c.keep < 1) r.fail("keep", "must be at least 1");
  c.at_end = r.get<bool>("at_end", true);
  r.finish();
  return c;
}

// A relative script path names a file under the working directory or, failing that, beside
// the case file (as mesh paths do).
std::string resolve_script(MapReader& r, const std::string& given) {
  namespace fs = std::filesystem;
  const fs::path path(given);
  if (path.extension() != ".py" && !fs::is_directory(path) && path.extension() != ".zip")
    r.fail("scripts", "'" + given +
                          "' is not a Catalyst script: give Python files (.py), or a .zip or "
                          "folder holding a Catalyst package");
  if (fs::exists(path)) return fs::absolute(path).string();
  const fs::path beside = fs::path(r.file()).parent_path() / path;
  if (!path.is_absolute() && fs::exists(beside)) return fs::absolute(beside).string();
  r.fail("scripts", "Catalyst script '" + given + "' does not exist (looked in the working " +
                        "directory " + fs::current_path().string() +
                        (path.is_absolute() ? std::string() : " and beside the case file") + ")");
}

CatalystConfig read_catalyst(MapReader r, bool present) {
  CatalystConfig c;
  c.enabled = present;
  for (const std::string& script : r.strings("scripts"))
    c.scripts.push_back(resolve_script(r, script));
  c.every = r.get<long>("every", c.every);
  if (c.every < 1) r.fail("every", "must be at least 1 (steps between Catalyst calls)");
  c.fail_on_error = r.get<bool>("fail_on_error", false);
  r.finish();
  return c;
}

// "a.b[2].c" -> scalar text, for every scalar of a YAML document.
void flatten(const YAML::Node& node, const std::string& path,
             std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& item : node)
      flatten(
          item.second,
          path.empty() ? item.first.as<std::string>() : path + "." + item.first.as<std::string>(),
          out);
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      flatten(node[i], path + "[" + std::to_string(i) + "]", out);
  } else if (node.IsScalar()) {
    out[path] = node.Scalar();
  }
}

bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

bool may_change_on_restart(const std::string& key) {
  for (const char* prefix : {"time.", "output.", "checkpoint.", "decomposition.", "catalyst."})
    if (key.rfind(prefix, 0) == 0) return true;
  return false;
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
  c.checkpoint = read_checkpoint(root.child("checkpoint"));
  const YAML::Node& document = yaml;  // const: looking a key up must not add it
  c.catalyst = read_catalyst(root.child("catalyst"), document["catalyst"].IsDefined());
  root.finish();
  check_geometry(c, root);
  c.effective_text = YAML::Dump(yaml) + "\n";
  return c;
}

void check_restart_compatible(const CaseConfig& now, const std::string& checkpoint_file,
                              const std::string& checkpoint_text) {
  std::map<std::string, std::string> before, after;
  flatten(YAML::Load(checkpoint_text), "", before);
  flatten(YAML::Load(now.effective_text), "", after);
  for (const auto& [key, value] : after)
    if (!before.count(key)) before[key] = "(not set)";
  std::string differences;
  for (const auto& [key, value] : before) {
    const std::string now_value = after.count(key) ? after[key] : "(not set)";
    if (!may_change_on_restart(key) && !same_value(value, now_value))
      differences += "\n  " + key + ": " + value + " in the checkpoint, " + now_value + " now";
  }
  if (!differences.empty())
    throw ConfigError(
        now.file + ": the case differs from the one " + checkpoint_file +
        " was written by, in keys a restart cannot change:" + differences +
        "\nOn restart only time.*, output.*, checkpoint.*, decomposition.* and catalyst.* (and "
        "the rank count) may change; start a new run for the others");
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
