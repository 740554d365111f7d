// A time-stepping workload's checkpointed state, declared once: the tables (particles, bricks,
// vertices, ...) with their columns' types, widths and the values they may hold. The same
// declaration writes a checkpoint, reads it back (each rank its own rows on the same rank count,
// an even share on another) and refuses one whose tables do not fit it: a wrong type or width,
// a row count that disagrees with the state's scalars, a value that is not finite or lies outside
// the domain, found alike on every rank and named by table, column and first bad row.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "decomposition/partition.hpp"
#include "io/checkpoint.hpp"

namespace apron {

// What a column's values must be on load.
enum class ValueCheck {
  any,
  finite,         // every component finite
  inside_domain,  // finite, and its first three components inside the case's domain
  positive_last,  // finite, and its last component positive (a quantity carried in a spare
                  // component: SPH's continuity density in its velocity's fourth)
};

struct ColumnSpec {
  std::string name;
  io::Dtype type;
  int components = 1;
  ValueCheck check = ValueCheck::any;
  std::size_t row_bytes() const { return io::dtype_size(type) * components; }
};

struct TableSpec {
  std::string name;
  std::vector<ColumnSpec> columns;
  // The state scalar that holds this table's global row count, if one does.
  std::string rows_scalar;
};

// One rank's rows of one column at save time: host memory that stays unchanged until the write
// has finished, and optionally their partial checksum computed elsewhere (on the device).
struct ColumnRows {
  const void* data = nullptr;
  std::function<std::uint64_t(std::uint64_t first_row)> checksum = {};
};

// Filled by a workload's save: this rank's rows of every declared table, and its scalars.
class SavedState {
 public:
  explicit SavedState(const std::vector<TableSpec>& tables) : tables_(tables) {}
  // This rank's `rows` rows of a declared table, one ColumnRows per declared column, in order.
  void rows(const std::string& table, std::size_t rows, std::vector<ColumnRows> columns);
  void scalar(const std::string& name, double value) { scalars_[name] = value; }
  // The partition the rows were cut by ("partition": one row of lo, hi per rank).
  void partition(const Partition& partition);
  void keep(std::shared_ptr<const void> owner) { state_.keep.push_back(std::move(owner)); }
  void seed(std::uint64_t seed) { seed_ = seed; }
  // The state as io/ writes it; every declared table must have been given its rows.
  io::CheckpointState finish(io::CheckpointHeader header);

 private:
  const std::vector<TableSpec>& tables_;
  std::map<std::string, double> scalars_;
  std::vector<double> partition_;
  std::uint64_t seed_ = 0;
  io::CheckpointState state_;
};

// A checkpoint's state as this rank reads it: its share of every declared table's rows, checked.
class LoadedState {
 public:
  // Collective. Reads and checks every declared table (std::runtime_error naming the file,
  // table, column and first bad row otherwise, on every rank alike).
  LoadedState(const io::CheckpointReader& checkpoint, const std::vector<TableSpec>& tables,
              const Box& domain);

  const io::CheckpointHeader& header() const { return checkpoint_.header(); }
  const std::string& where() const { return where_; }
  // A scalar of the state; a checkpoint without it is refused.
  double scalar(const std::string& name) const;
  // This rank's rows of a column as values of T, which must be one row wide.
  template <class T>
  std::vector<T> column(const std::string& table, const std::string& name) const;
  std::uint64_t total_rows(const std::string& table) const { return find(table).total; }
  // True when the checkpoint was written by as many ranks as read it: every rank holds the rows
  // it wrote, in its order, and the saved partition applies.
  bool same_ranks() const { return same_ranks_; }
  // Collective. Reads the partition the checkpoint was written under (checked: a finite box per
  // rank); saved_partition() then returns it.
  void read_partition(const Box& domain);
  const Partition& saved_partition() const;

 private:
  struct Table {
    io::TableShare share;
    std::uint64_t total = 0;
    std::map<std::string, std::pair<std::size_t, std::vector<unsigned char>>> columns;  // width
  };
  const Table& find(const std::string& table) const;
  void read(const TableSpec& spec, const Box& domain);
  const io::CheckpointReader& checkpoint_;
  std::string where_;
  std::map<std::string, Table> tables_;
  bool same_ranks_ = true;
  std::optional<Partition> partition_;
};

template <class T>
std::vector<T> LoadedState::column(const std::string& table, const std::string& name) const {
  const Table& t = find(table);
  const auto found = t.columns.find(name);
  if (found == t.columns.end() || found->second.first != sizeof(T))
    throw std::logic_error("column '" + name + "' of table '" + table +
                           "' is not declared with this row type");
  const auto& bytes = found->second.second;
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(static_cast<void*>(values.data()), bytes.data(), bytes.size());
  return values;
}

}  // namespace apron
