#include "lockstep/dist/replica.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/num/hash.hpp"
#include "lockstep/util/parallel.hpp"
#include "lockstep/version.hpp"

#ifdef LOCKSTEP_HAVE_CUDA
#include "lockstep/backend/cuda/device.hpp"
#endif

namespace lockstep::dist {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Host staging of a device table's tensors (a CUDA replica under MPI): the
// bits are copied, never converted.
void to_host(float* dst, const model::TensorView& t, bool on_device) {
  if (!on_device) {
    std::memcpy(dst, t.data, t.n * sizeof(float));
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  cuda::copy_to_host(dst, t.data, t.n * sizeof(float));
#else
  throw std::logic_error("replica: a device table in a build without CUDA");
#endif
}
void from_host(const model::TensorView& t, const float* src, bool on_device) {
  if (!on_device) {
    std::memcpy(t.data, src, t.n * sizeof(float));
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  cuda::copy_to_device(t.data, src, t.n * sizeof(float));
#else
  throw std::logic_error("replica: a device table in a build without CUDA");
#endif
}

std::string hex(std::uint64_t h) { return num::hash_hex(h); }

}  // namespace

Replica::Replica(Comm& comm, ReplicaOptions opt) : comm_(comm), opt_(std::move(opt)) {
  const std::vector<std::string> id = gather_strings(comm_, comm_.host_name() + "\n" + opt_.device, opt_.timeout_s,
                                                     "the replicas' handshake");
  for (const std::string& s : id) {
    const auto nl = s.find('\n');
    hosts_.push_back(s.substr(0, nl));
    devices_.push_back(nl == std::string::npos ? "?" : s.substr(nl + 1));
  }
  const int version = NUMERIC_SPEC_VERSION + (opt_.fault.kind == Fault::Kind::version && opt_.fault.rank == rank());
  agree("NUMERIC_SPEC_VERSION", std::to_string(version), std::to_string(version));
}

std::string Replica::where(int r) const {
  const auto i = static_cast<std::size_t>(r);
  return fmt::format("replica {} (host {}, device {})", r, i < hosts_.size() ? hosts_[i] : "?",
                     i < devices_.size() ? devices_[i] : "?");
}

void Replica::agree(const std::string& what, const std::string& value, const std::string& shown) {
  const std::vector<std::string> all = gather_strings(comm_, value + '\0' + shown, opt_.timeout_s,
                                                      "the replicas' handshake (" + what + ")");
  const auto split = [](const std::string& s) {
    const auto z = s.find('\0');
    return std::pair{s.substr(0, z), z == std::string::npos ? s : s.substr(z + 1)};
  };
  const auto [v0, s0] = split(all[0]);
  for (int r = 1; r < world(); ++r) {
    auto [vr, sr] = split(all[static_cast<std::size_t>(r)]);
    if (vr == v0) continue;
    std::string a = sr, b = s0;
    // Settings shown as JSON objects: only the fields that differ.
    const auto ja = nlohmann::json::parse(sr, nullptr, false), jb = nlohmann::json::parse(s0, nullptr, false);
    if (ja.is_object() && jb.is_object()) {
      nlohmann::json da = nlohmann::json::object(), db = nlohmann::json::object();
      for (const auto& [k, x] : ja.items())
        if (!jb.contains(k) || jb[k] != x) da[k] = x;
      for (const auto& [k, x] : jb.items())
        if (!ja.contains(k) || ja[k] != x) db[k] = x;
      a = da.dump();
      b = db.dump();
    }
    throw Refused(fmt::format("{} has {} {}, {} has {} {}: replicas that differ in it refuse to train together",
                              where(r), what, a, where(0), what, b));
  }
}

void Replica::barrier(const std::string& what, double timeout_s) {
  gather_words(comm_, {0}, timeout_s, what);
}

bool Replica::any(bool mine) {
  const std::vector<std::uint64_t> all = gather_words(comm_, {mine ? 1u : 0u}, opt_.timeout_s,
                                                      fmt::format("the replicas' agreement after step {}", step_));
  return std::any_of(all.begin(), all.end(), [](std::uint64_t x) { return x != 0; });
}

void Replica::begin_step(std::int64_t step, std::int64_t accum, const model::TensorTable& weights) {
  if (accum < 1) throw std::invalid_argument("replica: accum must be >= 1");
  if (accum != accum_) gathered_.clear();  // laid out again for the new count
  accum_ = accum;
  step_ = step;
  figures_ = {};
  if (opt_.fault.kind == Fault::Kind::kill && opt_.fault.hits(rank(), step)) {
    std::fflush(nullptr);
    ::raise(SIGKILL);
  }
  // Memory corrupted between two steps (after the last checkpoint, before
  // this step's micro-batches read the weights).
  if (opt_.fault.kind == Fault::Kind::bitflip && opt_.fault.hits(rank(), step)) inject_bitflip(weights);
}

void Replica::size_for(const model::TensorTable& grads) {
  std::size_t p = 0;
  std::vector<std::size_t> off;
  for (const auto& t : grads.tensors) {
    off.push_back(p);
    p += t.n;
  }
  if (!gathered_.empty()) {
    if (p != params_) throw std::logic_error("replica: the gradient table changed size");
    return;
  }
  params_ = p;
  tensor_offset_ = off;
  const auto n = static_cast<std::size_t>(world());
  const auto A = static_cast<std::size_t>(accum_);
  block_offset_.assign(n + 1, 0);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t count = A > r ? (A - r + n - 1) / n : 0;  // micro-batches r, r + n, ...
    block_offset_[r + 1] = block_offset_[r] + count * (params_ + 1);
  }
  gathered_.assign(block_offset_[n], 0.0f);
  if (grads.on_device) staging_.assign(params_, 0.0f);
}

void Replica::keep(std::int64_t a, float loss, const model::TensorTable& grads) {
  const auto t0 = Clock::now();
  size_for(grads);
  const auto n = static_cast<std::size_t>(world());
  const auto ua = static_cast<std::size_t>(a);
  float* slot = gathered_.data() + block_offset_[ua % n] + (ua / n) * (params_ + 1);
  for (std::size_t t = 0; t < grads.tensors.size(); ++t)
    to_host(slot + tensor_offset_[t], grads.tensors[t], grads.on_device);
  slot[params_] = loss;
  figures_.reduce_ms += ms_since(t0);
}

void Replica::reduce(model::TensorTable& grads, std::span<float> losses) {
  const auto t0 = Clock::now();
  size_for(grads);
  const auto n = static_cast<std::size_t>(world());
  const auto A = static_cast<std::size_t>(accum_);
  if (losses.size() != A) throw std::logic_error("replica: the step's accum is not the replica's");
  if (opt_.fault.kind == Fault::Kind::stall && opt_.fault.hits(rank(), step_))
    std::this_thread::sleep_for(std::chrono::duration<double>(opt_.fault.seconds));
  std::vector<int> withhold;
  if (opt_.fault.kind == Fault::Kind::drop && opt_.fault.hits(rank(), step_) && rank() != 0) withhold.push_back(0);

  std::vector<std::size_t> offset(n), bytes(n);
  for (std::size_t r = 0; r < n; ++r) {
    offset[r] = block_offset_[r] * sizeof(float);
    bytes[r] = (block_offset_[r + 1] - block_offset_[r]) * sizeof(float);
  }
  comm_.all_gather(reinterpret_cast<std::byte*>(gathered_.data()), offset, bytes, opt_.timeout_s,
                   fmt::format("{}: waiting for the gradients of step {}", where(rank()), step_), withhold);

  // The canonical sum, micro-batch after micro-batch: g = g_0, g = g + g_a.
  std::vector<const float*> slot(A);
  for (std::size_t a = 0; a < A; ++a) {
    slot[a] = gathered_.data() + block_offset_[a % n] + (a / n) * (params_ + 1);
    losses[a] = slot[a][params_];
  }
  num::Hasher h;
  for (std::size_t t = 0; t < grads.tensors.size(); ++t) {
    const model::TensorView& tv = grads.tensors[t];
    float* dst = grads.on_device ? staging_.data() + tensor_offset_[t] : tv.data;
    const std::size_t o = tensor_offset_[t];
    util::parallel_for(tv.n, opt_.threads, std::size_t{1} << 14, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) {
        float x = slot[0][o + i];
        for (std::size_t a = 1; a < A; ++a) x = x + slot[a][o + i];
        dst[i] = x;
      }
    });
    const std::uint64_t th = num::hash_bits(dst, tv.n);
    h.add_bytes(&th, sizeof th);
    if (grads.on_device) from_host(tv, dst, true);
  }
  reduced_hash_ = h.digest();
  figures_.reduce_ms += ms_since(t0);
}

