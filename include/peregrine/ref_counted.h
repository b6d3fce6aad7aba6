// Non-atomic reference counting for objects owned by one worker thread. Shared-nothing workers
// never hand these across threads, so an atomic counter would only cost time on every request.
#pragma once

#include <cstdint>
#include <utility>

namespace peregrine {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  void add_ref() noexcept { ++refs_; }
  void release() noexcept {
    if (--refs_ == 0) delete this;
  }

 protected:
  virtual ~RefCounted() = default;

 private:
  uint32_t refs_ = 0;
};

template <class T>
class Ref {
 public:
  Ref() = default;
  Ref(T* p) : p_(p) {  // NOLINT(google-explicit-constructor): a raw new'ed pointer adopts
    if (p_) p_->add_ref();
  }
  Ref(const Ref& o) : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_) p_->release();
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() { Ref().swap(*this); }
  void swap(Ref& o) noexcept { std::swap(p_, o.p_); }

 private:
  T* p_ = nullptr;
};

}  // namespace peregrine
