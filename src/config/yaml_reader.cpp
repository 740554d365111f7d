#include "config/yaml_reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

namespace apron::config {
namespace {

std::string join(const std::set<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  if constexpr (std::is_integral_v<T>) return "an integer";
  if constexpr (std::is_floating_point_v<T>) return "a number";
  return "a string";
}

// Every mapping key must be a plain name, given once: yaml-cpp keeps both values of a repeated
// key and lookups see the first, so a second one would be ignored without a word. Iterative,
// with a budget of nodes and of depth, so that deep nesting or aliases expanding without end
// cannot exhaust the stack, the memory or the time. An alias inside its own anchor
// (`a: &x {b: *x}`) makes a cycle that yaml-cpp accepts: it nests without end, and the paths of a
// walk down it grow without end, so depth is what refuses it.
struct PendingNode {
  YAML::Node node;
  std::string path;
  std::size_t depth;
};

void check_keys(const YAML::Node& root, const std::string& file) {
  constexpr std::size_t kMaxNodes = 1'000'000;
  constexpr std::size_t kMaxDepth = 64;
  std::vector<PendingNode> todo{{root, "", 0}};
  for (std::size_t visited = 0; !todo.empty(); ++visited) {
    if (visited > kMaxNodes)
      throw ConfigError(file +
                        ": the case expands to more than 1,000,000 YAML nodes (aliases?); "
                        "a case file describes a run, large data belongs in files it names");
    const auto [node, path, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxDepth)
      throw ConfigError(file + ": key '" + path.substr(0, 200) +
                        (path.size() > 200 ? "...'" : "'") + " nests more than " +
                        std::to_string(kMaxDepth) +
                        " levels deep (an alias inside its own anchor?); case files nest a few "
                        "levels");
    if (node.IsSequence()) {
      for (std::size_t i = 0; i < node.size(); ++i)
        todo.push_back({node[i], path + "[" + std::to_string(i) + "]", depth + 1});
      continue;
    }
    if (!node.IsMap()) continue;
    std::map<std::string, int> lines;
    for (const auto& kv : node) {
      const auto at = [&](const YAML::Mark& m) {
        return file + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
      };
      if (!kv.first.IsScalar())
        throw ConfigError(at(kv.first.Mark()) + ": a key under '" +
                          (path.empty() ? "(top)" : path) +
                          "' is a list or mapping; keys are plain names (key: value)");
      const std::string key = kv.first.Scalar();
      const std::string full = path.empty() ? key : path + "." + key;
      const auto [it, first] = lines.emplace(key, kv.first.Mark().line + 1);
      if (!first)
        throw ConfigError(at(kv.first.Mark()) + ": key '" + full + "' is given twice (lines " +
                          std::to_string(it->second) + " and " +
                          std::to_string(kv.first.Mark().line + 1) + "); keep one");
      todo.push_back({kv.second, full, depth + 1});
    }
  }
}

}  // namespace

MapReader::MapReader(const YAML::Node& node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {
  if (node_ && !node_.IsNull() && !node_.IsMap())
    throw ConfigError(where("") + ": expected a mapping of keys to values");
}

std::string MapReader::where(const std::string& key) const {
  YAML::Node at = node_;
  if (!key.empty() && node_ && node_.IsMap() && node_[key]) at = node_[key];
  std::ostringstream out;
  out << file_;
  if (at && at.Mark().line >= 0) out << ":" << at.Mark().line + 1 << ":" << at.Mark().column + 1;
  const std::string full = path_.empty() ? key : (key.empty() ? path_ : path_ + "." + key);
  if (!full.empty()) out << ": key '" << full << "'";
  return out.str();
}

void MapReader::fail(const std::string& key, const std::string& message) const {
  throw ConfigError(where(key) + ": " + message);
}

bool MapReader::has(const std::string& key) const {
  return node_ && node_.IsMap() && node_[key] && !node_[key].IsNull();
}

template <class T>
std::optional<T> MapReader::optional(const std::string& key) {
  known_.insert(key);
  if (!has(key)) return std::nullopt;
  const YAML::Node value = node_[key];
  if (!value.IsScalar()) fail(key, std::string("expected ") + type_name<T>());
  try {
    T result = value.as<T>();
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(result)) fail(key, "must be a finite number");
    return result;
  } catch (const YAML::Exception&) {
    fail(key, std::string("expected ") + type_name<T>() + ", got '" + value.Scalar() + "'");
  }
}

template <class T>
T MapReader::get(const std::string& key, std::optional<T> fallback) {
  if (auto v = optional<T>(key)) return *v;
  if (fallback) return *fallback;
  fail(key, std::string("is required (") + type_name<T>() + ")");
}

double MapReader::positive(const std::string& key, std::optional<double> fallback) {
  const double v = get<double>(key, fallback);
  if (!(v > 0)) fail(key, "must be greater than 0 (got " + std::to_string(v) + ")");
  return v;
}

double MapReader::in_range(const std::string& key, double lo, double hi,
                           std::optional<double> fallback) {
  const double v = get<double>(key, fallback);
  if (v < lo || v > hi) {
    std::ostringstream msg;
    msg << "must be between " << lo << " and " << hi << " (got " << v << ")";
    fail(key, msg.str());
  }
  return v;
}

std::string MapReader::choice(const std::string& key, const std::vector<std::string>& accepted,
                              std::optional<std::string> fallback) {
  const std::string v = get<std::string>(key, fallback);
  if (std::find(accepted.begin(), accepted.end(), v) == accepted.end()) {
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + a;
    fail(key, "'" + v + "' is not one of: " + list);
  }
  return v;
}

std::array<double, 3> MapReader::vec3(const std::string& key,
                                      std::optional<std::array<double, 3>> fallback) {
  known_.insert(key);
  if (!has(key)) {
    if (fallback) return *fallback;
    fail(key, "is required (a list of 3 numbers, e.g. [0, 0, 0])");
  }
  const YAML::Node v = node_[key];
  if (!v.IsSequence() || v.size() != 3) fail(key, "expected a list of 3 numbers, e.g. [0, 0, 0]");
  std::array<double, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    try {
      out[i] = v[i].as<double>();
    } catch (const YAML::Exception&) {
      fail(key, "expected a list of 3 numbers, e.g. [0, 0, 0]");
    }
    if (!std::isfinite(out[i])) fail(key, "must hold finite numbers");
  }
  return out;
}

