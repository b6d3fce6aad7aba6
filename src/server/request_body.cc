#include "server/request_body.h"

#include <algorithm>

namespace peregrine::server {

void RequestBody::start(const Request& request, uint64_t limit) {
  chunks_.reset();
  chunked_ = request.chunked;
  remaining_ = request.chunked || request.content_length < 0
                   ? 0
                   : static_cast<uint64_t>(request.content_length);
  received_ = 0;
  limit_ = limit;
  done_ = !request.has_body();
}

RequestBody::Piece RequestBody::next(std::string_view input) {
  Piece piece;
  if (done_) return piece;
  if (chunked_) {
    http1::ChunkedDecoder::Result r = chunks_.decode(input);
    piece.consumed = r.consumed;
    if (r.status == http1::ChunkedDecoder::Status::kError) {
      piece.error = 400;
      return piece;
    }
    piece.data = r.data;
    piece.last = r.status == http1::ChunkedDecoder::Status::kDone;
  } else {
    size_t take = static_cast<size_t>(std::min<uint64_t>(input.size(), remaining_));
    piece.consumed = take;
    piece.data = input.substr(0, take);
    remaining_ -= take;
    piece.last = remaining_ == 0;
  }
  received_ += piece.data.size();
  // Only a chunked body can get here: a declared length over the limit is refused before the
  // body is read (RouteTable::select).
  if (received_ > limit_) {
    piece.error = 413;
    piece.data = {};
    piece.last = false;
    return piece;
  }
  done_ = piece.last;
  return piece;
}

}  // namespace peregrine::server
