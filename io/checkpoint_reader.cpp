// Reading a checkpoint: its manifest checked, then each rank's share of the rows, verified.
#include "io/checkpoint.hpp"
#include "io/checkpoint_format.hpp"
#include "kernels/common/element_hash.hpp"

namespace apron::io {
namespace fs = std::filesystem;
using namespace checkpoint_format;

// ---- reading ---------------------------------------------------------------------------------

CheckpointReader::CheckpointReader(MPI_Comm comm, const fs::path& path,
                                   const std::string& expected_workload)
    : comm_(comm), path_(path) {
  const QuietHdf5Errors quiet;
  agree(comm, capture([&] {
          file_.emplace(Hdf5File::open(comm, path));
          const Manifest m = read_manifest(*file_);
          if (const std::string problem = manifest_problem(*file_, m); !problem.empty())
            throw std::runtime_error(problem);
          header_ = m.header;
          for (const auto& [name, t] : m.tables) {
            TableInfo& info = tables_[name];
            info.rows = t.rows;
            info.rank_rows = t.rank_rows;
            for (const auto& [column, c] : t.columns)
              info.columns.push_back({column, c.type, c.rows, c.components});
          }
          for (const auto& [name, c] : m.arrays)
            replicated_[name] = {array_path(name), c.type, c.rows, c.components};
        }));
  if (header_.workload != expected_workload)
    throw std::runtime_error(path.string() + ": a checkpoint of the '" + header_.workload +
                             "' workload (case '" + header_.case_name + "'); this case runs the '" +
                             expected_workload + "' workload and cannot continue from it");
}

std::vector<std::string> CheckpointReader::tables() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tables_) names.push_back(name);
  return names;
}

const TableInfo& CheckpointReader::table(const std::string& table) const {
  const auto found = tables_.find(table);
  if (found == tables_.end())
    throw std::runtime_error(path_.string() + ": the checkpoint has no table '" + table +
                             "' (written by an incompatible version?)");
  return found->second;
}

void CheckpointReader::read(const std::string& table, const std::string& column, Dtype type,
                            std::uint64_t first, std::uint64_t count, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = column_path(table, column);
  std::uint64_t stored = 0, mine = 0;
  agree(comm_, capture([&] {
          const TableInfo& t = this->table(table);
          const auto c = std::find_if(t.columns.begin(), t.columns.end(),
                                      [&](const DatasetInfo& d) { return d.name == column; });
          if (c == t.columns.end())
            throw std::runtime_error(path_.string() + ": table '" + table + "' has no column '" +
                                     column + "' (written by an incompatible version?)");
          if (c->type != type)
            throw std::runtime_error(path_.string() + ": column '" + column + "' of table '" +
                                     table + "' holds " + dtype_name(c->type) + ", expected " +
                                     dtype_name(type));
          file_->read(set, type, first, count, out);
          stored = file_->unsigned_integer("checksum", set);
          mine = rows_checksum(out, row_bytes(type, c->components), count, first);
        }));
  const std::uint64_t computed = sum_over_ranks(comm_, mine);
  if (computed != stored) throw checksum_mismatch(path_.string(), column, stored, computed);
}

std::uint64_t CheckpointReader::replicated_rows(const std::string& name) const {
  const auto found = replicated_.find(name);
  if (found == replicated_.end())
    throw std::runtime_error(path_.string() + ": the checkpoint has no array '" + name +
                             "' (written by an incompatible version?)");
  return found->second.rows;
}

void CheckpointReader::read_all(const std::string& name, Dtype type, void* out) const {
  const QuietHdf5Errors quiet;
  const std::string set = array_path(name);
  agree(comm_, capture([&] {
          const DatasetInfo info = file_->info(set);
          if (info.type != type)
            throw std::runtime_error(path_.string() + ": array '" + name + "' holds " +
                                     dtype_name(info.type) + ", expected " + dtype_name(type));
          file_->read(set, type, 0, info.rows, out);
          const std::uint64_t stored = file_->unsigned_integer("checksum", set);
          const std::uint64_t computed =
              rows_checksum(out, row_bytes(type, info.components), info.rows, 0);
          if (computed != stored) throw checksum_mismatch(path_.string(), name, stored, computed);
          const std::string problem =
              non_finite_problem(path_.string(), name, type, out, info.rows * info.components);
          if (!problem.empty()) throw std::runtime_error(problem);
        }));
}

TableShare share_of(const CheckpointReader& checkpoint, const std::string& table) {
  const TableInfo& t = checkpoint.table(table);
  const int rank = rank_of(checkpoint.comm()), ranks = size_of(checkpoint.comm());
  TableShare share;
  share.own_rows = static_cast<int>(t.rank_rows.size()) == ranks;
  if (share.own_rows) {
    for (int r = 0; r < rank; ++r) share.first += static_cast<std::uint64_t>(t.rank_rows[r]);
    share.count = static_cast<std::uint64_t>(t.rank_rows[rank]);
  } else {
    share.first = t.rows * rank / ranks;
    share.count = t.rows * (rank + 1) / ranks - share.first;
  }
  return share;
}

void read_share(const CheckpointReader& checkpoint, const std::string& table,
                const TableShare& share, std::span<const ColumnTarget> columns) {
  for (const ColumnTarget& c : columns)
    checkpoint.read(table, c.name, c.type, share.first, share.count, c.out);
}

}  // namespace apron::io
