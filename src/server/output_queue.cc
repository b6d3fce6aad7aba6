#include "server/output_queue.h"

#include <sys/sendfile.h>
#include <sys/socket.h>

#include <cerrno>

namespace peregrine::server {

void OutputQueue::append_file(const Ref<BodyFile>& file, off_t offset, size_t length) {
  cuts_.push_back({bytes_.size(), file, offset, length});
}

size_t OutputQueue::pending_bytes() const {
  size_t total = bytes_.size() - sent_;
  for (size_t i = next_cut_; i < cuts_.size(); ++i) total += cuts_[i].remaining;
  return total;
}

OutputQueue::FlushResult OutputQueue::flush(int fd) {
  for (;;) {
    size_t limit = next_cut_ < cuts_.size() ? cuts_[next_cut_].before : bytes_.size();
    if (sent_ < limit) {
      // MSG_MORE when a file follows: the headers and the first file bytes share a packet.
      int flags = MSG_NOSIGNAL | (next_cut_ < cuts_.size() ? MSG_MORE : 0);
      ssize_t n = ::send(fd, bytes_.data() + sent_, limit - sent_, flags);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN ? FlushResult::kBlocked : FlushResult::kError;
      }
      sent_ += static_cast<size_t>(n);
      if (sent_ < limit) return FlushResult::kBlocked;
      continue;
    }
    if (next_cut_ < cuts_.size()) {
      Cut& cut = cuts_[next_cut_];
      while (cut.remaining > 0) {
        ssize_t n = ::sendfile(fd, cut.file->fd(), &cut.offset, cut.remaining);
        if (n < 0) {
          if (errno == EINTR) continue;
          return errno == EAGAIN ? FlushResult::kBlocked : FlushResult::kError;
        }
        if (n == 0)
          return FlushResult::kError;  // the file shrank under us: the length is a lie now
        cut.remaining -= static_cast<size_t>(n);
      }
      cut.file.reset();
      ++next_cut_;
      continue;
    }
    clear();
    return FlushResult::kDone;
  }
}

void OutputQueue::take_remainder(OutputQueue& other) {
  bytes_.assign(other.bytes_, other.sent_);
  cuts_.clear();
  next_cut_ = 0;
  sent_ = 0;
  for (size_t i = other.next_cut_; i < other.cuts_.size(); ++i) {
    Cut cut = std::move(other.cuts_[i]);
    cut.before = cut.before > other.sent_ ? cut.before - other.sent_ : 0;
    cuts_.push_back(std::move(cut));
  }
  other.clear();
}

void OutputQueue::append_queue(OutputQueue& other) {
  const size_t base = bytes_.size();
  bytes_.append(other.bytes_, other.sent_);
  for (size_t i = other.next_cut_; i < other.cuts_.size(); ++i) {
    Cut cut = std::move(other.cuts_[i]);
    cut.before = base + (cut.before > other.sent_ ? cut.before - other.sent_ : 0);
    cuts_.push_back(std::move(cut));
  }
  other.clear();
}

void OutputQueue::clear() {
  bytes_.clear();
  sent_ = 0;
  cuts_.clear();
  next_cut_ = 0;
}

}  // namespace peregrine::server
