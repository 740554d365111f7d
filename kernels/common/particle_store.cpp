#include "kernels/common/particle_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/common/vec.hpp"

namespace apron {

namespace {
// Erased slot k is a hole to fill when it lies below the kept count.
struct HoleAt {
  const std::uint32_t* slots;
  std::size_t kept;
  APRON_HD bool operator()(std::uint32_t k) const { return slots[k] < kept; }
};

// From the positions the selections found to slots: holes[k] indexes the erased slots, movers[k]
// counts from `kept`.
struct IndexToSlot {
  const std::uint32_t* slots;
  std::size_t kept;
  std::uint32_t* holes;
  std::uint32_t* movers;
  APRON_HD void operator()(std::size_t k) const {
    holes[k] = slots[holes[k]];
    movers[k] = static_cast<std::uint32_t>(kept + movers[k]);
  }
};

// dst[to[k]] = dst[from[k]], from and to disjoint.
template <class T>
struct MoveRows {
  const std::uint32_t* from;
  const std::uint32_t* to;
  T* data;
  APRON_HD void operator()(std::size_t k) const { data[to[k]] = data[from[k]]; }
};

// survives[slot - first] = 0 for every erased slot at or past `first`.
struct MarkErasedTail {
  const std::uint32_t* slots;
  std::size_t first;
  std::uint8_t* survives;
  APRON_HD void operator()(std::size_t k) const {
    if (slots[k] >= first) survives[slots[k] - first] = 0;
  }
};

// Reinterprets a byte range of a ByteVector as T*. Offsets are multiples of 16 (see pack()).
template <class T>
T* typed(ByteVector& bytes, std::size_t offset) {
  return reinterpret_cast<T*>(raw(bytes) + offset);
}
template <class T>
const T* typed(const ByteVector& bytes, std::size_t offset) {
  return reinterpret_cast<const T*>(raw(bytes) + offset);
}
}  // namespace

template <class T>
void TypedField<T>::permute(const IndexVector& order) {
  resize_per_particle(scratch_, order.size());
  apron::gather(order.begin(), order.end(), data.begin(), scratch_.begin());
  data.swap(scratch_);
}

template <class T>
void TypedField<T>::pack(const std::uint32_t* indices, std::size_t count, ByteVector& out,
                         std::size_t out_offset) const {
  const auto first = device_iterator(indices);
  apron::gather(first, first + count, data.begin(), device_iterator(typed<T>(out, out_offset)));
}

template <class T>
void TypedField<T>::unpack(const ByteVector& in, std::size_t in_offset, std::size_t first,
                           std::size_t count) {
  const T* src = typed<T>(in, in_offset);
  apron::copy_n(device_iterator(src), count, data.begin() + first);
}

template <class T>
void TypedField<T>::scatter(const ByteVector& in, std::size_t in_offset,
                            const std::uint32_t* indices, std::size_t count) {
  const auto src = device_iterator(typed<T>(in, in_offset));
  apron::scatter(src, src + count, device_iterator(indices), data.begin());
}

template <class T>
APRON_HD inline T plus(const T& a, const T& b) {
  return static_cast<T>(a + b);
}
template <>
APRON_HD inline Vec4 plus(const Vec4& a, const Vec4& b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w};
}

template <class T>
struct ScatterAdd {
  const T* src;
  const std::uint32_t* indices;
  T* dst;
  APRON_HD void operator()(std::size_t k) const { dst[indices[k]] = plus(dst[indices[k]], src[k]); }
};

template <class T>
void TypedField<T>::scatter_add(const ByteVector& in, std::size_t in_offset,
                                const std::uint32_t* indices, std::size_t count) {
  for_each_index(count, ScatterAdd<T>{typed<T>(in, in_offset), indices, raw(data)});
}

template <class T>
struct AssignAt {
  T value;
  const std::uint32_t* indices;
  T* dst;
  APRON_HD void operator()(std::size_t k) const { dst[indices[k]] = value; }
};

template <class T>
void TypedField<T>::assign(const void* value, const std::uint32_t* indices, std::size_t count) {
  for_each_index(count, AssignAt<T>{*static_cast<const T*>(value), indices, raw(data)});
}

template <class T>
void TypedField<T>::move(const IndexVector& from, const IndexVector& to) {
  for_each_index(from.size(), MoveRows<T>{raw(from), raw(to), raw(data)});
}

template class TypedField<float>;
template class TypedField<double>;
template class TypedField<std::int32_t>;
template class TypedField<Vec4>;
template class TypedField<Vector3<double>>;
template class TypedField<std::uint8_t>;
template class TypedField<std::uint32_t>;
template class TypedField<std::int64_t>;

void ParticleStore::resize(std::size_t n) {
  for (auto& f : fields_) f->resize(n);
  size_ = n;
}

void ParticleStore::permute(const IndexVector& order, std::span<const std::string> recomputed) {
  for (auto& f : fields_) {
    if (std::find(recomputed.begin(), recomputed.end(), f->name()) != recomputed.end())
      f->resize(order.size());
    else
      f->permute(order);
  }
  size_ = order.size();
}

void ParticleStore::erase(const IndexVector& slots) {
  const std::size_t removed = slots.size();
  if (removed == 0) return;
  const std::size_t kept = size_ - removed;
  // The holes are the erased slots below `kept`; the survivors at or past `kept` fill them.
  // There are as many of one as of the other.
  tail_survives_.resize(removed);
  apron::fill(tail_survives_.begin(), tail_survives_.end(), std::uint8_t{1});
  for_each_index(removed, MarkErasedTail{raw(slots), kept, raw(tail_survives_)});
  holes_.resize(removed);
  const std::size_t holes = copy_indices_if(removed, raw(holes_), HoleAt{raw(slots), kept});
  select_indices(tail_survives_, removed, movers_);  // as many as there are holes
  holes_.resize(holes);
  for_each_index(holes, IndexToSlot{raw(slots), kept, raw(holes_), raw(movers_)});
  for (auto& f : fields_) f->move(movers_, holes_);
  resize(kept);
}

ParticleField& ParticleStore::field(const std::string& name) const {
  for (auto& f : fields_)
    if (f->name() == name) return *f;
  throw std::logic_error("ParticleStore has no field '" + name + "'");
}

std::size_t ParticleStore::device_bytes() const {
  std::size_t bytes =
      tail_survives_.capacity() + (holes_.capacity() + movers_.capacity()) * sizeof(std::uint32_t);
  for (auto& f : fields_) bytes += f->device_bytes();
  return bytes;
}

std::size_t ParticleStore::bytes_per_particle() const {
  std::size_t bytes = 0;
  for (auto& f : fields_) bytes += f->element_size();
  return bytes;
}

}  // namespace apron
