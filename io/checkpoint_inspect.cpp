// `apron inspect`: what a checkpoint or an output file holds, in this process or a child.
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "io/checkpoint.hpp"
#include "io/checkpoint_format.hpp"
#include "kernels/common/element_hash.hpp"

namespace apron::io {
namespace fs = std::filesystem;
using namespace checkpoint_format;

namespace {

std::string size_text(double bytes) {
  char text[32];
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) bytes /= 1000, ++u;
  std::snprintf(text, sizeof text, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return text;
}

// Reads a dataset in blocks and returns its checksum; `look` sees each block too (its rows and the
// index of the first).
using BlockVisitor = std::function<void(const void*, std::uint64_t, std::uint64_t)>;
std::uint64_t checksum_of(const Hdf5File& file, const DatasetInfo& info,
                          const BlockVisitor& look = {}) {
  const std::size_t bytes = row_bytes(info.type, info.components);
  // Read in 64 MiB pieces, and never more than the dataset holds (a small dataset's buffer is
  // small: inspect --verify of many small files stays fast).
  const std::uint64_t block =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>((64u << 20) / bytes, info.rows));
  std::vector<unsigned char> buffer(block * bytes);
  std::uint64_t sum = 0;
  for (std::uint64_t first = 0; first < info.rows; first += block) {
    const std::uint64_t count = std::min<std::uint64_t>(block, info.rows - first);
    file.read(info.name, info.type, first, count, buffer.data());
    sum += rows_checksum(buffer.data(), bytes, count, first);
    if (look) look(buffer.data(), count, first);
  }
  return sum;
}

}  // namespace

std::pair<std::string, bool> inspect(const fs::path& path, bool verify) {
  const QuietHdf5Errors quiet;
  std::ostringstream out;
  bool ok = true;
  const Hdf5File file = Hdf5File::open_serial(path);
  const bool has_format = file.has_attribute("format");
  const bool is_checkpoint = has_format && file.text("format") == kCheckpointMagic;
  // What only a checkpoint has: a file with any of it but not the format is a damaged one.
  const bool looks_like_checkpoint =
      file.has_attribute("format_version") || file.has_attribute("workload") ||
      file.has_group(kStateGroup) || file.has_group(kArraysGroup) || file.has_group(kTablesGroup);
  struct Set {
    std::string name;
    std::optional<std::uint64_t> checksum;
    bool replicated = false;  // a checkpoint's replicated array: its values must be finite
  };
  std::vector<Set> sets;
  if (is_checkpoint) {
    const Manifest m = read_manifest(file);
    const CheckpointHeader& h = m.header;
    out << path.string() << ": apron checkpoint, format " << kCheckpointFormat << "\n"
        << "  workload " << h.workload << ", case '" << h.case_name << "', step " << h.step
        << ", time " << h.time << " s, dt " << h.dt << " s\n"
        << "  written by " << h.ranks << " rank(s), build " << h.build << ", seed " << h.seed
        << "\n  state:";
    for (const auto& [name, value] : h.scalars) out << " " << name << "=" << value;
    out << "\n  case file: " << h.config_text.size() << " bytes of YAML\n";
    const std::string problem = manifest_problem(file, m);
    out << "  header checksum " << hex(file.unsigned_integer("header_checksum"))
        << (problem.empty() ? " (verified)" : " (MISMATCH or out of range)") << "\n";
    if (!problem.empty()) {
      ok = false;
      out << "  error: " << problem << "\n";
    }
    for (const auto& [name, t] : m.tables) {
      out << "  table '" << name << "': " << t.rows << " rows; per rank:";
      for (const auto r : t.rank_rows) out << " " << r;
      out << "\n";
      for (const auto& [column, c] : t.columns)
        sets.push_back({column_path(name, column), c.checksum});
    }
    for (const auto& [name, c] : m.arrays) sets.push_back({array_path(name), c.checksum, true});
  } else if (looks_like_checkpoint) {
    throw std::runtime_error(path.string() +
                             ": a damaged apron checkpoint: its 'format' attribute is " +
                             (has_format ? "'" + file.text("format") + "'" : "missing") +
                             " (expected '" + kCheckpointMagic + "')");
  } else if (file.has_attribute("step") && file.has_attribute("time") &&
             file.has_attribute("ranks") &&
             (file.has_attribute("kind") || file.has_dataset("/position"))) {
    // A step of a visual output series (io/series_output.hpp).
    const std::string kind = file.has_attribute("kind") ? file.text("kind") : "points";
    const char* what = kind == "points" ? "particle" : kind == "mesh" ? "mesh" : "brick";
    if (kind != "points" && kind != "mesh" && kind != "bricks")
      throw std::runtime_error(path.string() + ": an output file of unknown kind '" + kind + "'");
    out << path.string() << ": apron " << what << " output, step " << file.integer("step")
        << ", time " << file.real("time") << " s, written by " << file.integer("ranks")
        << " rank(s); no checksums (visual output)\n";
    for (const std::string group : {"/", "/triangle_fields", "/bricks"})
      if (file.has_group(group))
        for (const auto& name : file.datasets(group)) sets.push_back({name, std::nullopt});
  } else {
    throw std::runtime_error(path.string() +
                             ": an HDF5 file, but neither an apron checkpoint nor an apron "
                             "particle output");
  }
  for (const auto& set : sets) {
    const DatasetInfo info = file.info(set.name);
    out << "  " << set.name << "  " << dtype_name(info.type) << " [" << info.rows;
    if (info.components != 1) out << " x " << info.components;
    out << "]  "
        << size_text(static_cast<double>(info.rows * row_bytes(info.type, info.components)));
    if (set.checksum) {
      out << "  checksum " << hex(*set.checksum);
      std::string problem;
      if (verify) {
        const auto look_at = [&](const void* rows, std::uint64_t count, std::uint64_t first) {
          if (problem.empty())
            problem = non_finite_problem(path.string(), leaf(set.name), info.type, rows,
                                         count * info.components, first * info.components);
        };
        const bool good =
            checksum_of(file, info, set.replicated ? BlockVisitor(look_at) : BlockVisitor()) ==
            *set.checksum;
        ok = ok && good && problem.empty();
        out << (good ? " (verified)" : " (MISMATCH: altered or damaged)");
      }
      if (!problem.empty()) out << "\n  error: " << problem;
    }
    out << "\n";
  }
  return {out.str(), ok};
}

