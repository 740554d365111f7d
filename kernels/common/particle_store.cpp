#include "kernels/common/particle_store.hpp"

#include <algorithm>
#include <atomic>
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

namespace {
// One scalar of a reduction.
template <class S>
APRON_HD S combine(S a, S b, Reduction op) {
  switch (op) {
    case Reduction::min:
      return b < a ? b : a;
    case Reduction::max:
      return a < b ? b : a;
    default:
      return static_cast<S>(a + b);
  }
}
template <class T>
APRON_HD T combine_elements(const T& a, const T& b, Reduction op) {
  return combine(a, b, op);
}
template <>
APRON_HD Vec4 combine_elements(const Vec4& a, const Vec4& b, Reduction op) {
  return {combine(a.x, b.x, op), combine(a.y, b.y, op), combine(a.z, b.z, op),
          combine(a.w, b.w, op)};
}
template <>
APRON_HD Vector3<double> combine_elements(const Vector3<double>& a, const Vector3<double>& b,
                                          Reduction op) {
  return {combine(a.x, b.x, op), combine(a.y, b.y, op), combine(a.z, b.z, op)};
}

template <class T>
struct ScatterReduce {
  const T* src;
  const std::uint32_t* indices;
  T* dst;
  Reduction op;
  APRON_HD void operator()(std::size_t k) const {
    dst[indices[k]] = combine_elements(dst[indices[k]], src[k], op);
  }
};
}  // namespace

template <class T>
void TypedField<T>::scatter_reduce(const ByteVector& in, std::size_t in_offset,
                                   const std::uint32_t* indices, std::size_t count, Reduction op) {
  for_each_index(count, ScatterReduce<T>{typed<T>(in, in_offset), indices, raw(data), op});
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

#define APRON_INSTANTIATE_FIELD(T) template class TypedField<T>;
APRON_FIELD_TYPES(APRON_INSTANTIATE_FIELD)
#undef APRON_INSTANTIATE_FIELD

void ParticleStore::resize(std::size_t n) {
  for (auto& f : fields_) f->resize(n);
  size_ = n;
}

void ParticleStore::permute(const IndexVector& order, std::span<const FieldRef> recomputed) {
  std::vector<bool> only_resize(fields_.size(), false);
  for (const FieldRef ref : recomputed) only_resize[field_index(ref)] = true;
  for (std::size_t k = 0; k < fields_.size(); ++k) {
    if (only_resize[k])
      fields_[k]->resize(order.size());
    else
      fields_[k]->permute(order);
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

ParticleStore::ParticleStore() {
  static std::atomic<std::uint64_t> stores{0};
  id_ = ++stores;
}

std::size_t ParticleStore::field_index(FieldRef ref) const {
  if (ref.store_ != id_ || ref.index() >= fields_.size())
    throw std::logic_error("a field handle used with a store it does not belong to");
  return ref.index();
}

ParticleField& ParticleStore::field(FieldRef ref) const {
  return *fields_[field_index(ref)];
}

std::vector<FieldRef> ParticleStore::all_fields() const {
  std::vector<FieldRef> refs;
  for (std::size_t k = 0; k < fields_.size(); ++k) refs.push_back(FieldRef(id_, k));
  return refs;
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
