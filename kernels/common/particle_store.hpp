// ParticleStore: a set of named, equally long device arrays (structure of arrays). Workloads
// register their fields; decomposition/ moves particles between ranks through the type-erased
// operations below without knowing what the fields mean.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/common/device_buffers.hpp"  // IndexVector, ByteVector (re-exported here)

namespace apron {

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
  // this[indices[k]] += element k of in, k < count, starting at byte in_offset (reverse halo sums).
  // The indices must be distinct. Vec4 adds all four components.
  virtual void scatter_add(const ByteVector& in, std::size_t in_offset,
                           const std::uint32_t* indices, std::size_t count) = 0;
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
  void scatter_add(const ByteVector& in, std::size_t in_offset, const std::uint32_t* indices,
                   std::size_t count) override;
  void assign(const void* value, const std::uint32_t* indices, std::size_t count) override;
  void move(const IndexVector& from, const IndexVector& to) override;
  std::size_t device_bytes() const override {
    return (data.capacity() + scratch_.capacity()) * sizeof(T);
  }

 private:
  DeviceVector<T> scratch_;  // double buffer for permute(), kept to avoid reallocation
};

class ParticleStore {
 public:
  template <class T>
  DeviceVector<T>& add(const std::string& name) {
    auto field = std::make_unique<TypedField<T>>(name);
    field->data.resize(size_);
    auto& ref = field->data;
    fields_.push_back(std::move(field));
    return ref;
  }
  std::size_t size() const { return size_; }
  void resize(std::size_t n);
  // Every field f[i] = f[order[i]], except the fields named in `recomputed`, whose values the
  // caller overwrites before reading them: those are only resized (their old values end up in
  // no particular order).
  void permute(const IndexVector& order, std::span<const std::string> recomputed = {});
  // Removes the particles in the given (distinct) slots by moving the last particles into the
  // holes: work in proportion to the removed count, not to the store's size. The survivors do
  // not keep their order (the next cell sort restores it).
  void erase(const IndexVector& slots);

  const std::vector<std::unique_ptr<ParticleField>>& fields() const { return fields_; }
  ParticleField& field(const std::string& name) const;
  std::size_t bytes_per_particle() const;  // of the registered fields
  std::size_t device_bytes() const;        // allocated by the fields and their scratch

 private:
  std::size_t size_ = 0;
  std::vector<std::unique_ptr<ParticleField>> fields_;
  // erase() scratch: whether each of the last slots survives, the holes and who fills them.
  DeviceVector<std::uint8_t> tail_survives_;
  IndexVector holes_, movers_;
};

}  // namespace apron
