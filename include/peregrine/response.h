// What a handler fills in. The connection serializes it (status line, Date, Server, framing
// headers) and sends it; handlers never touch the socket.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/ref_counted.h"

namespace peregrine {

// An open file whose bytes a response sends with sendfile(2). Closes the descriptor when the last
// reference goes away, so a cached file stays open while a slow client still downloads it.
class BodyFile : public RefCounted {
 public:
  explicit BodyFile(int fd) : fd_(fd) {}
  int fd() const { return fd_; }

 protected:
  ~BodyFile() override;

 private:
  int fd_;
};

class Response {
 public:
  // One piece of the body: bytes (copied into the response or borrowed) or a file region.
  struct Segment {
    enum class Kind : uint8_t { kOwned, kBorrowed, kFile } kind;
    size_t offset = 0;  // kOwned: offset into the owned-bytes storage
    size_t length = 0;
    const char* data = nullptr;  // kBorrowed
    Ref<BodyFile> file;          // kFile
    off_t file_offset = 0;
  };

  int status() const { return status_; }
  void set_status(int status) { status_ = status; }

  // Adds "name: value". Returns false, adding nothing, when the name is not a token or the value
  // holds CR, LF or NUL: a handler can never split the response.
  bool add_header(std::string_view name, std::string_view value);
  void set_content_type(std::string_view type);

  // Pre-serialized "Name: value\r\n" lines built once by a handler (a cached file's headers). The
  // bytes are borrowed: they must stay valid until the handler returns.
  void set_prebuilt_headers(std::string_view lines) { prebuilt_headers_ = lines; }

  // Body. Each call appends; bytes are copied unless borrowed (then valid until handle() returns).
  void set_body(std::string_view bytes);
  void append_body(std::string_view bytes);
  void append_borrowed_body(std::string_view bytes);
  void append_file(Ref<BodyFile> file, off_t offset, size_t length);
  size_t body_length() const { return body_length_; }

  // Send "Connection: close" and close the connection after this response.
  void close_connection() { close_ = true; }
  bool closes_connection() const { return close_; }

  // ---- Read by the serializer ----
  std::string_view extra_headers() const { return headers_; }
  std::string_view prebuilt_headers() const { return prebuilt_headers_; }
  const std::vector<Segment>& segments() const { return segments_; }
  std::string_view owned_bytes(const Segment& s) const {
    return {body_.data() + s.offset, s.length};
  }
  // Empties the response and keeps its buffers, for the next one.
  void clear();
  // Bytes of buffer it holds (kept by clear()).
  // The segment list counts too: a PHP answer with one short header held 55 string bytes,
  // under Spares' 64-byte floor, so its buffers were dropped and allocated again per request.
  size_t capacity() const {
    return headers_.capacity() + body_.capacity() + segments_.capacity() * sizeof(Segment);
  }

 private:
  int status_ = 200;
  bool close_ = false;
  std::string headers_;
  std::string_view prebuilt_headers_;
  std::string body_;
  std::vector<Segment> segments_;
  size_t body_length_ = 0;

  bool append_header_line(std::string_view name, std::string_view value);
};

}  // namespace peregrine
