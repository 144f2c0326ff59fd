// Gate cases of the linear family (gate.hpp): linear_fwd/bwd and
// bitlinear_fwd/bwd on ragged shapes (rows, in, out off every tile multiple:
// the GEMM tiles are 128 × 128 × 8 and its 16-byte loads need multiples of 4),
// shapes that take the vector-load paths with ragged edges, and one large
// shape; every output compared with cpu::OpKernels by bit pattern.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/gate.hpp"
#include "lockstep/backend/cuda/ops.hpp"

namespace lockstep::cuda::gate {
namespace {

std::vector<float> random_vector(std::size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// First non-empty message of several comparisons.
std::string first_of(std::initializer_list<std::string> diffs) {
  for (const std::string& d : diffs)
    if (!d.empty()) return d;
  return "";
}

cpu::OpKernels cpu_kernels() {
  cpu::OpKernels k;
  k.threads = 0;  // all hardware threads (the bits do not depend on it)
  return k;
}

struct Shape {
  std::size_t rows, in, out;
};

std::string describe(const Shape& s, bool bias) {
  return fmt::format("rows {} in {} out {}{}", s.rows, s.in, s.out, bias ? " bias" : "");
}

std::string linear_fwd_case(const Shape& s, bool bias, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ops::Linear::Config c{s.rows, s.in, s.out, bias};
  const auto x = random_vector(s.rows * s.in, rng), w = random_vector(s.out * s.in, rng),
             b = random_vector(s.out, rng);
  std::vector<float> y(s.rows * s.out);
  auto ck = cpu_kernels();
  ck.linear_fwd(c, x.data(), w.data(), bias ? b.data() : nullptr, y.data());

  DeviceBuffer<float> dx, dw, db, dyb(s.rows * s.out);
  dx.upload(x);
  dw.upload(w);
  db.upload(b);
  OpKernels k;
  k.linear_fwd(c, dx.data(), dw.data(), bias ? db.data() : nullptr, dyb.data());
  return first_difference("y", y, dyb.download(), s.out);
}

std::string linear_bwd_case(const Shape& s, bool bias, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ops::Linear::Config c{s.rows, s.in, s.out, bias};
  const auto x = random_vector(s.rows * s.in, rng), w = random_vector(s.out * s.in, rng),
             dy = random_vector(s.rows * s.out, rng);
  std::vector<float> dx(s.rows * s.in), dw(s.out * s.in), db(s.out);
  auto ck = cpu_kernels();
  ck.linear_bwd(c, x.data(), w.data(), dy.data(), dx.data(), dw.data(), bias ? db.data() : nullptr);

  DeviceBuffer<float> gx, gw, gdy, gdx(dx.size()), gdw(dw.size()), gdb(db.size());
  gx.upload(x);
  gw.upload(w);
  gdy.upload(dy);
  OpKernels k;
  k.linear_bwd(c, gx.data(), gw.data(), gdy.data(), gdx.data(), gdw.data(), bias ? gdb.data() : nullptr);
  return first_of({first_difference("dx", dx, gdx.download(), s.in), first_difference("dw", dw, gdw.download(), s.in),
                   bias ? first_difference("db", db, gdb.download()) : std::string()});
}

std::string compare_aux(const cpu::Aux& a, const Aux& g) {
  const float gs = g.scale();
  if (a.s != gs && !(a.s != a.s && gs != gs)) return fmt::format("aux.s (weight scale): cpu {} vs cuda {}", a.s, gs);
  return first_of({first_difference("aux.a (x̂)", a.a, g.a.download()), first_difference("aux.b (Ŵ)", a.b, g.b.download())});
}

std::string bitlinear_fwd_case(const Shape& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ops::QuantLinearConfig c{s.rows, s.in, s.out};
  // Activations with a spread of magnitudes per row; weights around the scale.
  const auto x = random_vector(s.rows * s.in, rng, -3.0f, 3.0f), w = random_vector(s.out * s.in, rng, -0.1f, 0.1f);
  std::vector<float> y(s.rows * s.out);
  cpu::Aux aux;
  auto ck = cpu_kernels();
  ck.bitlinear_fwd(c, x.data(), w.data(), y.data(), aux);

  DeviceBuffer<float> gx, gw, gy(y.size());
  gx.upload(x);
  gw.upload(w);
  Aux gaux;
  OpKernels k;
  k.bitlinear_fwd(c, gx.data(), gw.data(), gy.data(), gaux);
  return first_of({first_difference("y", y, gy.download(), s.out), compare_aux(aux, gaux)});
}

// kept_aux: the backward uses the forward's aux (the model's way); otherwise
// it starts from an empty aux and recomputes it.
std::string bitlinear_bwd_case(const Shape& s, bool kept_aux, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ops::QuantLinearConfig c{s.rows, s.in, s.out};
  const auto x = random_vector(s.rows * s.in, rng, -3.0f, 3.0f), w = random_vector(s.out * s.in, rng, -0.1f, 0.1f),
             dy = random_vector(s.rows * s.out, rng);
  std::vector<float> y(s.rows * s.out), dx(s.rows * s.in), dw(s.out * s.in);
  cpu::Aux aux;
  auto ck = cpu_kernels();
  if (kept_aux) ck.bitlinear_fwd(c, x.data(), w.data(), y.data(), aux);
  ck.bitlinear_bwd(c, x.data(), w.data(), dy.data(), dx.data(), dw.data(), aux);

  DeviceBuffer<float> gx, gw, gdy, gy(y.size()), gdx(dx.size()), gdw(dw.size());
  gx.upload(x);
  gw.upload(w);
  gdy.upload(dy);
  Aux gaux;
  OpKernels k;
  if (kept_aux) k.bitlinear_fwd(c, gx.data(), gw.data(), gy.data(), gaux);
  k.bitlinear_bwd(c, gx.data(), gw.data(), gdy.data(), gdx.data(), gdw.data(), gaux);
  return first_of({first_difference("dx", dx, gdx.download(), s.in), first_difference("dw", dw, gdw.download(), s.in),
                   compare_aux(aux, gaux)});
}

}  // namespace

std::vector<Case> linear_cases() {
  std::vector<Case> cases;
  // Ragged: every size off the 128-row/column tiles, the 8-deep k tiles and
  // the 4-wide vectors (scalar-load paths), rows 1 and batches of rows.
  std::vector<Shape> linear;
  for (std::size_t rows : {1, 37, 129})
    for (std::size_t in : {1, 65, 257})
      for (std::size_t out : {3, 129, 200}) linear.push_back({rows, in, out});
  // Vector-load paths with ragged edges (in, out multiples of 4 but not of
  // the tiles), and a large shape (several k tiles, full tiles, big grid).
  linear.push_back({37, 256, 200});
  linear.push_back({129, 68, 132});
  linear.push_back({300, 132, 260});
  linear.push_back({512, 768, 2304});
  // The same size class with every extent ragged, k included (772 = 48·16 + 4):
  // the tile rule sends it to the tiled kernels, so their k tails are gated too.
  linear.push_back({516, 772, 2300});
  for (const Shape& s : linear)
    for (bool bias : {false, true}) {
      cases.push_back({"linear_fwd", describe(s, bias),
                       [s, bias](std::uint64_t seed) { return linear_fwd_case(s, bias, seed); }});
      cases.push_back({"linear_bwd", describe(s, bias),
                       [s, bias](std::uint64_t seed) { return linear_bwd_case(s, bias, seed); }});
    }

  std::vector<Shape> quant;
  for (std::size_t rows : {1, 37})
    for (std::size_t in : {65, 257})
      for (std::size_t out : {3, 129}) quant.push_back({rows, in, out});
  quant.push_back({37, 256, 200});
  quant.push_back({512, 768, 2304});  // weight sum over 433 chunks: two levels
  for (const Shape& s : quant) {
    cases.push_back({"bitlinear_fwd", describe(s, false),
                     [s](std::uint64_t seed) { return bitlinear_fwd_case(s, seed); }});
    cases.push_back({"bitlinear_bwd", describe(s, false),
                     [s](std::uint64_t seed) { return bitlinear_bwd_case(s, true, seed); }});
  }
  const Shape fresh{37, 65, 129};
  cases.push_back({"bitlinear_bwd", describe(fresh, false) + " (no forward kept)",
                   [fresh](std::uint64_t seed) { return bitlinear_bwd_case(fresh, false, seed); }});
  // More than 4096² weights: the canonical sum's third level.
  const Shape wide{2, 4100, 4097};
  cases.push_back({"bitlinear_fwd", describe(wide, false) + " (3-level weight sum)",
                   [wide](std::uint64_t seed) { return bitlinear_fwd_case(wide, seed); }});
  return cases;
}

}  // namespace lockstep::cuda::gate
