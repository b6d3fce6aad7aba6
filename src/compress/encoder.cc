#include "compress/encoder.h"

#include <brotli/encode.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getCParams: tables sized to the window
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <vector>

namespace peregrine::compress {
namespace {

constexpr size_t kOutStep = 16 * 1024;

// The encoders' own allocations (zlib's window and hash chains, brotli's and zstd's tables),
// recycled per thread. A response compressed in one go creates and frees its encoder's ~300 KB
// every time; through malloc that memory went back to the kernel (madvise) and was faulted in
// again on the next response: three quarters of a PHP page's compression time. The blocks come
// back in the same few sizes, so an exact-size free list serves nearly every request.
class BlockCache {
 public:
  static constexpr size_t kKeepBytes = 8u << 20;  // per thread
  void* allocate(size_t size) {
    for (size_t i = blocks_.size(); i-- > 0;) {
      if (blocks_[i].size == size) {
        void* p = blocks_[i].block;
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
        kept_ -= size;
        return p;
      }
    }
    return allocate_uncached(size);
  }
  void release(void* p) {
    if (!p) return;
    const size_t size = *reinterpret_cast<size_t*>(static_cast<char*>(p) - kHeader);
    if (kept_ + size > kKeepBytes || blocks_.size() >= 256) {
      release_uncached(p);
      return;
    }
    blocks_.push_back({size, p});
    kept_ += size;
  }
  ~BlockCache() {
    for (const Block& b : blocks_) std::free(static_cast<char*>(b.block) - kHeader);
    gone() = true;
  }
  // True once the thread's cache is destroyed: an encoder freed later, by another thread_local's
  // destructor (a spare HTTP/2 stream still holding its decorator), frees straight to the heap.
  // A bool has no destructor, so it stays readable until the thread ends.
  static bool& gone() {
    thread_local bool destroyed = false;
    return destroyed;
  }
  static void* allocate_uncached(size_t size) {
    auto* header = static_cast<size_t*>(std::malloc(size + kHeader));
    if (!header) return nullptr;
    *header = size;
    return reinterpret_cast<char*>(header) + kHeader;
  }
  static void release_uncached(void* p) {
    if (p) std::free(static_cast<char*>(p) - kHeader);
  }

 private:
  static constexpr size_t kHeader = alignof(std::max_align_t);
  struct Block {
    size_t size;
    void* block;
  };
  std::vector<Block> blocks_;
  size_t kept_ = 0;
};

BlockCache& block_cache() {
  thread_local BlockCache cache;
  return cache;
}

void* cached_alloc(void*, size_t size) {
  if (BlockCache::gone()) return BlockCache::allocate_uncached(size);
  return block_cache().allocate(size);
}
void cached_free(void*, void* p) {
  if (BlockCache::gone()) return BlockCache::release_uncached(p);
  block_cache().release(p);
}
// zlib's hooks go the same way, so a gzip encoder freed after its thread's cache is gone frees
// straight to the heap too.
voidpf zlib_alloc(voidpf opaque, uInt items, uInt size) {
  return cached_alloc(opaque, static_cast<size_t>(items) * size);
}
void zlib_free(voidpf opaque, voidpf p) {
  cached_free(opaque, p);
}

// log2 of the smallest power of two >= size, within [lo, hi].
int fit_log(int64_t size, int lo, int hi) {
  int log = lo;
  while (log < hi && (int64_t{1} << log) < size) ++log;
  return log;
}

class GzipEncoder final : public Encoder {
 public:
  GzipEncoder(int level, int window_log) : Encoder(Coding::kGzip, level, window_log) {}
  ~GzipEncoder() override {
    if (ready_) deflateEnd(&z_);
  }
  bool init() {
    // zlib's own accounting: (1 << (windowBits + 2)) + (1 << (memLevel + 9)) bytes. The memory
    // level follows the window down, as nginx does, so a small body gets small tables too.
    const int mem_level = std::clamp(window_log() - 7, 1, 8);
    z_.zalloc = zlib_alloc;
    z_.zfree = zlib_free;
    ready_ = deflateInit2(&z_, level(), Z_DEFLATED, window_log() + 16, mem_level,
                          Z_DEFAULT_STRATEGY) == Z_OK;
    return ready_;
  }
  bool encode(std::string_view input, Flush flush, std::string* out) override {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    z_.avail_in = static_cast<uInt>(input.size());
    const int mode = flush == Flush::kFinish ? Z_FINISH
                     : flush == Flush::kSync ? Z_SYNC_FLUSH
                                             : Z_NO_FLUSH;
    for (;;) {
      const size_t used = out->size();
      const size_t room = std::max<size_t>(kOutStep, deflateBound(&z_, z_.avail_in) / 2);
      out->resize(used + room);
      z_.next_out = reinterpret_cast<Bytef*>(out->data() + used);
      z_.avail_out = static_cast<uInt>(room);
      const int rc = deflate(&z_, mode);
      out->resize(used + room - z_.avail_out);
      if (rc == Z_STREAM_END) return true;
      if (rc != Z_OK && rc != Z_BUF_ERROR) return false;
      // Done when zlib left room unused: it has nothing more to say for this call.
      if (z_.avail_out != 0 && z_.avail_in == 0) return true;
    }
  }
  bool reset() override { return deflateReset(&z_) == Z_OK; }

