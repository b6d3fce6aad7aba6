#include "peregrine/response.h"

#include <unistd.h>

#include "core/strings.h"

namespace peregrine {

BodyFile::~BodyFile() {
  ::close(fd_);
}

bool Response::add_header(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!is_tchar(c)) return false;
  for (unsigned char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  headers_.append(name).append(": ").append(value).append("\r\n");
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
