#include "peregrine/response.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/strings.h"

namespace peregrine {

BodyFile::~BodyFile() {
  ::close(fd_);
}

namespace {

// Whether `value` holds a CR, LF or NUL (which would let it inject a header line). Eight bytes at
// a time, looking closer only at a word with a control character: byte by byte, this check and
// the name's were most of a "Hello world" handler's add_header().
bool breaks_line(std::string_view value) {
  const char* p = value.data();
  size_t left = value.size();
  auto bad = [](unsigned char c) { return c == '\r' || c == '\n' || c == '\0'; };
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighs = 0x8080808080808080;
  for (; left >= 8; p += 8, left -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    if (((word - kOnes * 0x20) & ~word & kHighs) == 0) continue;  // no byte below 0x20
    for (int i = 0; i < 8; ++i)
      if (bad(static_cast<unsigned char>(p[i]))) return true;
  }
  for (; left; ++p, --left)
    if (bad(static_cast<unsigned char>(*p))) return true;
  return false;
}

}  // namespace

bool Response::add_header(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!is_tchar(c)) return false;
  return append_header_line(name, value);
}

void Response::set_content_type(std::string_view type) {
  append_header_line("Content-Type", type);
}

bool Response::append_header_line(std::string_view name, std::string_view value) {
  if (breaks_line(value)) return false;
  // One append of the whole line rather than four.
  const size_t length = name.size() + value.size() + 4;
  char line[256];
  if (length > sizeof line) {
    headers_.append(name).append(": ").append(value).append("\r\n");
    return true;
  }
  char* p = line;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p++ = '\n';
  headers_.append(line, length);
  return true;
}

void Response::set_body(std::string_view bytes) {
  body_.clear();
  segments_.clear();
  body_length_ = 0;
  append_body(bytes);
}

void Response::append_body(std::string_view bytes) {
  if (bytes.empty()) return;
  if (!segments_.empty() && segments_.back().kind == Segment::Kind::kOwned) {
    segments_.back().length += bytes.size();
  } else {
    segments_.push_back({Segment::Kind::kOwned, body_.size(), bytes.size(), nullptr, {}, 0});
  }
  body_.append(bytes);
  body_length_ += bytes.size();
}

void Response::append_borrowed_body(std::string_view bytes) {
  if (bytes.empty()) return;
  segments_.push_back({Segment::Kind::kBorrowed, 0, bytes.size(), bytes.data(), {}, 0});
  body_length_ += bytes.size();
}

void Response::append_file(Ref<BodyFile> file, off_t offset, size_t length) {
  if (length == 0) return;
  segments_.push_back({Segment::Kind::kFile, 0, length, nullptr, std::move(file), offset});
  body_length_ += length;
}

void Response::clear() {
  status_ = 200;
  close_ = false;
  headers_.clear();
  prebuilt_headers_ = {};
  body_.clear();
  segments_.clear();
  body_length_ = 0;
}

}  // namespace peregrine
