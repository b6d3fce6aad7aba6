#include "websocket/session.h"

#include <openssl/rand.h>

namespace peregrine::websocket {

Session::Session(Role role, SessionLimits limits, const PerMessageDeflate& deflate)
    : Session(role, limits) {
  enable_permessage_deflate(deflate);
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

void Session::enable_permessage_deflate(const PerMessageDeflate& params) {
  const bool server = role_ == Role::kServer;
  // Our compressor follows our side's parameters, our inflater the peer's.
  deflater_ = std::make_unique<MessageDeflater>(
      server ? params.server_max_window_bits : params.client_max_window_bits,
      !(server ? params.server_no_context_takeover : params.client_no_context_takeover),
      params.mem_level, params.compression_level);
  inflater_ = std::make_unique<MessageInflater>(
      server ? params.client_max_window_bits : params.server_max_window_bits,
      !(server ? params.client_no_context_takeover : params.server_no_context_takeover));
  min_compress_bytes_ = params.min_compress_bytes;
  parser_ = FrameParser(role_, kRsv1);
}

bool Session::take_payload(bool last, std::vector<Event>& events, std::string& output) {
  MessageInflater::Status status = MessageInflater::Status::kOk;
  if (message_compressed_) {
    if (!compressed_.empty())
      status = inflater_->inflate(compressed_, message_, limits_.max_message_bytes);
    compressed_.clear();
    // An empty compressed payload stands for an empty message (what some senders make of an
    // empty input) and leaves the inflater untouched.
    if (status == MessageInflater::Status::kOk && last && compressed_bytes_ != 0)
      status = inflater_->finish(message_, limits_.max_message_bytes);
  }
  // Text is validated as it arrives, so that a bad byte fails the connection at once (not
  // when the last fragment comes, which may be never). What inflated before an inflate error is
  // checked first, so the outcome is the same however the compressed bytes were split.
  if (message_opcode_ == Opcode::kText && validated_ < message_.size()) {
    const bool valid = utf8_.feed(std::string_view(message_).substr(validated_));
    validated_ = message_.size();
    if (!valid) {
      fail(close_code::kInvalidPayload, "text message is not UTF-8", events, output);
      return false;
    }
  }
  if (status == MessageInflater::Status::kTooBig) {
    fail(close_code::kMessageTooBig, "message over the size limit once inflated", events, output);
    return false;
  }
  if (status == MessageInflater::Status::kCorrupt) {
    fail(close_code::kInvalidPayload, "compressed message does not inflate", events, output);
    return false;
  }
  return true;
}

void Session::receive(std::string_view bytes, std::vector<Event>& events, std::string& output) {
  while (state_ != State::kClosed) {
    std::string* payload = current_is_control_   ? &control_
                           : message_compressed_ ? &compressed_
                                                 : &message_;
    const FrameParser::Result r = parser_.parse(bytes, payload);
    bytes.remove_prefix(r.consumed);
    // The message's last bytes are taken at its frame's end, with the deflate tail.
    const bool ends_message = r.status == FrameParser::Status::kFrameEnd && parser_.header().fin;
    if (!current_is_control_ && in_message_ && !ends_message &&
        !take_payload(false, events, output)) {
      return;
    }
    switch (r.status) {
      case FrameParser::Status::kNeedMore:
        return;
      case FrameParser::Status::kHeader:
        if (!on_header(events, output)) return;
        break;
      case FrameParser::Status::kFrameEnd:
        if (!on_frame_end(events, output)) return;
        break;
      case FrameParser::Status::kError:
        return fail(parser_.error_code(), parser_.error_reason(), events, output);
    }
  }
}

bool Session::on_header(std::vector<Event>& events, std::string& output) {
  const FrameHeader& h = parser_.header();
  current_is_control_ = is_control(h.opcode);
  // RFC 7692 6: RSV1 (allowed by the parser only with permessage-deflate) marks a message's
  // first frame as compressed, and means nothing anywhere else.
  if ((h.rsv & kRsv1) != 0 && (current_is_control_ || h.opcode == Opcode::kContinuation)) {
    fail(close_code::kProtocolError,
         current_is_control_ ? "RSV1 on a control frame" : "RSV1 on a continuation frame", events,
         output);
    return false;
  }
  if (current_is_control_) {
    control_.clear();
    return true;
  }
  if (h.opcode == Opcode::kContinuation) {
    if (!in_message_) {
      fail(close_code::kProtocolError, "continuation frame without a message to continue", events,
           output);
      return false;
    }
  } else {
    if (in_message_) {
      fail(close_code::kProtocolError, "new message before the fragmented one ended", events,
           output);
      return false;
    }
    in_message_ = true;
    message_opcode_ = h.opcode;
    message_.clear();
    validated_ = 0;
    utf8_.reset();
    message_compressed_ = (h.rsv & kRsv1) != 0;
    compressed_bytes_ = 0;
  }
  if (message_compressed_) {
    // The inflated size is checked as it inflates; the compressed one may exceed it only by
    // deflate's overhead (stored blocks: 5 bytes per 64 KiB), never by more than 1/256 + 1 KiB.
    const uint64_t max = limits_.max_message_bytes;
    const uint64_t cap = max + max / 256 + 1024 < max ? max : max + max / 256 + 1024;
    if (h.length > cap - compressed_bytes_) {
      fail(close_code::kMessageTooBig, "compressed message over the size limit", events, output);
      return false;
    }
    compressed_bytes_ += h.length;
    return true;
  }
  // Refused on the header's word, before any of the payload is buffered.
  if (h.length > limits_.max_message_bytes - message_.size()) {
    fail(close_code::kMessageTooBig, "message over the size limit", events, output);
    return false;
  }
  return true;
}

bool Session::on_frame_end(std::vector<Event>& events, std::string& output) {
  const FrameHeader& h = parser_.header();
  if (current_is_control_) {
    switch (h.opcode) {
      case Opcode::kPing:
        // Once our close is sent, nothing else is (RFC 6455 5.5.1).
        if (state_ == State::kOpen) send(Opcode::kPong, control_, output);
        events.push_back({Event::Type::kPing, 0, control_});
        break;
      case Opcode::kPong:
        events.push_back({Event::Type::kPong, 0, control_});
        break;
      default:
        return on_close(events, output);
    }
    current_is_control_ = false;
    return true;
  }
  if (!h.fin) return true;
  if (!take_payload(true, events, output)) return false;
  if (message_opcode_ == Opcode::kText && !utf8_.complete()) {
    fail(close_code::kInvalidPayload, "text message ends inside a UTF-8 character", events, output);
    return false;
  }
  in_message_ = false;
  message_compressed_ = false;
  events.push_back({message_opcode_ == Opcode::kText ? Event::Type::kText : Event::Type::kBinary, 0,
                    std::move(message_)});
  message_.clear();
  validated_ = 0;
  return true;
}

bool Session::on_close(std::vector<Event>& events, std::string& output) {
  uint16_t code = close_code::kNoStatus;
  std::string_view reason;
  if (control_.size() == 1) {
    fail(close_code::kProtocolError, "close frame with a 1-byte body", events, output);
    return false;
  }
  if (control_.size() >= 2) {
    code = static_cast<uint16_t>((static_cast<uint8_t>(control_[0]) << 8) |
                                 static_cast<uint8_t>(control_[1]));
    reason = std::string_view(control_).substr(2);
    if (!is_valid_close_code(code)) {
      fail(close_code::kProtocolError, "close frame with an invalid status code", events, output);
      return false;
    }
    if (!is_valid_utf8(reason)) {
      fail(close_code::kInvalidPayload, "close reason is not UTF-8", events, output);
      return false;
    }
  }
  // The reply echoes the peer's code (RFC 6455 5.5.1), unless we had already sent our close.
  if (state_ == State::kOpen) send(Opcode::kClose, close_payload(code, {}), output);
  state_ = State::kClosed;
  close_received_ = true;
  events.push_back({Event::Type::kClose, code, std::string(reason)});
  return false;
}

void Session::fail(uint16_t code, const char* why, std::vector<Event>& events,
                   std::string& output) {
  if (state_ == State::kOpen) send(Opcode::kClose, close_payload(code, why), output);
  state_ = State::kClosed;
  events.push_back({Event::Type::kError, code, why});
}

void Session::send(Opcode opcode, std::string_view payload, std::string& output, uint8_t rsv) {
  if (role_ == Role::kServer) return write_frame(output, opcode, payload, true, rsv);
  // RFC 6455 10.3: a client's masks must be unpredictable to the page that drives it.
  std::array<uint8_t, 4> mask{};
  RAND_bytes(mask.data(), static_cast<int>(mask.size()));
  write_masked_frame(output, opcode, payload, mask, true, rsv);
}

void Session::send_message(Opcode opcode, std::string_view payload, std::string& output) {
  if (state_ != State::kOpen) return;
  // An empty message is never compressed: after a flush zlib has nothing to add for it.
  if (deflater_ && !payload.empty() && payload.size() >= min_compress_bytes_) {
    std::string compressed;
    if (deflater_->compress(payload, &compressed)) return send(opcode, compressed, output, kRsv1);
  }
  send(opcode, payload, output);
}

void Session::send_text(std::string_view text, std::string& output) {
  send_message(Opcode::kText, text, output);
}

void Session::send_binary(std::string_view data, std::string& output) {
  send_message(Opcode::kBinary, data, output);
}

void Session::send_ping(std::string_view payload, std::string& output) {
  if (state_ == State::kOpen) send(Opcode::kPing, payload.substr(0, 125), output);
}

void Session::close(uint16_t code, std::string_view reason, std::string& output) {
  if (state_ != State::kOpen) return;
  send(Opcode::kClose, close_payload(code, reason), output);
  state_ = State::kClosing;
}

}  // namespace peregrine::websocket
