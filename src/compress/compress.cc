#include "compress/compress.h"

#include "compress/decision.h"

namespace peregrine::compress {
namespace {

// The whole body of a complete response as one view: its only segment, or the segments copied
// into `scratch`. False when part of it is a file region.
bool body_bytes(const Response& response, std::string& scratch, std::string_view* out) {
  const auto& segments = response.segments();
  scratch.clear();
  for (const Response::Segment& s : segments) {
    std::string_view bytes;
    switch (s.kind) {
      case Response::Segment::Kind::kOwned:
        bytes = response.owned_bytes(s);
        break;
      case Response::Segment::Kind::kBorrowed:
        bytes = std::string_view(s.data, s.length);
        break;
      case Response::Segment::Kind::kFile:
        return false;
    }
    if (segments.size() == 1) {
      *out = bytes;
      return true;
    }
    scratch.append(bytes);
  }
  *out = scratch;
  return true;
}

Coding negotiate_for(const RequestFacts& rq, const Options& options) {
  return negotiate(rq.has_accept_encoding ? &rq.accept_encoding : nullptr, options);
}

}  // namespace

void compress_response(const Request& request, Response& response, const Options& options) {
  const int status = response.status();
  // Cheap refusals first: most responses that are not candidates stop here.
  if (status < 200 || status == 204 || status == 206 || status == 304) return;
  if (response.body_length() == 0 || response.body_length() < options.min_length) return;

  const RequestFacts rq = read_request(request);
  const Coding coding = negotiate_for(rq, options);
  HeadFacts head = read_head(request, response, static_cast<int64_t>(response.body_length()));
  head.facts.range_request = rq.range;
  const Verdict verdict = decide(head.facts, options, coding);
  if (verdict == Verdict::kNever) return;

  thread_local std::string input_scratch;
  thread_local std::string output;
  std::string_view input;
  output.clear();
  if (verdict == Verdict::kIdentity || !body_bytes(response, input_scratch, &input) ||
      !compress_all(coding, options.level_for(coding), input, &output)) {
    add_vary(response, head);
    return;
  }
  // `input` may point into the response's own storage: it is not used past this point.
  rewrite_for_coding(response, coding, head);
  response.append_body(output);
  if (output.capacity() > (1u << 20)) std::string().swap(output);  // keep no huge buffer
  if (input_scratch.capacity() > (1u << 20)) std::string().swap(input_scratch);
}

CompressingDownstream::CompressingDownstream(handlers::Downstream& client, const Request& request,
                                             const Options& options)
    : client_(client), request_(request), options_(options) {}

CompressingDownstream::~CompressingDownstream() {
  if (encoder_) recycle_encoder(std::move(encoder_));
}

void CompressingDownstream::respond(Response& response) {
  maybe_compress(request_, response, options_);
  client_.respond(response);
}

bool CompressingDownstream::send_head(Response& head, int64_t content_length) {
  const RequestFacts rq = read_request(request_);
  const Coding coding = negotiate_for(rq, options_);
  HeadFacts facts = read_head(request_, head, content_length);
  facts.facts.range_request = rq.range;
  const Verdict verdict = decide(facts.facts, options_, coding);
  if (verdict == Verdict::kNever) return client_.send_head(head, content_length);
  if (verdict == Verdict::kIdentity) {
    add_vary(head, facts);
    return client_.send_head(head, content_length);
  }
  encoder_ = acquire_encoder(coding, options_.level_for(coding), content_length);
  if (!encoder_) {
    add_vary(head, facts);
    return client_.send_head(head, content_length);
  }
  flush_each_write_ = facts.flush_each_write;
  // Body bytes that came with the head are compressed before the head is rebuilt (which empties
  // the body).
  out_.clear();
  bool ok = true;
  if (head.body_length() > 0) {
    thread_local std::string scratch;
    scratch.clear();
    for (const Response::Segment& s : head.segments()) {
      if (s.kind == Response::Segment::Kind::kOwned)
        scratch.append(head.owned_bytes(s));
      else if (s.kind == Response::Segment::Kind::kBorrowed)
        scratch.append(s.data, s.length);
    }
    ok = encoder_->encode(scratch,
                          flush_each_write_ ? Encoder::Flush::kSync : Encoder::Flush::kNone, &out_);
  }
  rewrite_for_coding(head, coding, facts);
  if (!ok) {
    failed_ = true;
    encoder_.reset();
  }
  head.append_body(out_);
  out_.clear();
  return client_.send_head(head, -1);
}

handlers::Downstream::Sent CompressingDownstream::send_body(std::string_view bytes) {
  if (!encoder_) return failed_ ? Sent::kMore : client_.send_body(bytes);
  if (bytes.empty()) return Sent::kMore;
  out_.clear();
  if (!encoder_->encode(bytes, flush_each_write_ ? Encoder::Flush::kSync : Encoder::Flush::kNone,
                        &out_)) {
    // Out of memory mid-stream: the body cannot be completed correctly.
    failed_ = true;
    encoder_.reset();
    return Sent::kMore;
  }
  const Sent sent = out_.empty() ? Sent::kMore : client_.send_body(out_);
  input_since_look_ += bytes.size();
  if (sent != Sent::kMore) {
    input_since_look_ = 0;  // paused (the client's queue is full) or gone
    return sent;
  }
  // Compressed output can be a thousandth of the input: it would take megabytes of input before
  // the client's queue filled and said kFull, while the encoder grows. So every kInputWindow
  // bytes of input, a client that has not yet written out what it was given stops the upstream
  // too, until it has (on_writable()). What the kernel's socket buffers took is out of sight.
  if (input_since_look_ < kInputWindow) return Sent::kMore;
  input_since_look_ = 0;
  return client_.hold_if_queued();
}

void CompressingDownstream::finish() {
  if (failed_) {
    client_.fail(500);  // after the head: the connection closes, the client sees a cut body
    return;
  }
  if (encoder_) {
    out_.clear();
    if (!encoder_->encode({}, Encoder::Flush::kFinish, &out_)) {
      client_.fail(500);
      return;
    }
    if (!out_.empty() && client_.send_body(out_) == Sent::kGone) return;
    std::string().swap(out_);
  }
  client_.finish();
}

}  // namespace peregrine::compress
