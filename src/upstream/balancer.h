// Upstream groups for the reverse proxy: servers with weights, backup servers, passive health, and
// the balancing strategies (smooth weighted round robin, least connections, client-IP hash,
// consistent hash of a key). Pure, per-worker code: no threads, no atomics, no clock calls (the
// caller passes the current time in milliseconds, e.g. from core/clock.h).
//
// Typical use by a proxy handler, per request:
//
//   TriedSet tried(upstream.size());
//   PickContext ctx{now_ms, client_ip, hash_key};
//   for (int attempt = 0; attempt < max_tries; ++attempt) {
//     std::optional<size_t> i = upstream.pick_excluding(ctx, tried);
//     if (!i) break;                          // nothing left: 502 (or the last error)
//     tried.insert(*i);
//     upstream.group().on_connect(*i);        // least-connections bookkeeping
//     ... talk to upstream.group().spec(*i).address ...
//     upstream.group().on_release(*i);
//     ok ? upstream.group().report_success(*i) : upstream.group().report_failure(*i, now_ms);
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace peregrine::upstream {

// 64-bit hash used by the hash strategies: FNV-1a over the bytes, then a 64-bit finalizer
// (xor-shift-multiply) so that nearby inputs spread over the whole range. Stable across runs and
// platforms: the same key maps to the same server in every worker and after a restart.
uint64_t hash64(std::string_view bytes);

struct ServerSpec {
  std::string address;  // "host:port" or "unix:/path"; opaque to this file (hashed for the ring)
  int weight = 1;       // >= 1 (values below 1 are treated as 1)
  bool backup = false;  // used only when no primary server is up
  int max_fails = 1;    // failures within fail_timeout_ms that take the server down; 0 = never
  int64_t fail_timeout_ms = 10'000;  // the counting window and how long the server stays down
};

// Health and load of every server of a group. Index = position in the ServerSpec vector.
class Group {
 public:
  explicit Group(std::vector<ServerSpec> servers);

  size_t size() const { return servers_.size(); }
  const ServerSpec& spec(size_t i) const { return servers_[i]; }

  // Up = not marked down by an active probe, not inside a passive down period and not taken
  // out by an operator.
  bool is_up(size_t i, int64_t now_ms) const;

  // Passive health. A failure starts a counting window of fail_timeout_ms (if none is open);
  // max_fails failures inside it mark the server down until now + fail_timeout_ms, after which it
  // is up again with a fresh count. Returns true when this failure took the server down (log it).
  bool report_failure(size_t i, int64_t now_ms);
  // A successful exchange clears the failure count (it does not end a down period).
  void report_success(size_t i);
  int64_t down_until(size_t i) const { return state_[i].down_until; }
  int fails(size_t i) const { return state_[i].fails; }

  // Active health (probes, admin): a server marked down stays down until marked up again.
  void set_probe_up(size_t i, bool up) { state_[i].probe_down = !up; }
  bool probe_up(size_t i) const { return !state_[i].probe_down; }
  // An operator took the server out (admin drain or disable): no new requests until put back.
  void set_operator_out(size_t i, bool out) { state_[i].operator_out = out; }

  // Connections currently in use to the server (least connections). on_release never goes below 0.
  void on_connect(size_t i) { ++state_[i].active; }
  void on_release(size_t i) {
    if (state_[i].active > 0) --state_[i].active;
  }
  int active(size_t i) const { return state_[i].active; }

 private:
  struct State {
    int fails = 0;
    int64_t window_start = 0;
    int64_t down_until = INT64_MIN;
    bool probe_down = false;
    bool operator_out = false;
    int active = 0;
  };
  std::vector<ServerSpec> servers_;
  std::vector<State> state_;
};

// The servers a retry must not pick again. Sized for the group; cheap to clear per request.
class TriedSet {
 public:
  TriedSet() = default;
  explicit TriedSet(size_t servers) {
    if (servers > 64) more_.assign((servers - 1) / 64, 0);
  }
  void insert(size_t i);
  bool contains(size_t i) const {
    if (i < 64) return (first_ >> i & 1) != 0;
    return (i - 64) / 64 < more_.size() && (more_[(i - 64) / 64] >> (i % 64) & 1) != 0;
  }
  size_t count() const;
  void clear();

 private:
  // Servers 0..63 inline: a set is copied for every pick, and groups rarely have more.
  uint64_t first_ = 0;
  std::vector<uint64_t> more_;  // servers 64 and up
};

struct PickContext {
  int64_t now_ms = 0;
  std::string_view client_ip;  // textual IPv4 or IPv6 address, no brackets/port (kIpHash)
  std::string_view hash_key;   // any bytes: URI, header or cookie value (kConsistentHash)
  // A server the request belongs to (AJP's sticky session route), taken before the strategy
  // when it is up, untried and has a free slot; -1: none.
  int64_t preferred = -1;
};

enum class Strategy { kRoundRobin, kLeastConnections, kIpHash, kConsistentHash };

// One balancing strategy. `candidates` holds the indices (ascending, never empty) of the servers
// that may be chosen now: all of one tier (primary or backup), up, and not yet tried. `tier` is
// every index of that tier (ascending), up or not: hash strategies map a key onto the whole tier
// first and then skip unusable servers deterministically, so the mapping of a key stays put while
// its server is up. Returns an element of `candidates`.
class Balancer {
 public:
  virtual ~Balancer() = default;
  virtual size_t choose(const Group& group, std::span<const size_t> tier,
                        std::span<const size_t> candidates, const PickContext& context) = 0;
};

std::unique_ptr<Balancer> make_balancer(Strategy strategy, const Group& group);

// The key the client-IP hash uses: the first three octets of an IPv4 address (a /24; IPv4-mapped
// IPv6 counts as IPv4), the first eight bytes of an IPv6 address (a /64), else the text itself.
std::string ip_hash_key(std::string_view client_ip);

// A group and its strategy: what a proxy handler holds per worker.
class Upstream {
 public:
  Upstream(std::vector<ServerSpec> servers, Strategy strategy);

  size_t size() const { return group_.size(); }
  Group& group() { return group_; }
  const Group& group() const { return group_; }

  // The server for a new request, or nullopt when no server is up (answer 502). Primaries first;
  // backup servers only when no primary is up.
  std::optional<size_t> pick(const PickContext& context);
  // The same, skipping servers already tried for this request (retries). When every up primary
  // has been tried, up backups are offered; nullopt when nothing is left.
  std::optional<size_t> pick_excluding(const PickContext& context, const TriedSet& tried);

 private:
  Group group_;
  std::vector<size_t> primaries_;
  std::vector<size_t> backups_;
  std::unique_ptr<Balancer> balancer_;
  std::vector<size_t> scratch_;
};

}  // namespace peregrine::upstream