MapReader MapReader::child(const std::string& key) {
  known_.insert(key);
  const std::string path = path_.empty() ? key : path_ + "." + key;
  return MapReader(has(key) ? node_[key] : YAML::Node(), file_, path);
}

std::vector<MapReader> MapReader::list(const std::string& key) {
  known_.insert(key);
  std::vector<MapReader> out;
  if (!has(key)) return out;
  const YAML::Node seq = node_[key];
  if (!seq.IsSequence()) fail(key, "expected a list of mappings");
  const std::string path = path_.empty() ? key : path_ + "." + key;
  for (std::size_t i = 0; i < seq.size(); ++i)
    out.emplace_back(seq[i], file_, path + "[" + std::to_string(i) + "]");
  return out;
}

std::vector<std::string> MapReader::strings(const std::string& key) {
  known_.insert(key);
  std::vector<std::string> out;
  if (!has(key)) return out;
  const YAML::Node seq = node_[key];
  if (!seq.IsSequence()) fail(key, "expected a list of strings, e.g. [a.py, b.py]");
  for (const auto& item : seq) {
    if (!item.IsScalar() || item.Scalar().empty())
      fail(key, "expected a list of strings, e.g. [a.py, b.py]");
    out.push_back(item.Scalar());
  }
  return out;
}