std::pair<std::string, bool> inspect_isolated(const fs::path& path, bool verify,
                                              bool crashes_only) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return inspect(path, verify);  // no isolation to be had
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return inspect(path, verify);
  }
  if (child == 0) {
    // The child: one letter for the outcome, then the text. Never returns, never calls MPI.
    ::close(pipe_fds[0]);
    std::string reply;
    try {
      const auto [text, ok] = inspect(path, verify);
      reply = (ok ? "1" : "0") + text;
    } catch (const std::bad_alloc&) {
      reply = "M";
    } catch (const std::exception& e) {
      reply = std::string("E") + e.what();
    }
    for (std::size_t done = 0; done < reply.size();) {
      const ssize_t n = ::write(pipe_fds[1], reply.data() + done, reply.size() - done);
      if (n <= 0) ::_exit(1);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string reply;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  unsigned version[3] = {0, 0, 0};
  H5get_libversion(&version[0], &version[1], &version[2]);
  const std::string library = "libhdf5 " + std::to_string(version[0]) + "." +
                              std::to_string(version[1]) + "." + std::to_string(version[2]);
  if (WIFSIGNALED(status))
    throw std::runtime_error(path.string() + ": a damaged HDF5 file: " + library +
                             " crashed reading it (signal " + std::to_string(WTERMSIG(status)) +
                             "); it cannot be used (an earlier checkpoint may be sound)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    throw std::runtime_error(path.string() + ": cannot inspect it (the checking process failed)");
  if (reply[0] == 'M')
    throw std::runtime_error(path.string() + ": a damaged HDF5 file: reading its metadata asks " +
                             library + " for more memory than there is (a damaged size field)");
  if (crashes_only) return {"", true};
  if (reply[0] == 'E') throw std::runtime_error(reply.substr(1));
  return {reply.substr(1), reply[0] == '1'};
}

}  // namespace apron::io
