// A map that holds at most `capacity` entries and forgets the least recently used one when a new
// entry would exceed that: for caches whose keys keep changing (the GEMM plans of MoE experts,
// whose row counts differ every step), so that a long run does not grow them without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <utility>

#include "core/error.hpp"

namespace fp8rl {

// Key: ordered (operator<). Not thread-safe: its owner locks.
template <class Key, class Value>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {
    check(capacity > 0, "LruCache: the capacity must be at least 1");
  }

  // The value stored for key, marked most recently used; null when absent. The pointer stays
  // valid until that entry is evicted (a later insert) or the cache cleared.
  Value* find(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Stores value for key (not present: check with find first), most recently used, after
  // evicting the least recently used entry when the cache is full. Returns the stored value.
  Value& insert(const Key& key, Value value) {
    check(index_.find(key) == index_.end(), "LruCache: the key is already present");
    if (index_.size() == capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  // Entries evicted so far.
  uint64_t evictions() const { return evictions_; }
  // Destroys every entry, most recently used first.
  void clear() {
    index_.clear();
    order_.clear();
  }

 private:
  size_t capacity_;
  uint64_t evictions_ = 0;
  std::list<std::pair<Key, Value>> order_;  // most recently used first
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

}  // namespace fp8rl
