// Bytes and file regions waiting to go out on one connection, in order. The worker keeps one as
// scratch and reuses it for every connection, so a response that leaves in one write costs no
// allocation; only what the socket refuses is moved into a queue the connection owns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/response.h"

namespace peregrine::tls {
class Stream;
}

namespace peregrine::server {

class OutputQueue {
 public:
  enum class FlushResult : uint8_t { kDone, kBlocked, kError };

  void append(std::string_view bytes) { bytes_.append(bytes); }
  std::string& bytes() { return bytes_; }
  void append_file(const Ref<BodyFile>& file, off_t offset, size_t length);
  bool empty() const { return sent_ == bytes_.size() && next_cut_ == cuts_.size(); }
  // Nothing but bytes (no file region) is waiting: unsent() is all of it.
  bool only_bytes() const { return next_cut_ == cuts_.size(); }
  std::string_view unsent() const { return std::string_view(bytes_).substr(sent_); }
  size_t pending_bytes() const;

  // Writes as much as the socket takes: one send() for the common all-in-memory case. With a TLS
  // stream, everything goes through it (see flush_tls).
  FlushResult flush(int fd, tls::Stream* tls = nullptr) {
    return tls ? flush_tls(*tls) : flush_plain(fd);
  }
  // Moves the unsent remainder of `other` into this (empty) queue; `other` is left empty.
  void take_remainder(OutputQueue& other);
  // Appends the unsent remainder of `other` after what this queue holds; `other` is left empty.
  void append_queue(OutputQueue& other);
  void clear();

 private:
  // A file region that goes out once bytes_ up to `before` has been sent.
  struct Cut {
    size_t before;
    Ref<BodyFile> file;
    off_t offset;
    size_t remaining;
  };
  FlushResult flush_plain(int fd);
  FlushResult flush_tls(tls::Stream& tls);

  std::string bytes_;
  size_t sent_ = 0;
  std::vector<Cut> cuts_;
  size_t next_cut_ = 0;
};

}  // namespace peregrine::server
