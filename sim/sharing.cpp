#include "sim/sharing.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

namespace placelab::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t hash_channels(std::span<const int32_t> ch) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the channel indices
  for (int32_t c : ch) h = (h ^ static_cast<uint32_t>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

void SharedNetwork::init(int32_t devices, std::span<const int32_t> route_off, std::span<const int32_t> route_ch,
                         std::span<const double> bandwidth, size_t max_flows) {
  devices_ = devices;
  pair_classes_ = devices * devices;
  class_off_.assign(route_off.begin(), route_off.end());
  class_ch_.assign(route_ch.begin(), route_ch.end());
  for (int32_t cls = 0; cls < pair_classes_; ++cls)  // ascending, as unions are kept
    std::sort(class_ch_.begin() + class_off_[cls], class_ch_.begin() + class_off_[cls + 1]);
  class_hash_.assign(pair_classes_, 0);
  bandwidth_.assign(bandwidth.begin(), bandwidth.end());
  const size_t C = bandwidth.size();
  busy_since_s_.assign(C, 0.0);
  channel_mark_.assign(C, 0);
  fill_count_.assign(C, 0);
  fill_list_.assign(C, 0);
  fill_cap_.assign(C, 0);
  share_.assign(C, 0);
  fill_bits_.assign((C + 63) / 64, 0);
  crossing_.assign(C, {});
  flows_.reserve(max_flows);
  flow_dest_.reserve(max_flows);
  pending_.reserve(max_flows);
  ended_.reserve(max_flows);
  clear();
}

void SharedNetwork::clear() {
  classes_ = pair_classes_;
  class_off_.resize(pair_classes_ + 1);
  class_ch_.resize(class_off_.back());
  class_hash_.resize(pair_classes_);
  std::fill(union_table_.begin(), union_table_.end(), -1);
  if (members_.size() < static_cast<size_t>(classes_)) members_.resize(classes_);
  for (auto& m : members_) m.clear();
  rate_.assign(members_.size(), 0.0);
  clock_.assign(members_.size(), 0.0);
  clock_s_.assign(members_.size(), 0.0);
  end_s_.assign(members_.size(), kInf);
  frozen_.assign(members_.size(), 0);
  class_mark_.assign(members_.size(), 0);
  active_.clear();
  pending_.clear();
  flows_.clear();
  flow_dest_.clear();
  for (auto& list : crossing_) list.clear();
  next_s_ = kInf;
}

// A transfer to one device crosses its pair's route; one to several, the union of their routes, which is
// looked up (or added) by its sorted channels.
int32_t SharedNetwork::class_of(int32_t src, std::span<const int32_t> dests) {
  if (dests.size() == 1) return src * devices_ + dests[0];
  union_.clear();
  new_mark();
  for (int32_t e : dests)
    for (int32_t c : channels(src * devices_ + e))
      if (channel_mark_[c] != mark_) channel_mark_[c] = mark_, union_.push_back(c);
  std::sort(union_.begin(), union_.end());
  const uint64_t h = hash_channels(union_);
  if (union_table_.size() < 2 * static_cast<size_t>(classes_ - pair_classes_ + 1)) {  // keep it half empty
    union_table_.assign(std::max<size_t>(16, 4 * union_table_.size()), -1);
    for (int32_t cls = pair_classes_; cls < classes_; ++cls) {
      size_t i = class_hash_[cls] & (union_table_.size() - 1);
      while (union_table_[i] >= 0) i = (i + 1) & (union_table_.size() - 1);
      union_table_[i] = cls;
    }
  }
  size_t i = h & (union_table_.size() - 1);
  for (; union_table_[i] >= 0; i = (i + 1) & (union_table_.size() - 1)) {
    const int32_t cls = union_table_[i];
    if (class_hash_[cls] == h && std::ranges::equal(channels(cls), union_)) return cls;
  }
  const int32_t cls = classes_++;
  union_table_[i] = cls;
  class_ch_.insert(class_ch_.end(), union_.begin(), union_.end());
  class_off_.push_back(static_cast<int32_t>(class_ch_.size()));
  class_hash_.push_back(h);
  if (members_.size() < static_cast<size_t>(classes_)) {
    members_.emplace_back();
    rate_.push_back(0);
    clock_.push_back(0);
    clock_s_.push_back(0);
    end_s_.push_back(kInf);
    frozen_.push_back(0);
    class_mark_.push_back(0);
  }
  members_[cls].clear();
  rate_[cls] = clock_[cls] = clock_s_[cls] = 0;
  return cls;
}

std::span<const int32_t> SharedNetwork::add(int32_t producer, int32_t src, std::span<const int32_t> dests,
                                            double bytes, double stream_bytes, double t, double latency) {
  const int32_t cls = class_of(src, dests);
  const auto f = static_cast<int32_t>(flows_.size());
  flows_.push_back(Flow{producer, src, static_cast<int32_t>(flow_dest_.size()), static_cast<int32_t>(dests.size()),
                        cls, bytes, t});
  flow_dest_.insert(flow_dest_.end(), dests.begin(), dests.end());
  pending_.push_back(Pending{t + latency, stream_bytes, f});
  std::push_heap(pending_.begin(), pending_.end(), std::greater<>());
  next_s_ = std::min(next_s_, t + latency);
  return channels(cls);
}

// A fresh value for the channel and class marks (nothing is marked with it yet).
void SharedNetwork::new_mark() {
  if (++mark_ != 0) return;
  std::fill(channel_mark_.begin(), channel_mark_.end(), 0);
  std::fill(class_mark_.begin(), class_mark_.end(), 0);
  mark_ = 1;
}

// When the streaming transfer of class `cls` that ends at clock `until` ends, at the class's rate.
double SharedNetwork::finish_s(int32_t cls, double until) const {
  return rate_[cls] > 0 ? clock_s_[cls] + std::max(0.0, until - clock_[cls]) / rate_[cls] : kInf;
}

// Brings the clock of `cls` to time t; clocks move only when their class changes, not at every event.
void SharedNetwork::advance(int32_t cls, double t) {
  clock_[cls] += rate_[cls] * (t - clock_s_[cls]);
  clock_s_[cls] = t;
}

std::span<const int32_t> SharedNetwork::step(double t, std::span<double> chan_busy_s) {
  ended_.clear();
  touched_.clear();
  // Transfers whose last byte arrives by t (the first of a class by the time that set this event).
  for (int32_t cls : active_) {
    if (!(end_s_[cls] <= t)) continue;
    std::vector<Member>& heap = members_[cls];
    do {
      ended_.push_back(heap.front().flow);
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      heap.pop_back();
    } while (!heap.empty() && finish_s(cls, heap.front().until) <= t);
    touched_.push_back(cls);
  }
  std::erase_if(active_, [&](int32_t cls) {
    if (!members_[cls].empty()) return false;
    advance(cls, t);
    rate_[cls] = 0;  // its clock stops until a transfer streams again
    for (int32_t c : channels(cls)) {
      std::erase(crossing_[c], cls);
      if (crossing_[c].empty()) chan_busy_s[c] += t - busy_since_s_[c];
    }
    return true;
  });
  // Transfers whose latency is paid start streaming (one that streams nothing ends now).
  while (!pending_.empty() && pending_.front().active_s <= t) {
    const Pending p = pending_.front();
    std::pop_heap(pending_.begin(), pending_.end(), std::greater<>());
    pending_.pop_back();
    if (!(p.bytes > 0)) {
      ended_.push_back(p.flow);
      continue;
    }
    const int32_t cls = flows_[p.flow].cls;
    std::vector<Member>& heap = members_[cls];
    if (heap.empty()) {
      active_.insert(std::ranges::lower_bound(active_, cls), cls);
      for (int32_t c : channels(cls)) {
        if (crossing_[c].empty()) busy_since_s_[c] = t;
        crossing_[c].insert(std::ranges::lower_bound(crossing_[c], cls), cls);
      }
    }
    advance(cls, t);
    heap.push_back(Member{clock_[cls] + p.bytes, p.flow});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
    touched_.push_back(cls);
  }
  reschedule(t);
  return ended_;
}

// Max-min fair rates by progressive filling: the channel with the least bandwidth per streaming
// transfer (the lowest index among equals) fixes the rate of the classes crossing it, their share is
// taken off their other channels, and so on until every class has its rate. Only the classes linked
// through shared channels to one whose transfers changed can get new rates, and progressive filling
// over such a closed group does exactly what it would do over all classes, so only that group is redone.
void SharedNetwork::reschedule(double t) {
  group_.clear();
  new_mark();
  auto reach = [&](int32_t cls) {  // adds the classes sharing a channel with cls; each channel once
    for (int32_t c : channels(cls)) {
      if (channel_mark_[c] == mark_) continue;
      channel_mark_[c] = mark_;
      for (int32_t k : crossing_[c])
        if (class_mark_[k] != mark_) class_mark_[k] = mark_, group_.push_back(k);
    }
  };
  std::sort(touched_.begin(), touched_.end());  // a class is touched once per transfer
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  for (int32_t cls : touched_) reach(cls);  // a class that stopped streaming links its former neighbours
  for (size_t i = 0; i < group_.size() && group_.size() < active_.size(); ++i) reach(group_[i]);
  if (group_.size() == active_.size()) group_ = active_;  // all of them (often, when few links carry much)
  else std::sort(group_.begin(), group_.end());

  for (int32_t cls : group_) {
    advance(cls, t);  // at the old rate
    frozen_[cls] = 0;
    for (int32_t c : channels(cls)) {
      if (fill_count_[c] == 0) fill_bits_[c >> 6] |= uint64_t{1} << (c & 63);
      fill_count_[c] += static_cast<int32_t>(members_[cls].size());
    }
  }
  int32_t* filling = fill_list_.data();
  int32_t num_filling = 0;
  for (size_t w = 0; w < fill_bits_.size(); ++w)  // ascending channels
    for (; fill_bits_[w] != 0; fill_bits_[w] &= fill_bits_[w] - 1) {
      const auto c = static_cast<int32_t>(64 * w + std::countr_zero(fill_bits_[w]));
      filling[num_filling++] = c;
      fill_cap_[c] = bandwidth_[c];
      share_[c] = fill_cap_[c] / fill_count_[c];
    }
  auto unfrozen = static_cast<int32_t>(group_.size());
  while (unfrozen > 0) {
    int32_t bottleneck = -1, kept = 0;
    double share = kInf;
    for (int32_t i = 0; i < num_filling; ++i) {
      const int32_t c = filling[i];
      if (fill_count_[c] == 0) continue;
      filling[kept++] = c;
      if (share_[c] < share) share = share_[c], bottleneck = c;
    }
    num_filling = kept;
    for (int32_t cls : crossing_[bottleneck]) {
      if (frozen_[cls]) continue;
      frozen_[cls] = 1;
      rate_[cls] = share;
      --unfrozen;
      const auto streaming = static_cast<int32_t>(members_[cls].size());
      for (int32_t c : channels(cls)) {
        fill_cap_[c] = std::max(0.0, fill_cap_[c] - share * streaming);
        fill_count_[c] -= streaming;
        share_[c] = fill_count_[c] > 0 ? fill_cap_[c] / fill_count_[c] : kInf;
      }
    }
  }
  for (int32_t cls : group_) end_s_[cls] = finish_s(cls, members_[cls].front().until);
  next_s_ = pending_.empty() ? kInf : pending_.front().active_s;
  for (int32_t cls : active_) next_s_ = std::min(next_s_, end_s_[cls]);
}

}  // namespace placelab::sim
