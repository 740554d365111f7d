#include "planes/planes_config.hpp"

#include <algorithm>
#include <filesystem>

#include "config/yaml_reader.hpp"

namespace apron::planes {
namespace {

using config::MapReader;

void read_input(MapReader r, PlanesConfig& c) {
  if (r.has("file") && r.has("scene"))
    r.fail("scene", "give either a point-cloud 'file' or a synthetic 'scene', not both");
  if (r.has("file")) {
    c.file = config::resolve_input_path(r, "file", r.get<std::string>("file"), "point-cloud file");
    for (const char* key : {"points", "noise", "outliers", "seed"})
      if (r.has(key)) r.fail(key, "applies to a synthetic 'scene' only, not to a 'file'");
    r.finish();
    return;
  }
  c.scene.kind = r.choice("scene", scene_kinds(), c.scene.kind);
  const long points = r.get<long>("points", 100000L);
  if (points < 100 || points > 2'000'000'000L) r.fail("points", "must be between 100 and 2e9");
  c.scene.points = static_cast<std::uint64_t>(points);
  c.scene.noise = r.in_range("noise", 0, 0.1, c.scene.noise);
  c.scene.outliers = r.in_range("outliers", 0, 0.9, c.scene.outliers);
  const long seed = r.get<long>("seed", 1L);
  if (seed < 0) r.fail("seed", "must be a non-negative integer");
  c.scene.seed = static_cast<std::uint64_t>(seed);
  r.finish();
}

int int_in_range(MapReader& r, const std::string& key, int lo, int hi, int fallback) {
  const int v = r.get<int>(key, fallback);
  if (v < lo || v > hi)
    r.fail(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return v;
}

void read_octree(MapReader r, OctreeParams& o) {
  o.max_depth = int_in_range(r, "max_depth", 1, 21, o.max_depth);
  o.first_level = int_in_range(r, "first_level", 0, 21, o.first_level);
  if (o.first_level > o.max_depth) r.fail("first_level", "must not be deeper than max_depth");
  o.min_points = int_in_range(r, "min_points", 3, 1'000'000, o.min_points);
  o.thickness = r.in_range("thickness", 1, 1e6, o.thickness);
  o.isotropy = r.in_range("isotropy", 1, 1e6, o.isotropy);
  o.trim_divisor = r.in_range("trim_divisor", 0, 1e6, o.trim_divisor);
  o.trim_passes = int_in_range(r, "trim_passes", 0, 10, o.trim_passes);
  o.min_inlier_fraction = r.in_range("min_inlier_fraction", 0, 1, o.min_inlier_fraction);
  o.slab_kurtosis = r.in_range("slab_kurtosis", 0, 3, o.slab_kurtosis);
  o.slab_ratio = r.in_range("slab_ratio", 1, 1e6, o.slab_ratio);
  o.slab_points = int_in_range(r, "slab_points", 3, 1'000'000, o.slab_points);
  o.sibling_halves = r.get<bool>("sibling_halves", o.sibling_halves);
  o.coplanar_children = r.get<bool>("coplanar_children", o.coplanar_children);
  o.halves_noise = r.in_range("halves_noise", 1, 1e6, o.halves_noise);
  o.halves_density = r.in_range("halves_density", 0, 1, o.halves_density);
  o.seed_octants = r.get<bool>("seed_octants", o.seed_octants);
  o.seed_noise_bands = r.in_range("seed_noise_bands", 0, 1e6, o.seed_noise_bands);
  r.finish();
}

void read_accumulator(MapReader r, PlanesConfig& c) {
  c.phi_cells = int_in_range(r, "phi_cells", 4, 1000, c.phi_cells);
  c.rho_cells = int_in_range(r, "rho_cells", 4, 100000, c.rho_cells);
  const double cells = 2.0 / 3.14159 * 2 * c.phi_cells * c.phi_cells * c.rho_cells;
  if (cells > 2e8) r.fail("rho_cells", "phi_cells^2 * rho_cells * 1.3 must stay below 2e8 cells");
  c.min_votes = r.in_range("min_votes", 0, 1e15, c.min_votes);
  c.voting = r.choice("voting", {"sort", "atomic"}, c.voting);
  r.finish();
}

}  // namespace

std::shared_ptr<const PlanesConfig> read_planes_config(MapReader& root) {
  auto m = root.child("planes");
  auto c = std::make_shared<PlanesConfig>();
  read_input(m.child("input"), *c);
  read_octree(m.child("octree"), c->octree);
  read_accumulator(m.child("accumulator"), *c);
  const long min_points = m.get<long>("min_plane_points", 0L);
  if (min_points < 0) m.fail("min_plane_points", "must be 0 (use min_plane_fraction) or positive");
  c->min_plane_points = min_points;
  c->min_plane_fraction = m.in_range("min_plane_fraction", 0, 1, c->min_plane_fraction);
  c->merge_angle = m.in_range("merge_angle", 0, 45, c->merge_angle);
  c->merge_distance = m.in_range("merge_distance", 0, 0.5, c->merge_distance);
  c->grow_band = m.in_range("grow_band", 0, 100, c->grow_band);
  c->recover_orphans = m.get<bool>("recover_orphans", c->recover_orphans);
  c->verify_planes = m.get<bool>("verify_planes", c->verify_planes);
  c->residual.on = m.get<bool>("residual_pass", c->residual.on);
  c->residual.band = m.in_range("residual_band", 0, 100, c->residual.band);
  c->residual.noise = m.in_range("residual_noise", 0, 1e6, c->residual.noise);
  c->residual.widen = m.in_range("residual_widen", 0, 100, c->residual.widen);
  c->residual.votes = m.in_range("residual_votes", 0, 1, c->residual.votes);
  c->residual.passes = int_in_range(m, "residual_passes", 1, 20, c->residual.passes);
  c->residual.density = m.in_range("residual_density", 0, 1, c->residual.density);
  c->residual.reclaim = m.get<bool>("residual_reclaim", c->residual.reclaim);
  c->residual.octree_points = static_cast<std::uint64_t>(m.in_range(
      "residual_octree_points", 0, 1e12, static_cast<double>(c->residual.octree_points)));
  c->residual.first_level = int_in_range(m, "residual_first_level", 0, 21, c->residual.first_level);
  c->residual.trim_passes =
      int_in_range(m, "residual_trim_passes", -1, 10, c->residual.trim_passes);
  c->balance = m.choice("balance", {"cost", "count"}, c->balance);
  c->point_output = m.get<bool>("point_output", c->point_output);
  c->repeat = int_in_range(m, "repeat", 1, 1000, c->repeat);
  m.finish();
  return c;
}

config::WorkloadSchema planes_schema() {
  return {0, [](const config::CaseConfig&, MapReader& root) {
            return std::shared_ptr<const config::WorkloadSettings>(read_planes_config(root));
          }};
}

}  // namespace apron::planes
