// A small JSON API with a route parameter, on libperegrine's asynchronous handlers:
//
//   GET    /api/items          → {"items": [{"id": 1, "name": "..."}, ...]}
//   GET    /api/items/{id}     → {"id": 1, "name": "..."}            (404 when absent)
//   PUT    /api/items/{id}     body: the item's name (text)   → 201 created / 200 replaced
//   DELETE /api/items/{id}     → 204                                 (404 when absent)
//
// The body of a PUT is read with co_await (it is streamed to the handler, never buffered by the
// server); a name over 1 KiB gets 413. The store is shared by the workers, behind a mutex: that
// is the application's choice, the server itself takes no lock.
//
// Usage: json_api [--listen ADDR] [--workers N]
#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "../common/command_line.h"
#include "peregrine/async.h"
#include "peregrine/server.h"

namespace {

using peregrine::AsyncResponse;
using peregrine::Method;
using peregrine::Request;

constexpr size_t kMaxName = 1024;

struct Store {
  std::mutex mutex;
  std::map<uint64_t, std::string> items;
};

// JSON string literal for arbitrary bytes: quotes, backslashes and control characters escaped.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string item_json(uint64_t id, const std::string& name) {
  return "{\"id\": " + std::to_string(id) + ", \"name\": " + json_string(name) + "}";
}

void reply(AsyncResponse& res, int status, const std::string& json) {
  res.response().set_status(status);
  if (!json.empty()) {
    res.response().set_content_type("application/json");
    res.response().set_body(json + "\n");
  }
  res.respond();
}

void error(AsyncResponse& res, int status, const std::string& message) {
  reply(res, status, "{\"error\": " + json_string(message) + "}");
}

// The {id} of /api/items/{id}: decimal digits only, no sign, no leading zero, fits 64 bits.
std::optional<uint64_t> parse_id(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  uint64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

peregrine::Task handle(const Request& request, AsyncResponse res, Store& store) {
  std::string_view path = request.path;
  constexpr std::string_view kCollection = "/api/items";
  if (path == kCollection || path == "/api/items/") {
    if (request.method != Method::kGet) {
      res.response().add_header("Allow", "GET");
      error(res, 405, "use GET on the collection");
      co_return;
    }
    std::string json = "{\"items\": [";
    {
      std::lock_guard lock(store.mutex);
      bool first = true;
      for (const auto& [id, name] : store.items) {
        json += (first ? "" : ", ") + item_json(id, name);
        first = false;
      }
    }
    reply(res, 200, json + "]}");
    co_return;
  }
  if (!path.starts_with("/api/items/")) {
    error(res, 404, "no such resource");
    co_return;
  }
  std::optional<uint64_t> id = parse_id(path.substr(kCollection.size() + 1));
  if (!id) {
    error(res, 400, "the item id must be a positive decimal number");
    co_return;
  }
  switch (request.method) {
    case Method::kGet:
    case Method::kHead: {
      std::string json;
      {
        std::lock_guard lock(store.mutex);
        auto it = store.items.find(*id);
        if (it != store.items.end()) json = item_json(it->first, it->second);
      }
      if (json.empty())
        error(res, 404, "no item " + std::to_string(*id));
      else
        reply(res, 200, json);
      co_return;
    }
    case Method::kPut: {
      std::string name;
      for (;;) {
        peregrine::BodyPiece piece = co_await res.read();
        if (piece.cancelled) co_return;  // the client left
        if (name.size() + piece.bytes.size() > kMaxName) {
          error(res, 413, "a name is at most 1024 bytes");
          co_return;
        }
        name.append(piece.bytes);
        if (piece.last) break;
      }
      if (name.empty()) {
        error(res, 400, "the body (the item's name) is empty");
        co_return;
      }
      bool created;
      {
        std::lock_guard lock(store.mutex);
        created = store.items.insert_or_assign(*id, name).second;
      }
      reply(res, created ? 201 : 200, item_json(*id, name));
      co_return;
    }
    case Method::kDelete: {
      size_t erased;
      {
        std::lock_guard lock(store.mutex);
        erased = store.items.erase(*id);
      }
      if (erased)
        reply(res, 204, "");
      else
        error(res, 404, "no item " + std::to_string(*id));
      co_return;
    }
    default:
      res.response().add_header("Allow", "GET, HEAD, PUT, DELETE");
      error(res, 405, "use GET, PUT or DELETE on an item");
      co_return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  peregrine::Server server;
  examples::apply_command_line(server, argc, argv);
  static Store store;  // outlives every coroutine: they hold a reference to it
  server.route_async("/api/", [](const Request& request, AsyncResponse res) {
    handle(request, std::move(res), store);
  });
  return server.run();
}
