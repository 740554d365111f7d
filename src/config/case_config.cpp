#include "config/case_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "config/yaml_reader.hpp"

namespace apron::config {

Box read_box(MapReader& r, const std::string& key_lo, const std::string& key_hi) {
  const auto lo = r.vec3(key_lo);
  const auto hi = r.vec3(key_hi);
  Box b;
  for (int d = 0; d < 3; ++d) {
    if (!(hi[d] > lo[d]))
      r.fail(key_hi, "must be greater than '" + key_lo + "' in every coordinate");
    if (!std::isfinite(hi[d] - lo[d]))
      r.fail(key_hi, "the box is too large: its extent overflows a double; use smaller units");
    b.lo[d] = lo[d];
    b.hi[d] = hi[d];
  }
  return b;
}

bool box_inside(const Box& inner, const Box& outer, double tol) {
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

namespace {

// A relative script path names a file under the working directory or, failing that, beside
// the case file (as mesh paths do). A name the file system refuses is a script that does not
// exist (resolve_input_path), not an exception.
std::string resolve_script(MapReader& r, const std::string& given) {
  namespace fs = std::filesystem;
  const fs::path path(given);
  std::error_code ec;
  if (path.extension() != ".py" && !fs::is_directory(path, ec) && path.extension() != ".zip")
    r.fail("scripts", "'" + given +
                          "' is not a Catalyst script: give Python files (.py), or a .zip or "
                          "folder holding a Catalyst package");
  return fs::absolute(resolve_input_path(r, "scripts", given, "Catalyst script")).string();
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

DecompositionConfig read_decomposition(MapReader d) {
  DecompositionConfig c;
  c.method = d.choice("method", {"cartesian", "rcb"}, c.method);
  const auto dims = d.vec3("dims", std::array<double, 3>{0, 0, 0});
  // The product of the dims is a rank count: an int (a larger value would not even convert).
  constexpr double kMaxRanks = std::numeric_limits<int>::max();
  double ranks = 1;
  for (int i = 0; i < 3; ++i) {
    if (dims[i] < 0 || dims[i] != std::floor(dims[i]) || dims[i] > kMaxRanks)
      d.fail("dims", "must be three non-negative integers (0: chosen automatically)");
    ranks *= std::max(dims[i], 1.0);
    c.dims[i] = static_cast<int>(dims[i]);
  }
  if (ranks > kMaxRanks) d.fail("dims", "their product (the rank count) is too large");
  c.rebalance_threshold = d.in_range("rebalance_threshold", 1.0, 100.0, c.rebalance_threshold);
  c.rebalance_check_every = d.get<long>("rebalance_check_every", c.rebalance_check_every);
  if (c.rebalance_check_every < 1) d.fail("rebalance_check_every", "must be at least 1");
  d.finish();
  return c;
}

// A folder the run can create and write: caught here, with the key, rather than as a raw file
// system error after the ranks have started.
void check_output_dir(MapReader& o, const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) o.fail("dir", "must name a folder (e.g. out/my_case)");
  if (dir.find('\0') != std::string::npos) o.fail("dir", "holds a NUL character");
  for (const auto& part : fs::path(dir))
    if (part.native().size() > 255)
      o.fail("dir", "a name in it is longer than 255 bytes, which file systems refuse");
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error))
    o.fail("dir", "'" + dir + "' exists and is not a folder");
}

// The shared sections the workload takes (config/workload_schema.hpp); those it does not take
// are left unread, so the root's finish() refuses them as unknown keys.
void read_shared_sections(CaseConfig& c, MapReader& root, unsigned sections, bool has_catalyst) {
  if (sections & kDomain) {
    auto d = root.child("domain");
    c.domain = read_box(d);
    d.finish();
  }
  if (sections & kTime) {
    auto t = root.child("time");
    c.time.end = t.positive("end");
    c.time.max_steps = t.get<long>("max_steps", 0L);
    if (c.time.max_steps < 0) t.fail("max_steps", "must be 0 (no limit) or positive");
    t.finish();
  }
  {
    auto o = root.child("output");
    c.output.dir = o.get<std::string>("dir", c.output.dir);
    check_output_dir(o, c.output.dir);
    c.output.progress_every = o.positive("progress_every", c.output.progress_every);
    if (sections & kOutputSeries) {
      c.output.every = o.get<double>("every", 0.0);
      if (c.output.every < 0) o.fail("every", "must be 0 (no field output) or positive");
      c.output.diagnostics_every = o.get<long>("diagnostics_every", c.output.diagnostics_every);
      if (c.output.diagnostics_every < 1) o.fail("diagnostics_every", "must be at least 1");
    }
    o.finish();
  }
  if (sections & kDecomposition) c.decomposition = read_decomposition(root.child("decomposition"));
  if (sections & kCheckpoint) c.checkpoint = read_checkpoint(root.child("checkpoint"));
  if (sections & kCatalyst) c.catalyst = read_catalyst(root.child("catalyst"), has_catalyst);
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

}  // namespace

CaseConfig parse_case_text(const std::string& file, const std::string& text,
                           const std::vector<std::string>& overrides) {
  CaseConfig c;
  c.file = file;
  c.text = text;
  YAML::Node yaml = load_with_overrides(file, text, overrides);
  MapReader root(yaml, file, "");
  c.workload = root.choice("workload", workload_names());
  const WorkloadSchema& schema = *find_schema(c.workload);
  c.name = root.get<std::string>("name", std::string("case"));
  const YAML::Node& document = yaml;  // const: looking a key up must not add it
  read_shared_sections(c, root, schema.sections, document["catalyst"].IsDefined());
  c.settings = schema.read(c, root);
  root.finish();
  c.effective_text = YAML::Dump(yaml) + "\n";
  return c;
}

std::string scalar_at(const std::string& yaml_text, const std::string& key_path) {
  std::map<std::string, std::string> scalars;
  flatten(YAML::Load(yaml_text), "", scalars);
  const auto it = scalars.find(key_path);
  return it == scalars.end() ? "" : it->second;
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
