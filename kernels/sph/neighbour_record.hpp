// Which candidates of a neighbour search lie inside the support, one bit per candidate in the
// order a CellListView visits them (the loops are in neighbour_search.hpp). One pass over the
// candidates (the SPH density pass, which tests every candidate anyway) writes the record; a later
// pass over the same cell list and positions (the force pass) replays it and visits only the
// neighbours, without testing the ~3/4 of the candidates that lie outside the support again.
#pragma once

#include <cstdint>

#include "kernels/common/backend.hpp"
#include "kernels/common/vec.hpp"

namespace apron::sph {

struct NeighbourRecord {
  // Bits kept per particle: about 275 candidates at 2 cells per radius; a particle with more
  // is marked overflowed and its candidates are tested again.
  static constexpr int kWords = 12;

  std::uint32_t* words = nullptr;    // word w of particle a at words[w * stride + a] (coalesced)
  std::uint8_t* overflow = nullptr;  // per particle: 1 when its bits did not fit
  std::size_t stride = 0;            // particles

  // Expected candidates per particle this record is meant for: beyond it most particles would
  // overflow, and recording would only cost (see SphSolver).
  static constexpr double kComfortableCandidates = 0.85 * 32 * kWords;
  // No storage: the passes test every candidate (cell lists with more candidates).
  APRON_HD bool enabled() const { return words != nullptr; }
};

// Appends particle a's bits, in order; finish() after the last.
class NeighbourRecordWriter {
 public:
  APRON_HD NeighbourRecordWriter(const NeighbourRecord& record, std::size_t a)
      : record_(record), a_(a) {}
  // Appends the low `count` (<= 32) bits of mask; the bits above them are zero.
  APRON_HD void append(std::uint32_t mask, int count) {
    pending_ |= static_cast<std::uint64_t>(mask) << used_;
    used_ += count;
    if (used_ < 32) return;
    store(static_cast<std::uint32_t>(pending_));
    pending_ >>= 32;
    used_ -= 32;
  }
  APRON_HD bool enabled() const { return record_.enabled(); }
  APRON_HD void finish() {
    if (used_ > 0) store(static_cast<std::uint32_t>(pending_));
    record_.overflow[a_] = word_ > NeighbourRecord::kWords ? 1 : 0;
  }

 private:
  APRON_HD void store(std::uint32_t bits) {
    if (word_ < NeighbourRecord::kWords) record_.words[word_ * record_.stride + a_] = bits;
    ++word_;
  }
  NeighbourRecord record_;
  std::size_t a_;
  std::uint64_t pending_ = 0;
  int used_ = 0;  // bits in pending_
  int word_ = 0;  // words stored (or dropped beyond kWords)
};

// Reads particle a's bits back in the order they were appended.
class NeighbourRecordReader {
 public:
  APRON_HD NeighbourRecordReader(const NeighbourRecord& record, std::size_t a)
      : record_(record), a_(a) {}
  // True when there is nothing to replay: no record kept, or this particle's did not fit.
  APRON_HD bool missing() const { return !record_.enabled() || load(record_.overflow + a_) != 0; }
  // The next `count` (<= 32) bits, in the order they were appended.
  APRON_HD std::uint32_t next(int count) {
    if (available_ < count) {
      pending_ |= static_cast<std::uint64_t>(load(record_.words + word_ * record_.stride + a_))
                  << available_;
      available_ += 32;
      ++word_;
    }
    const auto bits = static_cast<std::uint32_t>(pending_ & ((std::uint64_t{1} << count) - 1));
    pending_ >>= count;
    available_ -= count;
    return bits;
  }

 private:
  NeighbourRecord record_;
  std::size_t a_;
  std::uint64_t pending_ = 0;
  int available_ = 0;
  int word_ = 0;
};

}  // namespace apron::sph
