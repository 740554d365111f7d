#include "meshdist/meshdist_config.hpp"

#include <cstdio>
#include <filesystem>

#include "config/yaml_reader.hpp"

namespace apron::meshdist {
namespace {

using config::MapReader;

MeshInput read_mesh_input(MapReader r) {
  MeshInput m;
  m.file = config::resolve_input_path(r, "file", r.get<std::string>("file"), "mesh file");
  m.subdivide = r.get<int>("subdivide", 1);
  if (m.subdivide < 1 || m.subdivide > 64) r.fail("subdivide", "must be between 1 and 64");
  r.finish();
  return m;
}

void read_sampling(MapReader r, MeshdistConfig& c) {
  c.sample_vertices = r.get<bool>("vertices", true);
  if (r.has("count") && r.has("density"))
    r.fail("density", "give either an area sample 'count' or a 'density', not both");
  c.area_samples = r.get<long>("count", 0L);
  if (c.area_samples < 0) r.fail("count", "must be 0 (vertices only) or positive");
  // A bound without the meshes or the machine, so that `apron validate` refuses it too: 2^48
  // samples of ~40 bytes are 11 PB, beyond the memory of any machine. What the ranks' memory
  // holds is checked when the run starts.
  constexpr long kMaxAreaSamples = 1L << 48;
  if (c.area_samples > kMaxAreaSamples) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "%ld samples would need about %.3g TB of memory (~40 bytes each); at most 2^48 "
                  "(%.3g)",
                  c.area_samples, 40e-12 * static_cast<double>(c.area_samples),
                  static_cast<double>(kMaxAreaSamples));
    r.fail("count", text);
  }
  c.area_density = r.get<double>("density", 0.0);
  if (c.area_density < 0) r.fail("density", "must be 0 or a positive number of samples per area");
  const long seed = r.get<long>("seed", 1L);
  if (seed < 0) r.fail("seed", "must be a non-negative integer");
  c.seed = static_cast<std::uint64_t>(seed);
  if (!c.sample_vertices && c.area_samples == 0 && c.area_density == 0)
    r.fail("vertices", "with vertices: false, give an area sample 'count' or 'density'");
  r.finish();
}

}  // namespace

std::shared_ptr<const MeshdistConfig> read_meshdist_config(MapReader& root) {
  auto m = root.child("meshdist");
  auto md = std::make_shared<MeshdistConfig>();
  md->a = read_mesh_input(m.child("a"));
  md->b = read_mesh_input(m.child("b"));
  read_sampling(m.child("sampling"), *md);
  md->directions = m.choice("directions", {"both", "a_to_b", "b_to_a"}, md->directions);
  md->search = m.choice("search", {"grid", "brute_force"}, md->search);
  md->cell_factor = m.in_range("cell_factor", 0.1, 100, md->cell_factor);
  md->histogram_bins = m.get<int>("histogram_bins", md->histogram_bins);
  if (md->histogram_bins < 1 || md->histogram_bins > 10000)
    m.fail("histogram_bins", "must be between 1 and 10000");
  md->per_vertex_output = m.get<bool>("per_vertex_output", md->per_vertex_output);
  md->repeat = m.get<int>("repeat", md->repeat);
  if (md->repeat < 1 || md->repeat > 1000) m.fail("repeat", "must be between 1 and 1000");
  m.finish();
  return md;
}

config::WorkloadSchema meshdist_schema() {
  return {0, [](const config::CaseConfig&, MapReader& root) {
            return std::shared_ptr<const config::WorkloadSettings>(read_meshdist_config(root));
          }};
}

}  // namespace apron::meshdist
