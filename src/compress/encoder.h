// Streaming encoders for gzip (zlib), brotli (libbrotlienc) and zstd (libzstd) behind one small
// interface: feed bytes, flush (everything fed so far becomes decodable), finish. Memory per
// stream is bounded: the window (and zlib's memory level, zstd's tables) are sized down to the
// body's length when it is known and small, and capped when it is not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compress/coding.h"

namespace peregrine::compress {

class Encoder {
 public:
  enum class Flush : uint8_t {
    kNone,    // buffer as the coding likes
    kSync,    // what was fed so far can be decoded from the output (server-sent events)
    kFinish,  // the end of the stream
  };
  virtual ~Encoder() = default;
  Coding coding() const { return coding_; }
  int level() const { return level_; }
  int window_log() const { return window_log_; }
  // Made for a body of unknown length: the parameters every such stream shares (poolable).
  bool unknown_length() const { return unknown_length_; }
  void set_unknown_length(bool unknown) { unknown_length_ = unknown; }
  // Compresses `input` and appends what the coding emits to *out. False on an internal error
  // (out of memory): the stream is then unusable.
  virtual bool encode(std::string_view input, Flush flush, std::string* out) = 0;
  // Starts a new stream with the same parameters (for reuse). False if it cannot.
  virtual bool reset() = 0;

 protected:
  Encoder(Coding coding, int level, int window_log)
      : coding_(coding), level_(level), window_log_(window_log) {}

 private:
  Coding coding_;
  int level_;
  int window_log_;
  bool unknown_length_ = false;
};

// The largest window a stream of unknown length gets (log2 bytes), per coding: what bounds
// memory for many concurrent streams.
int max_window_log(Coding coding);
// The window for a body of `size_hint` bytes (< 0: unknown).
int window_log_for(Coding coding, int64_t size_hint);

// A new encoder; null for kIdentity, a level out of range or no memory. `size_hint` < 0 means
// the length is unknown.
std::unique_ptr<Encoder> make_encoder(Coding coding, int level, int64_t size_hint);

// An encoder from this thread's pool of idle ones with the same parameters, else a new one; give
// it back with recycle_encoder(). Keeps a few per coding, so a busy worker does not rebuild
// zlib's or zstd's tables for every response.
std::unique_ptr<Encoder> acquire_encoder(Coding coding, int level, int64_t size_hint);
void recycle_encoder(std::unique_ptr<Encoder> encoder);

// One-shot: the whole of `input`, compressed, appended to *out.
bool compress_all(Coding coding, int level, std::string_view input, std::string* out);

}  // namespace peregrine::compress
