// ParticleStore: a set of equally long device arrays (structure of arrays). Workloads add their
// fields and keep the typed handle each add returns; decomposition/ moves rows between ranks
// through the type-erased operations below, given those handles, without knowing what the fields
// mean. The element types a field may have are one list, APRON_FIELD_TYPES.
#pragma once

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/common/device_buffers.hpp"  // IndexVector, ByteVector (re-exported here)
#include "kernels/common/primitives.hpp"      // Reduction
#include "kernels/common/vec.hpp"

// Every element type a field may hold: X(type) for each. The store's instantiations, the halos'
// reductions and the brick aprons' kernels all come from this one list.
#define APRON_FIELD_TYPES(X)                                                         \
  X(float)                                                                           \
  X(double) X(std::int32_t) X(std::uint32_t) X(std::int64_t) X(std::uint8_t) X(Vec4) \
      X(Vector3<double>)

namespace apron {

class ParticleStore;

class ParticleField {
 public:
  explicit ParticleField(std::string name) : name_(std::move(name)) {}
  virtual ~ParticleField() = default;
  const std::string& name() const { return name_; }
  virtual std::size_t element_size() const = 0;
  virtual void resize(std::size_t n) = 0;
  // this[i] = this[order[i]] for i < order.size(); the field shrinks or grows to order.size().
  virtual void permute(const IndexVector& order) = 0;
  // Writes this[indices[k]], k < count, to out from byte out_offset on (`indices` points to
  // device memory).
  virtual void pack(const std::uint32_t* indices, std::size_t count, ByteVector& out,
                    std::size_t out_offset) const = 0;
  // this[first + k] = element k of in, starting at byte in_offset.
  virtual void unpack(const ByteVector& in, std::size_t in_offset, std::size_t first,
                      std::size_t count) = 0;
  // this[indices[k]] = element k of in, k < count (scatter), starting at byte in_offset.
  virtual void scatter(const ByteVector& in, std::size_t in_offset, const std::uint32_t* indices,
                       std::size_t count) = 0;
  // this[indices[k]] = op(this[indices[k]], element k of in), k < count, starting at byte
  // in_offset (reverse halos). The indices must be distinct. Vectors combine component by
  // component.
  virtual void scatter_reduce(const ByteVector& in, std::size_t in_offset,
                              const std::uint32_t* indices, std::size_t count, Reduction op) = 0;
  // this[indices[k]] = *value, k < count; `value` points to one host element of this field's type.
  virtual void assign(const void* value, const std::uint32_t* indices, std::size_t count) = 0;
  // this[to[k]] = this[from[k]]; no slot may be in both.
  virtual void move(const IndexVector& from, const IndexVector& to) = 0;
  virtual std::size_t device_bytes() const = 0;  // allocated, including the scratch buffer

 private:
  std::string name_;
};

template <class T>
class TypedField final : public ParticleField {
 public:
  using ParticleField::ParticleField;
  DeviceVector<T> data;

  std::size_t element_size() const override { return sizeof(T); }
  void resize(std::size_t n) override { resize_per_particle(data, n); }
  void permute(const IndexVector& order) override;
  void pack(const std::uint32_t* indices, std::size_t count, ByteVector& out,
            std::size_t out_offset) const override;
  void unpack(const ByteVector& in, std::size_t in_offset, std::size_t first,
              std::size_t count) override;
  void scatter(const ByteVector& in, std::size_t in_offset, const std::uint32_t* indices,
               std::size_t count) override;
  void scatter_reduce(const ByteVector& in, std::size_t in_offset, const std::uint32_t* indices,
                      std::size_t count, Reduction op) override;
  void assign(const void* value, const std::uint32_t* indices, std::size_t count) override;
  void move(const IndexVector& from, const IndexVector& to) override;
  std::size_t device_bytes() const override {
    return (data.capacity() + scratch_.capacity()) * sizeof(T);
  }

 private:
  DeviceVector<T> scratch_;  // double buffer for permute(), kept to avoid reallocation
};

// A field of one store, as halo plans take it: made by the store when the field is added, and
// checked against the store it is used with. No lookup by name, no unchecked cast.
class FieldRef {
 public:
  FieldRef() = default;
  std::size_t index() const { return index_; }

 private:
  friend class ParticleStore;
  FieldRef(std::uint64_t store, std::size_t index) : store_(store), index_(index) {}
  std::uint64_t store_ = 0;  // the store's identity, which moves with it
  std::size_t index_ = 0;
};

// The typed handle: the field's device array (reached like a pointer to it), and its FieldRef
// for the halos.
template <class T>
class Field : public FieldRef {
 public:
  Field() = default;
  DeviceVector<T>& operator*() const { return *data_; }
  DeviceVector<T>* operator->() const { return data_; }
  operator DeviceVector<T>&() const { return *data_; }  // NOLINT: a field is its array

 private:
  friend class ParticleStore;
  Field(FieldRef ref, DeviceVector<T>* data) : FieldRef(ref), data_(data) {}
  DeviceVector<T>* data_ = nullptr;
};

class ParticleStore {
 public:
  ParticleStore();
  ParticleStore(ParticleStore&&) = default;  // handles follow the fields
  ParticleStore& operator=(ParticleStore&&) = default;
  ParticleStore(const ParticleStore&) = delete;  // a copy's handles would be the original's
  ParticleStore& operator=(const ParticleStore&) = delete;

  // `name` labels the field in messages; the handle is how everything else finds it.
  template <class T>
  Field<T> add(const std::string& name) {
    auto field = std::make_unique<TypedField<T>>(name);
    field->data.resize(size_);
    DeviceVector<T>* data = &field->data;
    fields_.push_back(std::move(field));
    return Field<T>(FieldRef(id_, fields_.size() - 1), data);
  }
  std::size_t size() const { return size_; }
  void resize(std::size_t n);
  // Every field f[i] = f[order[i]], except the `recomputed` ones, whose values the caller
  // overwrites before reading them: those are only resized (their old values end up in no
  // particular order).
  void permute(const IndexVector& order, std::span<const FieldRef> recomputed = {});
  // Removes the particles in the given (distinct) slots by moving the last particles into the
  // holes: work in proportion to the removed count, not to the store's size. The survivors do
  // not keep their order (the next cell sort restores it).
  void erase(const IndexVector& slots);

  // Every field's handle, in the order they were added.
  std::vector<FieldRef> all_fields() const;
  // The handle of one of this store's fields, given its array (std::logic_error otherwise):
  // for callers that keep the arrays add() gave them.
  template <class T>
  Field<T> ref(DeviceVector<T>& data) const {
    for (std::size_t k = 0; k < fields_.size(); ++k)
      if (auto* typed = dynamic_cast<TypedField<T>*>(fields_[k].get());
          typed && &typed->data == &data)
        return Field<T>(FieldRef(id_, k), &typed->data);
    throw std::logic_error("a device array that is no field of this store");
  }
  // The field behind a handle of this store (std::logic_error for another store's handle).
  ParticleField& field(FieldRef ref) const;
  std::size_t bytes_per_particle() const;  // of the registered fields
  std::size_t device_bytes() const;        // allocated by the fields and their scratch

 private:
  std::size_t field_index(FieldRef ref) const;  // checked
  std::uint64_t id_;
  std::size_t size_ = 0;
  std::vector<std::unique_ptr<ParticleField>> fields_;
  // erase() scratch: whether each of the last slots survives, the holes and who fills them.
  DeviceVector<std::uint8_t> tail_survives_;
  IndexVector holes_, movers_;
};

}  // namespace apron