std::vector<std::uint64_t> Replica::tensor_hashes(const model::TensorTable& t) {
  std::vector<std::uint64_t> out;
  out.reserve(t.tensors.size());
  for (const auto& tv : t.tensors) {
    if (t.on_device) {
      staging_.resize(std::max(staging_.size(), tv.n));
      to_host(staging_.data(), tv, true);
      out.push_back(num::hash_bits(staging_.data(), tv.n));
    } else {
      out.push_back(num::hash_bits(tv.data, tv.n));
    }
  }
  return out;
}

bool Replica::guard(const model::TensorTable& weights, model::StepStages& stages) {
  if (opt_.guard_every <= 0 || (step_ - 1) % opt_.guard_every != 0) return false;
  const auto t0 = Clock::now();
  figures_.guarded = true;
  const std::vector<std::uint64_t> hashes = tensor_hashes(weights);
  const bool self_ok = post_update_.empty() || post_update_ == hashes;
  std::vector<std::uint64_t> mine = hashes;
  mine.push_back(reduced_hash_);
  mine.push_back(self_ok ? 1 : 0);
  const std::size_t T = hashes.size(), W = T + 2;
  const std::vector<std::uint64_t> all =
      gather_words(comm_, mine, opt_.timeout_s, fmt::format("{}: waiting for the weight hashes of step {}", where(rank()), step_));
  const auto n = static_cast<std::size_t>(world());
  // The key a replica is judged by: its weights' tensor hashes and its reduced gradient's.
  const auto key = [&](std::size_t r) {
    return std::vector<std::uint64_t>(all.begin() + static_cast<std::ptrdiff_t>(r * W),
                                      all.begin() + static_cast<std::ptrdiff_t>(r * W + T + 1));
  };
  bool same = true;
  for (std::size_t r = 1; r < n; ++r) same = same && key(r) == key(0);
  if (same) {
    figures_.weights_hash = num::hash_bytes(hashes.data(), hashes.size() * sizeof(std::uint64_t));
    figures_.guard_ms += ms_since(t0);
    return false;
  }

  // Who diverged: the minority, or the replicas whose weights changed since their own update.
  std::map<std::vector<std::uint64_t>, std::vector<int>> groups;
  for (std::size_t r = 0; r < n; ++r) groups[key(r)].push_back(static_cast<int>(r));
  std::vector<int> good, bad;
  std::string how;
  for (const auto& [k, members] : groups)
    if (members.size() * 2 > n && n >= 3) {
      good = members;
      how = fmt::format("{} of {} replicas agree", members.size(), n);
    }
  if (good.empty()) {
    for (std::size_t r = 0; r < n; ++r) (all[r * W + T + 1] ? good : bad).push_back(static_cast<int>(r));
    bool consistent = !good.empty() && !bad.empty();
    for (int g : good) consistent = consistent && key(static_cast<std::size_t>(g)) == key(static_cast<std::size_t>(good[0]));
    if (!consistent) {
      std::string rows;
      for (std::size_t r = 0; r < n; ++r)
        rows += fmt::format("; {}: weights {}, reduced gradient {}, own update {}", where(static_cast<int>(r)),
                            hex(num::hash_bytes(all.data() + r * W, T * sizeof(std::uint64_t))), hex(all[r * W + T]),
                            all[r * W + T + 1] ? "intact" : "changed since");
      throw std::runtime_error(fmt::format(
          "replica guard: step {}: the replicas' weights differ and no replica can be shown healthy (no majority, "
          "and each one's weights are those its update wrote){}: stopping",
          step_, rows));
    }
    how = "its weights are no longer those its last update wrote";
  } else {
    for (std::size_t r = 0; r < n; ++r)
      if (std::find(good.begin(), good.end(), static_cast<int>(r)) == good.end()) bad.push_back(static_cast<int>(r));
  }
  const int source = good[0];
  if (rank() == 0) {
    for (int b : bad) {
      const auto ub = static_cast<std::size_t>(b), us = static_cast<std::size_t>(source);
      std::string first = "the reduced gradient";
      for (std::size_t t = 0; t < T; ++t)
        if (all[ub * W + t] != all[us * W + t]) {
          first = fmt::format("tensor '{}' (hash {}, healthy {})", *weights.tensors[t].name, hex(all[ub * W + t]),
                              hex(all[us * W + t]));
          break;
        }
      std::fprintf(stderr,
                   "replica guard: step %lld: %s diverged (%s); first difference: %s; repairing it with the weights "
                   "and optimizer state of replica %d, then computing the step again\n",
                   static_cast<long long>(step_), where(b).c_str(), how.c_str(), first.c_str(), source);
    }
    std::fflush(stderr);
  }
  repair(bad, source, weights, stages);
  post_update_.clear();
  figures_.repaired = static_cast<int>(bad.size());
  repairs_ += static_cast<std::int64_t>(bad.size());
  figures_.guard_ms += ms_since(t0);
  return true;
}

