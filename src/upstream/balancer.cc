#include "upstream/balancer.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>

#include "core/hash.h"

namespace peregrine::upstream {

uint64_t hash64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

// ---- Group -------------------------------------------------------------------------------------

Group::Group(std::vector<ServerSpec> servers) : servers_(std::move(servers)) {
  for (ServerSpec& s : servers_) s.weight = std::max(s.weight, 1);
  state_.resize(servers_.size());
}

bool Group::is_up(size_t i, int64_t now_ms) const {
  const State& s = state_[i];
  return !s.probe_down && !s.operator_out && now_ms >= s.down_until;
}

bool Group::report_failure(size_t i, int64_t now_ms) {
  const ServerSpec& spec = servers_[i];
  State& s = state_[i];
  if (spec.max_fails <= 0) return false;
  if (now_ms < s.down_until) return false;  // already down: the period is not extended
  if (s.fails == 0 || now_ms - s.window_start >= spec.fail_timeout_ms) {
    s.fails = 0;
    s.window_start = now_ms;
  }
  if (++s.fails < spec.max_fails) return false;
  s.fails = 0;
  s.down_until = now_ms + spec.fail_timeout_ms;
  return true;
}

void Group::report_success(size_t i) {
  state_[i].fails = 0;
}

// ---- TriedSet ----------------------------------------------------------------------------------

void TriedSet::insert(size_t i) {
  if (i < 64) {
    first_ |= uint64_t{1} << i;
    return;
  }
  const size_t word = (i - 64) / 64;
  if (word >= more_.size()) more_.resize(word + 1, 0);
  more_[word] |= uint64_t{1} << (i % 64);
}

size_t TriedSet::count() const {
  size_t n = static_cast<size_t>(std::popcount(first_));
  for (uint64_t w : more_) n += static_cast<size_t>(std::popcount(w));
  return n;
}

void TriedSet::clear() {
  first_ = 0;
  std::fill(more_.begin(), more_.end(), 0);
}

// ---- strategies --------------------------------------------------------------------------------

namespace {

bool contains_sorted(std::span<const size_t> sorted, size_t i) {
  return std::binary_search(sorted.begin(), sorted.end(), i);
}

// Smooth weighted round robin: every candidate's current weight grows by its weight, the largest
// wins and gives back the total. Over any run of sum(weights) picks with a stable candidate set,
// each server is chosen exactly `weight` times, and heavy servers are interleaved with light ones.
class RoundRobin final : public Balancer {
 public:
  explicit RoundRobin(size_t n) : current_(n, 0) {}
  size_t choose(const Group& group, std::span<const size_t>, std::span<const size_t> candidates,
                const PickContext&) override {
    int64_t total = 0;
    size_t best = candidates[0];
    bool first = true;
    for (size_t i : candidates) {
      int64_t w = group.spec(i).weight;
      current_[i] += w;
      total += w;
      if (first || current_[i] > current_[best]) best = i;
      first = false;
    }
    current_[best] -= total;
    return best;
  }

 private:
  std::vector<int64_t> current_;
};

// Least connections weighted: the smallest active/weight (compared by cross-multiplication); ties
// go round robin, starting after the server chosen last among a tie.
class LeastConnections final : public Balancer {
 public:
  size_t choose(const Group& group, std::span<const size_t>, std::span<const size_t> candidates,
                const PickContext&) override {
    auto less = [&](size_t a, size_t b) {
      return int64_t{group.active(a)} * group.spec(b).weight <
             int64_t{group.active(b)} * group.spec(a).weight;
    };
    size_t best = candidates[0];
    for (size_t i : candidates)
      if (less(i, best)) best = i;
    // Among those tied with best, the first at or after the cursor (wrapping).
    size_t chosen = SIZE_MAX;
    size_t wrapped = SIZE_MAX;
    for (size_t i : candidates) {
      if (less(best, i)) continue;
      if (i >= cursor_) {
        chosen = i;
        break;
      }
      if (wrapped == SIZE_MAX) wrapped = i;
    }
    if (chosen == SIZE_MAX) chosen = wrapped;
    cursor_ = chosen + 1;
    return chosen;
  }