 private:
  z_stream z_{};
  bool ready_ = false;
};

class BrotliEncoder final : public Encoder {
 public:
  BrotliEncoder(int level, int window_log, int64_t size_hint)
      : Encoder(Coding::kBrotli, level, window_log), size_hint_(size_hint) {}
  ~BrotliEncoder() override {
    if (state_) BrotliEncoderDestroyInstance(state_);
  }
  bool init() {
    state_ = BrotliEncoderCreateInstance(cached_alloc, cached_free, nullptr);
    if (!state_) return false;
    BrotliEncoderSetParameter(state_, BROTLI_PARAM_QUALITY, static_cast<uint32_t>(level()));
    BrotliEncoderSetParameter(state_, BROTLI_PARAM_LGWIN, static_cast<uint32_t>(window_log()));
    if (size_hint_ > 0) {
      BrotliEncoderSetParameter(state_, BROTLI_PARAM_SIZE_HINT,
                                static_cast<uint32_t>(std::min<int64_t>(size_hint_, 1 << 30)));
    }
    return true;
  }
  bool encode(std::string_view input, Flush flush, std::string* out) override {
    const BrotliEncoderOperation op = flush == Flush::kFinish ? BROTLI_OPERATION_FINISH
                                      : flush == Flush::kSync ? BROTLI_OPERATION_FLUSH
                                                              : BROTLI_OPERATION_PROCESS;
    size_t avail_in = input.size();
    const uint8_t* next_in = reinterpret_cast<const uint8_t*>(input.data());
    for (;;) {
      const size_t used = out->size();
      out->resize(used + kOutStep);
      size_t avail_out = kOutStep;
      uint8_t* next_out = reinterpret_cast<uint8_t*>(out->data() + used);
      if (!BrotliEncoderCompressStream(state_, op, &avail_in, &next_in, &avail_out, &next_out,
                                       nullptr)) {
        out->resize(used);
        return false;
      }
      out->resize(used + kOutStep - avail_out);
      if (avail_in == 0 && !BrotliEncoderHasMoreOutput(state_)) {
        if (op == BROTLI_OPERATION_FINISH && !BrotliEncoderIsFinished(state_)) continue;
        return true;
      }
    }
  }
  bool reset() override {
    // libbrotlienc has no reset: a fresh instance costs little next to what it compresses.
    if (state_) BrotliEncoderDestroyInstance(state_);
    state_ = nullptr;
    return init();
  }

 private:
  BrotliEncoderState* state_ = nullptr;
  int64_t size_hint_;
};

class ZstdEncoder final : public Encoder {
 public:
  ZstdEncoder(int level, int window_log, int64_t size_hint)
      : Encoder(Coding::kZstd, level, window_log), size_hint_(size_hint) {}
  ~ZstdEncoder() override { ZSTD_freeCCtx(cctx_); }
  bool init() {
    cctx_ = ZSTD_createCCtx_advanced(ZSTD_customMem{cached_alloc, cached_free, nullptr});
    if (!cctx_) return false;
    return configure();
  }
  bool encode(std::string_view input, Flush flush, std::string* out) override {
    const ZSTD_EndDirective mode = flush == Flush::kFinish ? ZSTD_e_end
                                   : flush == Flush::kSync ? ZSTD_e_flush
                                                           : ZSTD_e_continue;
    ZSTD_inBuffer in{input.data(), input.size(), 0};
    for (;;) {
      const size_t used = out->size();
      out->resize(used + kOutStep);
      ZSTD_outBuffer buffer{out->data() + used, kOutStep, 0};
      const size_t left = ZSTD_compressStream2(cctx_, &buffer, &in, mode);
      out->resize(used + buffer.pos);
      if (ZSTD_isError(left)) return false;
      if (mode == ZSTD_e_continue ? in.pos == in.size : left == 0) return true;
    }
  }
  bool reset() override {
    return !ZSTD_isError(ZSTD_CCtx_reset(cctx_, ZSTD_reset_session_and_parameters)) && configure();
  }

