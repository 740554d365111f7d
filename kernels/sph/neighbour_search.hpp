// SPH's neighbour search over a common cell list with a neighbour record: the density pass tests
// every candidate and records which lie inside the support; the force pass replays the record
// and visits only those (neighbour_record.hpp says why). Built on CellListView's row chunks.
#pragma once

#include <cstdint>

#include "kernels/common/cell_list.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/sph/neighbour_record.hpp"

namespace apron::sph {

// Calls inside(j) for every candidate j around p, as cells.for_each_candidate, and records which
// returned true (if the record is enabled).
template <class Inside>
APRON_HD void for_each_candidate_recording(const CellListView& cells, const Vec4& p,
                                           NeighbourRecordWriter& record, Inside&& inside) {
  if (!record.enabled())
    return cells.for_each_candidate(p, [&](std::uint32_t j) { static_cast<void>(inside(j)); });
  cells.for_each_chunk(p, [&](std::uint32_t chunk, std::uint32_t end) {
    const std::uint32_t mask = CellListView::test_chunk(chunk, end, inside);
    record.append(mask, static_cast<int>(end - chunk));
  });
  record.finish();
}

// cells.for_each_neighbour from a record written by for_each_candidate_recording over the same
// cells and positions: only the recorded neighbours are visited, none is tested again (unless
// there is no record or it overflowed; then inside decides).
template <class Inside, class Visit>
APRON_HD void for_each_recorded_neighbour(const CellListView& cells, const Vec4& p,
                                          NeighbourRecordReader record, Inside&& inside,
                                          Visit&& visit) {
  if (record.missing()) return cells.for_each_neighbour(p, inside, visit);
  cells.for_each_chunk(p, [&](std::uint32_t chunk, std::uint32_t end) {
    for (std::uint32_t mask = record.next(static_cast<int>(end - chunk)); mask != 0;
         mask &= mask - 1)
      visit(chunk + lowest_set_bit(mask));
  });
}

}  // namespace apron::sph