 private:
  size_t cursor_ = 0;
};

// Maps a 64-bit hash onto a tier by weight (cumulative weights), then, while the server found is
// not a candidate, re-hashes a bounded number of times and finally scans forward. The same hash
// and the same set of usable servers always give the same answer.
size_t weighted_slot(const Group& group, std::span<const size_t> tier, uint64_t h) {
  uint64_t total = 0;
  for (size_t i : tier) total += static_cast<uint64_t>(group.spec(i).weight);
  uint64_t point = h % total;
  for (size_t k = 0; k < tier.size(); ++k) {
    uint64_t w = static_cast<uint64_t>(group.spec(tier[k]).weight);
    if (point < w) return k;
    point -= w;
  }
  return tier.size() - 1;
}

size_t hash_choose(const Group& group, std::span<const size_t> tier,
                   std::span<const size_t> candidates, uint64_t h) {
  size_t k = weighted_slot(group, tier, h);
  if (contains_sorted(candidates, tier[k])) return tier[k];
  for (uint64_t attempt = 1; attempt <= 20; ++attempt) {
    k = weighted_slot(group, tier, mix64(h + attempt * 0x9e3779b97f4a7c15ULL));
    if (contains_sorted(candidates, tier[k])) return tier[k];
  }
  for (size_t step = 1; step < tier.size(); ++step) {
    size_t j = tier[(k + step) % tier.size()];
    if (contains_sorted(candidates, j)) return j;
  }
  return candidates[0];
}

class IpHash final : public Balancer {
 public:
  size_t choose(const Group& group, std::span<const size_t> tier,
                std::span<const size_t> candidates, const PickContext& context) override {
    return hash_choose(group, tier, candidates, hash64(ip_hash_key(context.client_ip)));
  }
};

// Consistent hash: each server owns 160 points per unit of weight on a 64-bit ring (one ring per
// tier). A key goes to the first point at or after its hash whose server is a candidate, so taking
// a server out only moves the keys it owned.
class ConsistentHash final : public Balancer {
 public:
  static constexpr int kPointsPerWeight = 160;

  explicit ConsistentHash(const Group& group) {
    for (size_t i = 0; i < group.size(); ++i) {
      Ring& ring = group.spec(i).backup ? backup_ : primary_;
      uint64_t base = hash64(group.spec(i).address);
      int points = kPointsPerWeight * group.spec(i).weight;
      for (int p = 0; p < points; ++p)
        ring.push_back({mix64(base ^ mix64(static_cast<uint64_t>(p) + 1)), i});
    }
    std::sort(primary_.begin(), primary_.end());
    std::sort(backup_.begin(), backup_.end());
  }

  size_t choose(const Group& group, std::span<const size_t> tier,
                std::span<const size_t> candidates, const PickContext& context) override {
    const Ring& ring = group.spec(tier[0]).backup ? backup_ : primary_;
    uint64_t h = hash64(context.hash_key);
    auto it = std::lower_bound(ring.begin(), ring.end(), Point{h, 0});
    size_t start = static_cast<size_t>(it - ring.begin());
    for (size_t step = 0; step < ring.size(); ++step) {
      const Point& p = ring[(start + step) % ring.size()];
      if (contains_sorted(candidates, p.server)) return p.server;
    }
    return candidates[0];
  }

 private:
  struct Point {
    uint64_t hash;
    size_t server;
    bool operator<(const Point& o) const {
      return hash != o.hash ? hash < o.hash : server < o.server;
    }
  };
  using Ring = std::vector<Point>;
  Ring primary_;
  Ring backup_;
};

}  // namespace

std::unique_ptr<Balancer> make_balancer(Strategy strategy, const Group& group) {
  switch (strategy) {
    case Strategy::kRoundRobin:
      return std::make_unique<RoundRobin>(group.size());
    case Strategy::kLeastConnections:
      return std::make_unique<LeastConnections>();
    case Strategy::kIpHash:
      return std::make_unique<IpHash>();
    case Strategy::kConsistentHash:
      return std::make_unique<ConsistentHash>(group);
  }
  return nullptr;
}

std::string ip_hash_key(std::string_view client_ip) {
  std::string text(client_ip);
  unsigned char bytes[16];
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) return std::string(bytes, bytes + 3);
  if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(kMapped, kMapped + 12, bytes)) return std::string(bytes + 12, bytes + 15);
    return std::string(bytes, bytes + 8);
  }
  return text;
}

// ---- Upstream ----------------------------------------------------------------------------------

Upstream::Upstream(std::vector<ServerSpec> servers, Strategy strategy)
    : group_(std::move(servers)) {
  for (size_t i = 0; i < group_.size(); ++i)
    (group_.spec(i).backup ? backups_ : primaries_).push_back(i);
  balancer_ = make_balancer(strategy, group_);
  scratch_.reserve(group_.size());
}

std::optional<size_t> Upstream::pick(const PickContext& context) {
  return pick_excluding(context, TriedSet());
}

std::optional<size_t> Upstream::pick_excluding(const PickContext& context, const TriedSet& tried) {
  for (const std::vector<size_t>* tier : {&primaries_, &backups_}) {
    if (tier->empty()) continue;
    scratch_.clear();
    for (size_t i : *tier) {
      if (!group_.is_up(i, context.now_ms)) continue;
      if (!tried.contains(i)) scratch_.push_back(i);
    }
    if (!scratch_.empty()) return balancer_->choose(group_, *tier, scratch_, context);
    // Backups stand in only when no primary is up or every up primary was already tried.
  }
  return std::nullopt;
}

}  // namespace peregrine::upstream