void Replica::repair(const std::vector<int>& bad, int source, const model::TensorTable& weights,
                     model::StepStages& stages) {
  const bool involved = rank() == source || std::find(bad.begin(), bad.end(), rank()) != bad.end();
  std::vector<std::vector<float>> m, v;
  std::vector<float> buf;
  if (involved) {
    stages.get_moments(m, v);
    std::size_t total = 0;
    for (const auto& t : weights.tensors) total += t.n;
    for (std::size_t i = 0; i < m.size(); ++i) total += m[i].size() + v[i].size();
    buf.resize(total);
    if (rank() == source) {
      std::size_t o = 0;
      for (const auto& t : weights.tensors) {
        to_host(buf.data() + o, t, weights.on_device);
        o += t.n;
      }
      for (std::size_t i = 0; i < m.size(); ++i) {
        std::copy(m[i].begin(), m[i].end(), buf.begin() + static_cast<std::ptrdiff_t>(o));
        o += m[i].size();
        std::copy(v[i].begin(), v[i].end(), buf.begin() + static_cast<std::ptrdiff_t>(o));
        o += v[i].size();
      }
    }
  }
  comm_.send_from(source, bad, reinterpret_cast<std::byte*>(buf.data()), buf.size() * sizeof(float), opt_.timeout_s,
                  fmt::format("{}: the repair of step {} from replica {}", where(rank()), step_, source));
  if (!involved || rank() == source) return;
  std::size_t o = 0;
  for (const auto& t : weights.tensors) {
    from_host(t, buf.data() + o, weights.on_device);
    o += t.n;
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(o), m[i].size(), m[i].begin());
    o += m[i].size();
    std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(o), v[i].size(), v[i].begin());
    o += v[i].size();
  }
  stages.set_moments(m, v);
}

