#include "lockstep/io/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lockstep/io/atomic_file.hpp"
#include "lockstep/io/escape.hpp"

namespace lockstep::io {
namespace {

struct DTypeEntry {
  DType d;
  const char* name;
  std::size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

constexpr std::uint64_t kMaxHeader = 100'000'000;  // the reference implementation's limit

}  // namespace

const char* dtype_name(DType d) {
  for (const auto& e : kDTypes)
    if (e.d == d) return e.name;
  return "?";
}

std::size_t dtype_size(DType d) {
  for (const auto& e : kDTypes)
    if (e.d == d) return e.size;
  return 0;
}

DType dtype_from_name(const std::string& s) {
  for (const auto& e : kDTypes)
    if (s == e.name) return e.d;
  throw std::runtime_error("unknown safetensors dtype '" + s + "'");
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

TensorRef TensorRef::f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> v) {
  return TensorRef{std::move(name), DType::F32, std::move(shape),
                   {reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(float)}};
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::uint8_t> bytes, const std::string& what) {
  auto fail = [&](const std::string& msg) -> void {
    throw std::runtime_error(escape_bytes(fmt::format("{}: {}", what, msg)));  // names may hold any byte
  };
  SafetensorsFile f;
  f.what_ = what;
  f.file_ = std::move(bytes);
  const auto& b = f.file_;
  if (b.size() < 8) fail(fmt::format("file of {} bytes is too short for the 8-byte header length", b.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[static_cast<std::size_t>(i)];
  if (n > kMaxHeader) fail(fmt::format("header length {} exceeds the 100 MB limit", n));
  if (n > b.size() - 8) fail(fmt::format("header length {} runs past the end of the {}-byte file", n, b.size()));
  if (n == 0 || b[8] != '{') fail("header does not start with '{'");
  f.data_start_ = 8 + static_cast<std::size_t>(n);
  const std::uint64_t data_size = b.size() - f.data_start_;

  nlohmann::json h;
  try {
    h = nlohmann::json::parse(b.begin() + 8, b.begin() + static_cast<std::ptrdiff_t>(f.data_start_));
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) fail("header is not a JSON object");

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail(fmt::format("__metadata__ value of '{}' is not a string", m.key()));
        f.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      fail(fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    TensorInfo t;
    t.name = name;
    if (!v["dtype"].is_string()) fail(fmt::format("tensor '{}': dtype is not a string", name));
    try {
      t.dtype = dtype_from_name(v["dtype"].get<std::string>());
    } catch (const std::runtime_error& e) {
      fail(fmt::format("tensor '{}': {}", name, e.what()));
    }
    if (!v["shape"].is_array()) fail(fmt::format("tensor '{}': shape is not an array", name));
    std::uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(fmt::format("tensor '{}': shape has a non-integer or negative entry", name));
      const auto dim = d.get<std::uint64_t>();
      if (dim != 0 && numel > data_size / dim) fail(fmt::format("tensor '{}': shape is larger than the file", name));
      numel *= dim;
      t.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(fmt::format("tensor '{}': data_offsets is not [begin, end]", name));
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      fail(fmt::format("tensor '{}': data_offsets [{}, {}] outside the {}-byte data buffer", name, t.begin, t.end,
                       data_size));
    if (t.end - t.begin != numel * dtype_size(t.dtype))
      fail(fmt::format("tensor '{}': {} bytes for {} elements of {}", name, t.end - t.begin, numel,
                       dtype_name(t.dtype)));
    f.tensors_.push_back(std::move(t));
  }
  // The data buffer must be covered exactly: no overlaps, no holes.
  std::vector<const TensorInfo*> order;
  for (const auto& t : f.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* c) { return a->begin < c->begin || (a->begin == c->begin && a->end < c->end); });
  std::uint64_t at = 0;
  for (const auto* t : order) {
    if (t->begin != at)
      fail(fmt::format("tensor '{}' starts at byte {} of the data buffer where {} was expected (overlap or hole)",
                       t->name, t->begin, at));
    at = t->end;
  }
  if (at != data_size) fail(fmt::format("data buffer has {} bytes but tensors cover {}", data_size, at));
  return f;
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(std::move(bytes), path);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) throw std::runtime_error(escape_bytes(fmt::format("{}: no tensor named '{}'", what_, name)));
  return {file_.data() + data_start_ + t->begin, static_cast<std::size_t>(t->end - t->begin)};
}

std::vector<float> SafetensorsFile::f32(const std::string& name, const std::vector<std::int64_t>* expect_shape) const {
  const TensorInfo* t = find(name);
  if (!t) throw std::runtime_error(escape_bytes(fmt::format("{}: no tensor named '{}'", what_, name)));
  if (t->dtype != DType::F32)
    throw std::runtime_error(fmt::format("{}: tensor '{}' is {}, expected F32", what_, name, dtype_name(t->dtype)));
  if (expect_shape && *expect_shape != t->shape)
    throw std::runtime_error(fmt::format("{}: tensor '{}' has shape [{}], expected [{}]", what_, name,
                                         fmt::join(t->shape, ", "), fmt::join(*expect_shape, ", ")));
  const auto b = bytes(name);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<std::uint8_t> serialize_safetensors(const std::vector<TensorRef>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const auto& t : tensors) {
    std::uint64_t numel = 1;
    for (auto d : t.shape) {
      if (d < 0) throw std::invalid_argument(fmt::format("tensor '{}': negative dimension", t.name));
      numel *= static_cast<std::uint64_t>(d);
    }
    if (numel * dtype_size(t.dtype) != t.bytes.size())
      throw std::invalid_argument(fmt::format("tensor '{}': {} bytes given for {} elements of {}", t.name,
                                              t.bytes.size(), numel, dtype_name(t.dtype)));
    if (h.contains(t.name)) throw std::invalid_argument(fmt::format("tensor '{}' given twice", t.name));
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes.size()}}};
    at += t.bytes.size();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // align the data buffer to 8 bytes
  std::vector<std::uint8_t> out;
  out.reserve(8 + header.size() + at);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(std::uint64_t{header.size()} >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto bytes = serialize_safetensors(tensors, metadata);
  write_file_atomic(path, bytes);
}

}  // namespace lockstep::io