void MapReader::finish() {
  if (!node_ || !node_.IsMap()) return;
  for (const auto& kv : node_) {
    const std::string key = kv.first.as<std::string>();
    if (known_.count(key)) continue;
    std::string best;
    std::size_t best_distance = 3;
    for (const auto& k : known_)
      if (const auto d = edit_distance(key, k); d < best_distance) best = k, best_distance = d;
    std::ostringstream msg;
    msg << file_ << ":" << kv.first.Mark().line + 1 << ":" << kv.first.Mark().column + 1
        << ": unknown key '" << (path_.empty() ? key : path_ + "." + key) << "'";
    if (!best.empty()) msg << " (did you mean '" << best << "'?)";
    msg << "; accepted here: " << join(known_);
    throw ConfigError(msg.str());
  }
}

template std::optional<double> MapReader::optional<double>(const std::string&);
template std::optional<int> MapReader::optional<int>(const std::string&);
template std::optional<long> MapReader::optional<long>(const std::string&);
template std::optional<bool> MapReader::optional<bool>(const std::string&);
template std::optional<std::string> MapReader::optional<std::string>(const std::string&);
template double MapReader::get<double>(const std::string&, std::optional<double>);
template int MapReader::get<int>(const std::string&, std::optional<int>);
template long MapReader::get<long>(const std::string&, std::optional<long>);
template bool MapReader::get<bool>(const std::string&, std::optional<bool>);
template std::string MapReader::get<std::string>(const std::string&, std::optional<std::string>);

YAML::Node load_with_overrides(const std::string& file, const std::string& text,
                               const std::vector<std::string>& overrides) {
  // yaml-cpp takes ~170 bytes of memory per byte of text: a case file describes a run; bulk data
  // (meshes, point clouds) goes in the files it names.
  constexpr std::size_t kMaxCaseBytes = 1 << 20;
  if (text.size() > kMaxCaseBytes)
    throw ConfigError(file + ": the case file is " + std::to_string(text.size() >> 10) +
                      " KiB; case files are limited to 1024 KiB (put bulk data in files the case "
                      "names)");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(file + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(file + ": expected a YAML mapping at the top level");
  check_keys(root, file);
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--set " + o + ": expected key.path=value, e.g. --set time.end=0.5");
    const std::string path = o.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      throw ConfigError("--set " + o + ": value is not valid YAML: " + e.msg);
    }
    // Walk (and create) the mapping path; yaml-cpp nodes are handles, so assign through a stack.
    std::vector<std::string> keys;
    std::stringstream ss(path);
    for (std::string k; std::getline(ss, k, '.');) keys.push_back(k);
    std::vector<YAML::Node> chain{root};
    for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
      YAML::Node next = chain.back()[keys[i]];
      if (next.IsDefined() && !next.IsNull() && !next.IsMap())
        throw ConfigError("--set " + o + ": '" + keys[i] + "' is not a mapping");
      chain.push_back(next);
    }
    chain.back()[keys.back()] = value;
  }
  // The overrides' values are YAML too: the same rules (and budgets) for them.
  if (!overrides.empty()) check_keys(root, file);
  return root;
}

std::string resolve_input_path(MapReader& r, const std::string& key, const std::string& given,
                               const std::string& what) {
  namespace fs = std::filesystem;
  // A name the file system refuses (too long, say) is a file that does not exist, not an
  // exception.
  const auto exists = [](const fs::path& p) {
    std::error_code ec;
    return fs::exists(p, ec);
  };
  const fs::path path(given);
  if (path.is_absolute() || exists(path)) {
    if (!exists(path)) r.fail(key, what + " '" + given + "' does not exist");
    return given;
  }
  const fs::path beside = fs::path(r.file()).parent_path() / path;
  if (exists(beside)) return beside.string();
  r.fail(key, what + " '" + given + "' does not exist (looked in the working directory " +
                  fs::current_path().string() + " and beside the case file, as " + beside.string() +
                  ")");
}

}  // namespace apron::config
