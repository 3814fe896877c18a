#include "backend/cpu/cpu_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

namespace fp8rl {

CpuBackend::CpuBackend() = default;

std::string CpuBackend::device() const {
  return std::to_string(cpu_threads()) + " threads, " + cpu_gemm_description();
}

void CpuBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::download(void* host_dst, const void* src, size_t bytes) {
  count_host_sync();
  if (bytes) std::memcpy(host_dst, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::zero(void* dst, size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

bool CpuBackend::equal_bytes(const void* a, const void* b, size_t bytes) {
  count_host_sync();
  return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

std::vector<bool> CpuBackend::equal_bytes(const std::vector<BytesPair>& pairs) {
  count_host_sync();
  std::vector<bool> same;
  for (const BytesPair& p : pairs)
    same.push_back(p.bytes == 0 || std::memcmp(p.a, p.b, p.bytes) == 0);
  return same;
}

CpuBackend::~CpuBackend() {
  for (auto& [bytes, p] : cached_) std::free(p);
}

void* CpuBackend::raw_alloc(size_t bytes) {
  // 64-byte alignment for vector loads; a zero-byte request still yields a unique pointer.
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded >= kCachedMin) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cached_.find(rounded); it != cached_.end()) {
      void* p = it->second;
      cached_.erase(it);
      cached_bytes_ -= rounded;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p) throw Error("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
  if (rounded >= kCachedMin) {
    std::lock_guard lock(cache_mutex_);
    sizes_[p] = rounded;
  }
  return p;
}

void CpuBackend::raw_free(void* p) noexcept {
  {
    std::lock_guard lock(cache_mutex_);
    if (auto it = sizes_.find(p); it != sizes_.end()) {
      if (cached_bytes_ + it->second <= kCacheLimit) {
        cached_.emplace(it->second, p);
        cached_bytes_ += it->second;
        return;
      }
      sizes_.erase(it);
    }
  }
  std::free(p);
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace fp8rl
