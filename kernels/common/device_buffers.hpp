// Device buffers that carry data between ranks and between kernels without knowing what it means:
// index lists and raw bytes. PinnedBuffer (host staging) lives in backend.hpp. Kept apart from
// particle_store.hpp so that payload-neutral code (decomposition/transport.hpp) needs no fields.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/backend.hpp"

namespace apron {

using IndexVector = DeviceVector<std::uint32_t>;
using ByteVector = DeviceVector<std::byte>;

// Message buffers only grow: resizing a device_vector fills its new bytes, a launch for nothing
// on every exchange (senders and receivers use the offsets' bytes, not the buffer's size).
inline void grow(ByteVector& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
}

}  // namespace apron