 private:
  bool configure() {
    // The level's parameters as tuned for a source of this size, so the hash and chain tables
    // shrink with it. A stream of unknown length is tuned as if it were 64 KiB (a page): its
    // state is 0.9 MB instead of 1.5 MB at level 3, which is what bounds thousands of them.
    const uint64_t estimate =
        size_hint_ > 0 ? static_cast<uint64_t>(size_hint_) : uint64_t{1} << (window_log() - 2);
    ZSTD_compressionParameters p = ZSTD_getCParams(level(), estimate, 0);
    p.windowLog = std::min<unsigned>(p.windowLog, static_cast<unsigned>(window_log()));
    p = ZSTD_adjustCParams(p, estimate, 0);
    auto set = [&](ZSTD_cParameter param, int value) {
      return !ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, param, value));
    };
    return set(ZSTD_c_compressionLevel, level()) &&
           set(ZSTD_c_windowLog, static_cast<int>(p.windowLog)) &&
           set(ZSTD_c_hashLog, static_cast<int>(p.hashLog)) &&
           set(ZSTD_c_chainLog, static_cast<int>(p.chainLog)) &&
           set(ZSTD_c_searchLog, static_cast<int>(p.searchLog)) &&
           set(ZSTD_c_minMatch, static_cast<int>(p.minMatch)) &&
           set(ZSTD_c_targetLength, static_cast<int>(p.targetLength)) &&
           set(ZSTD_c_strategy, static_cast<int>(p.strategy)) &&
           (size_hint_ < 0 ||
            !ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(cctx_, static_cast<uint64_t>(size_hint_))));
  }

  ZSTD_CCtx* cctx_ = nullptr;
  int64_t size_hint_;
};

bool level_valid(Coding coding, int level) {
  switch (coding) {
    case Coding::kGzip:
      return level >= 1 && level <= 9;
    case Coding::kBrotli:
      return level >= 0 && level <= 11;
    case Coding::kZstd:
      return level >= 1 && level <= 19;
    case Coding::kIdentity:
      break;
  }
  return false;
}

struct Pool {
  static constexpr size_t kKeep = 16;  // idle encoders kept per thread
  // The block cache must outlive the pooled encoders that free into it at thread exit:
  // thread_locals are destroyed in reverse order of construction, so build it first.
  Pool() { block_cache(); }
  ~Pool() {
    idle.clear();
    gone() = true;
  }
  // As BlockCache::gone(): an encoder recycled after the pool is destroyed is dropped.
  static bool& gone() {
    thread_local bool destroyed = false;
    return destroyed;
  }
  std::vector<std::unique_ptr<Encoder>> idle;
};

Pool& pool() {
  thread_local Pool p;
  return p;
}

}  // namespace

int max_window_log(Coding coding) {
  switch (coding) {
    case Coding::kGzip:
      return 15;  // zlib's largest: 256 KiB of state at memory level 8
    case Coding::kBrotli:
      return 18;
    case Coding::kZstd:
      return 18;
    case Coding::kIdentity:
      break;
  }
  return 0;
}

int window_log_for(Coding coding, int64_t size_hint) {
  const int hi = max_window_log(coding);
  if (size_hint < 0) return hi;
  const int lo = coding == Coding::kGzip ? 9 : 10;
  return fit_log(size_hint, lo, hi);
}

std::unique_ptr<Encoder> make_encoder(Coding coding, int level, int64_t size_hint) {
  if (!level_valid(coding, level)) return nullptr;
  const int window = window_log_for(coding, size_hint);
  std::unique_ptr<Encoder> made;
  switch (coding) {
    case Coding::kGzip: {
      auto e = std::make_unique<GzipEncoder>(level, window);
      if (e->init()) made = std::move(e);
      break;
    }
    case Coding::kBrotli: {
      auto e = std::make_unique<BrotliEncoder>(level, window, size_hint);
      if (e->init()) made = std::move(e);
      break;
    }
    case Coding::kZstd: {
      auto e = std::make_unique<ZstdEncoder>(level, window, size_hint);
      if (e->init()) made = std::move(e);
      break;
    }
    case Coding::kIdentity:
      break;
  }
  if (made) made->set_unknown_length(size_hint < 0);
  return made;
}

std::unique_ptr<Encoder> acquire_encoder(Coding coding, int level, int64_t size_hint) {
  // Only streams of unknown length are pooled: their parameters are always the same, while a
  // known length picks its own window (and zstd pledges the size).
  if (size_hint < 0) {
    auto& idle = pool().idle;
    for (size_t i = idle.size(); i-- > 0;) {
      Encoder& e = *idle[i];
      if (e.coding() == coding && e.level() == level) {
        std::unique_ptr<Encoder> found = std::move(idle[i]);
        idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(i));
        return found;
      }
    }
  }
  return make_encoder(coding, level, size_hint);
}

void recycle_encoder(std::unique_ptr<Encoder> encoder) {
  if (!encoder || Pool::gone()) return;
  auto& idle = pool().idle;
  if (!encoder->unknown_length() || idle.size() >= Pool::kKeep ||
      encoder->coding() == Coding::kBrotli || !encoder->reset())
    return;  // dropped
  idle.push_back(std::move(encoder));
}

bool compress_all(Coding coding, int level, std::string_view input, std::string* out) {
  std::unique_ptr<Encoder> encoder =
      make_encoder(coding, level, static_cast<int64_t>(input.size()));
  return encoder && encoder->encode(input, Encoder::Flush::kFinish, out);
}

}  // namespace peregrine::compress
