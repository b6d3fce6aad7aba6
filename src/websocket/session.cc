#include "websocket/session.h"

#include <openssl/rand.h>

namespace peregrine::websocket {

void Session::receive(std::string_view bytes, std::vector<Event>& events, std::string& output) {
  while (state_ != State::kClosed) {
    std::string* payload = current_is_control_ ? &control_ : &message_;
    const FrameParser::Result r = parser_.parse(bytes, payload);
    bytes.remove_prefix(r.consumed);
    // Text is validated as it arrives, so that a bad byte fails the connection at once (not
    // when the last fragment comes, which may be never).
    if (!current_is_control_ && in_message_ && message_opcode_ == Opcode::kText &&
        validated_ < message_.size()) {
      const bool valid = utf8_.feed(std::string_view(message_).substr(validated_));
      validated_ = message_.size();
      if (!valid)
        return fail(close_code::kInvalidPayload, "text message is not UTF-8", events, output);
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
  if (message_opcode_ == Opcode::kText && !utf8_.complete()) {
    fail(close_code::kInvalidPayload, "text message ends inside a UTF-8 character", events, output);
    return false;
  }
  in_message_ = false;
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

void Session::send(Opcode opcode, std::string_view payload, std::string& output) {
  if (role_ == Role::kServer) return write_frame(output, opcode, payload);
  // RFC 6455 10.3: a client's masks must be unpredictable to the page that drives it.
  std::array<uint8_t, 4> mask{};
  RAND_bytes(mask.data(), static_cast<int>(mask.size()));
  write_masked_frame(output, opcode, payload, mask);
}

void Session::send_text(std::string_view text, std::string& output) {
  if (state_ == State::kOpen) send(Opcode::kText, text, output);
}

void Session::send_binary(std::string_view data, std::string& output) {
  if (state_ == State::kOpen) send(Opcode::kBinary, data, output);
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
