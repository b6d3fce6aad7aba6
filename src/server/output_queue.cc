#include "server/output_queue.h"

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "metrics/metrics.h"
#include "tls/stream.h"

namespace peregrine::server {

void OutputQueue::append_file(const Ref<BodyFile>& file, off_t offset, size_t length) {
  cuts_.push_back({bytes_.size(), file, offset, length});
}

size_t OutputQueue::pending_bytes() const {
  size_t total = bytes_.size() - sent_;
  for (size_t i = next_cut_; i < cuts_.size(); ++i) total += cuts_[i].remaining;
  return total;
}

OutputQueue::FlushResult OutputQueue::flush_plain(int fd) {
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
      metrics::local().bytes_sent[0].add(static_cast<uint64_t>(n));
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
        metrics::local().bytes_sent[0].add(static_cast<uint64_t>(n));
      }
      cut.file.reset();
      ++next_cut_;
      continue;
    }
    clear();
    return FlushResult::kDone;
  }
}

// Over TLS: bytes go out through SSL_write (partial writes on: it returns after whole records, so
// only -1/EAGAIN means the socket is full). File regions go out with SSL_sendfile when the
// kernel encrypts (kTLS); otherwise they are read with pread and written a record at a time,
// and a short head before a file shares the file's first record. A write that must be retried
// is retried with the same bytes from the same place (the state only moves on success), which
// is what OpenSSL requires; the buffer may move (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
OutputQueue::FlushResult OutputQueue::flush_tls(tls::Stream& tls) {
  constexpr size_t kRecord = 16 * 1024;  // one TLS record's plaintext
  for (;;) {
    const bool has_cut = next_cut_ < cuts_.size();
    const size_t limit = has_cut ? cuts_[next_cut_].before : bytes_.size();
    const size_t head = limit - sent_;
    if (head > 0 && (!has_cut || head >= kRecord)) {
      ssize_t n = tls.write(bytes_.data() + sent_, head);
      if (n < 0) return errno == EAGAIN ? FlushResult::kBlocked : FlushResult::kError;
      sent_ += static_cast<size_t>(n);
      metrics::local().bytes_sent[0].add(static_cast<uint64_t>(n));
      continue;
    }
    if (!has_cut) {
      clear();
      return FlushResult::kDone;
    }
    Cut& cut = cuts_[next_cut_];
    if (cut.remaining == 0) {
      cut.file.reset();
      ++next_cut_;
      continue;
    }
    if (head == 0 && tls.kernel_send()) {
      ssize_t n = tls.sendfile(cut.file->fd(), cut.offset, cut.remaining);
      if (n < 0) return errno == EAGAIN ? FlushResult::kBlocked : FlushResult::kError;
      if (n == 0) return FlushResult::kError;
      cut.offset += n;
      cut.remaining -= static_cast<size_t>(n);
      metrics::local().bytes_sent[0].add(static_cast<uint64_t>(n));
      continue;
    }
    char record[kRecord];
    std::copy_n(bytes_.data() + sent_, head, record);
    const size_t want = std::min(cut.remaining, kRecord - head);
    ssize_t got = ::pread(cut.file->fd(), record + head, want, cut.offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return FlushResult::kError;  // a read error, or the file shrank under us
    ssize_t n = tls.write(record, head + static_cast<size_t>(got));
    if (n < 0) return errno == EAGAIN ? FlushResult::kBlocked : FlushResult::kError;
    const size_t from_head = std::min(static_cast<size_t>(n), head);
    const size_t from_file = static_cast<size_t>(n) - from_head;
    sent_ += from_head;
    cut.offset += static_cast<off_t>(from_file);
    cut.remaining -= from_file;
    metrics::local().bytes_sent[0].add(static_cast<uint64_t>(n));
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