void Replica::inject_bitflip(const model::TensorTable& weights) {
  const auto t = static_cast<std::size_t>(opt_.fault.tensor);
  if (t >= weights.tensors.size()) throw std::invalid_argument("LOCKSTEP_FAULT: tensor= is past the trainable tensors");
  const model::TensorView& tv = weights.tensors[t];
  const auto i = static_cast<std::size_t>(opt_.fault.index);
  if (i >= tv.n) throw std::invalid_argument("LOCKSTEP_FAULT: index= is past the tensor");
  float x = 0;
  const model::TensorView one{tv.name, tv.data + i, 1};
  to_host(&x, one, weights.on_device);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  bits ^= 1u << opt_.fault.bit;
  std::memcpy(&x, &bits, 4);
  from_host(one, &x, weights.on_device);
}

void Replica::after_update(const model::TensorTable& weights) {
  // The self-check (two replicas, or no majority) needs the hashes this
  // update wrote, taken only when the next step is guarded.
  const bool next_guarded = opt_.guard_every > 0 && step_ % opt_.guard_every == 0;
  if (world() == 2 && next_guarded) {
    post_update_ = tensor_hashes(weights);
  } else {
    post_update_.clear();
  }
  // Corrupted right after the update: before a checkpoint of this step is
  // written and verified.
  if (opt_.fault.kind == Fault::Kind::update_bitflip && opt_.fault.hits(rank(), step_)) inject_bitflip(weights);
}

std::string Replica::verify_checkpoint(const std::string& dir, std::uint64_t recorded_weights,
                                       std::uint64_t recorded_optimizer, std::uint64_t own_weights,
                                       std::uint64_t own_optimizer) {
  const std::vector<std::string> d =
      gather_strings(comm_, fmt::format("{} {} {}", recorded_weights, recorded_optimizer, dir), opt_.timeout_s,
                     fmt::format("{}: waiting for the checkpoint of step {}", where(rank()), step_));
  const std::vector<std::uint64_t> own = gather_words(comm_, {own_weights, own_optimizer}, opt_.timeout_s,
                                                      fmt::format("{}: verifying the checkpoint of step {}", where(rank()), step_));
  std::uint64_t w = 0, o = 0;
  std::string written;
  {
    const std::string& s = d[0];
    const auto a = s.find(' '), b = s.find(' ', a + 1);
    w = std::stoull(s.substr(0, a));
    o = std::stoull(s.substr(a + 1, b - a - 1));
    written = s.substr(b + 1);
  }
  std::string wrong;
  for (int r = 0; r < world(); ++r) {
    const auto ur = static_cast<std::size_t>(r);
    if (own[2 * ur] != w || own[2 * ur + 1] != o)
      wrong += fmt::format("; {} holds weights {} and optimizer state {}", where(r), hex(own[2 * ur]),
                           hex(own[2 * ur + 1]));
  }
  if (!wrong.empty())
    throw std::runtime_error(fmt::format("checkpoint {} records weights {} and optimizer state {}{}", written, hex(w),
                                         hex(o), wrong));
  return written;
}

}  // namespace lockstep::dist
