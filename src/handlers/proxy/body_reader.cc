#include "handlers/proxy/body_reader.h"

namespace peregrine::proxy {

BodyReader::Event BodyReader::next(std::string_view& input, std::string_view& data) {
  switch (framing_) {
    case http1::BodyFraming::kNone:
      return Event::kEnd;
    case http1::BodyFraming::kLength: {
      if (remaining_ == 0) return Event::kEnd;
      if (input.empty()) return Event::kNeedMore;
      const size_t take = input.size() < remaining_ ? input.size() : remaining_;
      data = input.substr(0, take);
      input.remove_prefix(take);
      remaining_ -= take;
      return Event::kData;
    }
    case http1::BodyFraming::kChunked:
      for (;;) {
        http1::ChunkedDecoder::Result r = chunked_.decode(input);
        input.remove_prefix(r.consumed);
        switch (r.status) {
          case http1::ChunkedDecoder::Status::kData:
            if (r.data.empty()) continue;
            data = r.data;
            return Event::kData;
          case http1::ChunkedDecoder::Status::kDone:
            return Event::kEnd;
          case http1::ChunkedDecoder::Status::kNeedMore:
            return Event::kNeedMore;
          case http1::ChunkedDecoder::Status::kError:
            return Event::kError;
        }
      }
    case http1::BodyFraming::kClose:
      if (input.empty()) return Event::kNeedMore;
      data = input;
      input = {};
      return Event::kData;
  }
  return Event::kError;
}

}  // namespace peregrine::proxy
