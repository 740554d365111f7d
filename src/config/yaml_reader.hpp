// Typed, validated reading of a YAML mapping. Every error names the file, the line and column,
// the full key path and what is accepted; unknown keys are errors (with a "did you mean").
#pragma once

#include <yaml-cpp/yaml.h>

#include <array>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace apron::config {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads one mapping node. Call get/optional for every key the schema knows, then finish():
// any key not asked for is reported as unknown.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string file, std::string path);

  template <class T>
  T get(const std::string& key, std::optional<T> fallback = std::nullopt);
  template <class T>
  std::optional<T> optional(const std::string& key);
  double positive(const std::string& key, std::optional<double> fallback = std::nullopt);
  double in_range(const std::string& key, double lo, double hi,
                  std::optional<double> fallback = std::nullopt);
  std::string choice(const std::string& key, const std::vector<std::string>& accepted,
                     std::optional<std::string> fallback = std::nullopt);
  std::array<double, 3> vec3(const std::string& key,
                             std::optional<std::array<double, 3>> fallback = std::nullopt);
  bool has(const std::string& key) const;
  MapReader child(const std::string& key);                   // a nested mapping (empty if absent)
  std::vector<MapReader> list(const std::string& key);       // a sequence of mappings
  std::vector<std::string> strings(const std::string& key);  // a sequence of strings

  void finish();
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& file() const { return file_; }
  std::string where(const std::string& key) const;  // "file:line:col: key 'a.b'"

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::set<std::string> known_;
};

// The input file a key names (`what` says what it is in messages: "mesh file"): a relative path
// names a file under the working directory (cases are run from the repository root) or, failing
// that, beside the case file. A missing file fails through r.fail() naming both places.
std::string resolve_input_path(MapReader& r, const std::string& key, const std::string& given,
                               const std::string& what);

// Loads a YAML file (or string) and applies --set key.path=value overrides.
YAML::Node load_with_overrides(const std::string& file, const std::string& text,
                               const std::vector<std::string>& overrides);

}  // namespace apron::config
