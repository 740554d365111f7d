// Where checkpoints live, which is the latest, and pruning the old and the unfinished.
#include <algorithm>
#include <cstdio>

#include "io/checkpoint.hpp"

namespace apron::io {
namespace fs = std::filesystem;

namespace {

// "checkpoint_000000120.h5" -> 120; anything else -> nullopt.
std::optional<std::int64_t> step_of(const fs::path& file) {
  const std::string name = file.filename().string();
  long long step = -1;
  char tail = 0;
  if (std::sscanf(name.c_str(), "checkpoint_%lld.h%c", &step, &tail) != 2 || tail != '5' ||
      file.extension() != ".h5")
    return std::nullopt;
  return step;
}

// The checkpoint a leftover of an unfinished write belongs to, or an empty path: its .tmp
// (checkpoint_N.h5.tmp), and the lock files MPI-IO makes beside it and leaves when the run is
// killed (checkpoint_N.h5.tmp-<number>-<pid>.lock).
fs::path checkpoint_of_leftover(const fs::path& file) {
  std::string name = file.filename().string();
  if (file.extension() == ".lock") {
    const std::size_t tmp = name.rfind(".tmp-");
    if (tmp == std::string::npos) return {};
    name.resize(tmp + 4);
  }
  if (!name.ends_with(".tmp")) return {};
  name.resize(name.size() - 4);
  return file.parent_path() / name;
}

std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const fs::path& output_dir) {
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(checkpoint_dir(output_dir), ec))
    if (const auto step = step_of(item.path())) found.emplace_back(*step, item.path());
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

// ---- files -------------------------------------------------------------------------------------

fs::path checkpoint_dir(const fs::path& output_dir) {
  return output_dir / "checkpoints";
}

fs::path checkpoint_path(const fs::path& output_dir, std::int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "checkpoint_%09lld.h5", static_cast<long long>(step));
  return checkpoint_dir(output_dir) / name;
}

std::optional<fs::path> latest_checkpoint(const fs::path& output_dir) {
  const auto found = checkpoints_in(output_dir);
  if (found.empty()) return std::nullopt;
  return found.back().second;
}

void prune_checkpoints(const fs::path& output_dir, int keep) {
  const auto found = checkpoints_in(output_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < found.size(); ++i) {
    std::error_code ignored;
    fs::remove(found[i].second, ignored);
  }
}

int remove_stale_checkpoints(const fs::path& output_dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(checkpoint_dir(output_dir), ec)) {
    const fs::path& p = item.path();
    if (!step_of(checkpoint_of_leftover(p))) continue;
    std::error_code ignored;
    if (fs::remove(p, ignored)) ++removed;
  }
  return removed;
}

}  // namespace apron::io
