// Every fast CPU kernel (backend/cpu/ops.hpp) against its op specification
// (through model::SpecKernels<float>, which calls ops::Op::forward/backward),
// bit for bit, on ragged shapes (several 64-key attention blocks, grouped and
// multi-query heads, strided q/k/v rows, head sizes that are not a multiple of
// the vector width, rows longer than one 4096-element reduction chunk), for
// 1, 2 and 5 threads.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/model/spec_kernels.hpp"
#include "model_test_util.hpp"

namespace m = lockstep::model;
namespace mt = lockstep::model::testing;
namespace ops = lockstep::ops;
using lockstep::cpu::OpKernels;

namespace {

std::vector<float> normal(std::size_t n, lockstep::ad::Rng& rng, double scale = 1.0) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

// Runs `body(kernels, outputs...)` for the spec and for the fast kernels at
// 1, 2 and 5 threads, and counts differing output bits.
struct Compare {
  std::string what;
  std::size_t cells = 0, bad = 0;
  void add(const std::vector<float>& got, const std::vector<float>& want) {
    cells += want.size();
    bad += mt::differing_bits(got, want);
  }
  ~Compare() {
    std::printf("%-52s %8zu cells x 3 thread counts, %zu differ\n", what.c_str(), cells / 3, bad);
    EXPECT_EQ(bad, 0u) << what;
  }
};

std::uint64_t seed() {
  static const std::uint64_t s = [] {
    const std::uint64_t v = lockstep::ad::seed_from_env();
    std::printf("seed %llu (LOCKSTEP_SEED reproduces)\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

}  // namespace

// Split even micro shapes into several pieces per thread count (the default
// keeps small work on one thread), so that the thread-count checks have teeth.
struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

TEST(CpuKernels, AttentionEqualsTheSpec) {
  lockstep::ad::Rng rng(seed() ^ 1);
  struct Case {
    std::size_t B, T, Hq, Hkv, Dh, KB, stride_extra;
  };
  const Case cases[] = {{1, 6, 2, 2, 4, 64, 0},    {2, 9, 4, 2, 3, 4, 0},   {1, 70, 2, 1, 4, 64, 0},
                        {2, 131, 4, 2, 16, 64, 5}, {1, 67, 3, 3, 20, 5, 0}, {1, 129, 2, 2, 64, 64, 7},
                        {3, 5, 8, 2, 32, 64, 0},   {1, 1, 1, 1, 1, 64, 0}};
  for (const Case& k : cases) {
    const ops::Attention::Config c{k.B, k.T, k.Hq, k.Hkv, k.Dh, 0.0, k.KB};
    const std::size_t qw = k.Hq * k.Dh, kvw = k.Hkv * k.Dh, ldq = qw + k.stride_extra, ldkv = kvw + k.stride_extra;
    const std::size_t N = k.B * k.T;
    const auto q = normal(N * ldq, rng, 1.5), kk = normal(N * ldkv, rng, 1.5), v = normal(N * ldkv, rng),
               dout = normal(N * qw, rng);
    m::SpecKernels<float> spec;
    std::vector<float> o(N * qw), lse(k.B * k.Hq * k.T), dq(N * ldq), dk(N * ldkv), dv(N * ldkv);
    spec.attention_fwd(c, q.data(), ldq, kk.data(), v.data(), ldkv, o.data(), lse.data());
    spec.attention_bwd(c, q.data(), ldq, kk.data(), v.data(), ldkv, o.data(), lse.data(), dout.data(), dq.data(),
                       dk.data(), dv.data());
    Compare cmp{"attention B" + std::to_string(k.B) + " T" + std::to_string(k.T) + " H" + std::to_string(k.Hq) +
                "/" + std::to_string(k.Hkv) + " Dh" + std::to_string(k.Dh) + " KB" + std::to_string(k.KB) +
                (k.stride_extra ? " strided" : "")};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      std::vector<float> o2(o.size(), 7.0f), lse2(lse.size(), 7.0f), dq2(dq.size()), dk2(dk.size()),
          dv2(dv.size());
      f.attention_fwd(c, q.data(), ldq, kk.data(), v.data(), ldkv, o2.data(), lse2.data());
      f.attention_bwd(c, q.data(), ldq, kk.data(), v.data(), ldkv, o.data(), lse.data(), dout.data(), dq2.data(),
                      dk2.data(), dv2.data());
      cmp.add(o2, o);
      cmp.add(lse2, lse);
      cmp.add(dq2, dq);
      cmp.add(dk2, dk);
      cmp.add(dv2, dv);
    }
  }
}

TEST(CpuKernels, NormsLinearsAndActivationsEqualTheSpec) {
  lockstep::ad::Rng rng(seed() ^ 2);
  m::Aux aux_s, aux_f;
  for (auto [rows, dim] : {std::pair<std::size_t, std::size_t>{5, 33}, {64, 256}, {3, 4100}}) {
    const ops::NormConfig c{rows, dim, 1e-5};
    const auto x = normal(rows * dim, rng, 2.0), g = normal(dim, rng), b = normal(dim, rng),
               dy = normal(rows * dim, rng);
    m::SpecKernels<float> spec;
    std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dg(dim), db(dim);
    std::vector<float> ry(rows * dim), rrstd(rows), rdx(rows * dim), rdw(dim);
    spec.layernorm_fwd(c, x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data());
    spec.layernorm_bwd(c, x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dg.data(), db.data());
    spec.rmsnorm_fwd(c, x.data(), g.data(), ry.data(), rrstd.data());
    spec.rmsnorm_bwd(c, x.data(), g.data(), rrstd.data(), dy.data(), rdx.data(), rdw.data());
    Compare cmp{"layernorm + rmsnorm " + std::to_string(rows) + "x" + std::to_string(dim)};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      std::vector<float> y2(y.size()), mean2(rows), rstd2(rows), dx2(dx.size()), dg2(dim), db2(dim);
      std::vector<float> ry2(ry.size()), rrstd2(rows), rdx2(rdx.size()), rdw2(dim);
      f.layernorm_fwd(c, x.data(), g.data(), b.data(), y2.data(), mean2.data(), rstd2.data());
      f.layernorm_bwd(c, x.data(), g.data(), mean.data(), rstd.data(), dy.data(), dx2.data(), dg2.data(),
                      db2.data());
      f.rmsnorm_fwd(c, x.data(), g.data(), ry2.data(), rrstd2.data());
      f.rmsnorm_bwd(c, x.data(), g.data(), rrstd.data(), dy.data(), rdx2.data(), rdw2.data());
      for (auto [got, want] : {std::pair{&y2, &y}, {&mean2, &mean}, {&rstd2, &rstd}, {&dx2, &dx}, {&dg2, &dg},
                               {&db2, &db}, {&ry2, &ry}, {&rrstd2, &rrstd}, {&rdx2, &rdx}, {&rdw2, &rdw}})
        cmp.add(*got, *want);
    }
  }
  for (auto [N, K, M] : {std::tuple<std::size_t, std::size_t, std::size_t>{5, 7, 4}, {33, 65, 130}, {2, 300, 17}}) {
    const auto x = normal(N * K, rng), w = normal(M * K, rng, 0.1), b = normal(M, rng), dy = normal(N * M, rng);
    m::SpecKernels<float> spec;
    std::vector<float> y(N * M), dx(N * K), dw(M * K), db(M), qy(N * M), qdx(N * K), qdw(M * K);
    spec.linear_fwd({N, K, M, true}, x.data(), w.data(), b.data(), y.data());
    spec.linear_bwd({N, K, M, true}, x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    spec.bitlinear_fwd({N, K, M}, x.data(), w.data(), qy.data(), aux_s);
    spec.bitlinear_bwd({N, K, M}, x.data(), w.data(), dy.data(), qdx.data(), qdw.data(), aux_s);
    Compare cmp{"linear (+bias) + bitlinear " + std::to_string(N) + "x" + std::to_string(K) + "x" +
                std::to_string(M)};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      std::vector<float> y2(y.size()), dx2(dx.size()), dw2(dw.size()), db2(M), qy2(qy.size()), qdx2(qdx.size()),
          qdw2(qdw.size());
      f.linear_fwd({N, K, M, true}, x.data(), w.data(), b.data(), y2.data());
      f.linear_bwd({N, K, M, true}, x.data(), w.data(), dy.data(), dx2.data(), dw2.data(), db2.data());
      f.bitlinear_fwd({N, K, M}, x.data(), w.data(), qy2.data(), aux_f);
      f.bitlinear_bwd({N, K, M}, x.data(), w.data(), dy.data(), qdx2.data(), qdw2.data(), aux_f);
      for (auto [got, want] : {std::pair{&y2, &y}, {&dx2, &dx}, {&dw2, &dw}, {&db2, &db}, {&qy2, &qy},
                               {&qdx2, &qdx}, {&qdw2, &qdw}})
        cmp.add(*got, *want);
      // The backward without a kept forward recomputes the same values.
      m::Aux none;
      std::vector<float> qdx3(qdx.size()), qdw3(qdw.size());
      f.bitlinear_bwd({N, K, M}, x.data(), w.data(), dy.data(), qdx3.data(), qdw3.data(), none);
      EXPECT_EQ(mt::differing_bits(qdx3, qdx) + mt::differing_bits(qdw3, qdw), 0u);
    }
  }
  {
    const std::size_t n = 10007;
    auto g = normal(n, rng, 2.0);
    g[5] = 0.0f;  // the kinks of relu²
    g[6] = -0.0f;
    const auto up = normal(n, rng), dy = normal(n, rng);
    const ops::ElementwiseConfig c{n};
    m::SpecKernels<float> spec;
    std::vector<float> gy(n), gdx(n), sy(n), sdg(n), sdu(n), ry(n), rdg(n), rdu(n), res(n), da(n), dbb(n);
    spec.gelu_fwd(c, g.data(), gy.data(), aux_s);
    spec.gelu_bwd(c, g.data(), dy.data(), gdx.data(), aux_s);
    spec.swiglu_fwd(c, g.data(), up.data(), sy.data(), aux_s);
    spec.swiglu_bwd(c, g.data(), up.data(), dy.data(), sdg.data(), sdu.data(), aux_s);
    spec.relu2mul_fwd(c, g.data(), up.data(), ry.data(), aux_s);
    spec.relu2mul_bwd(c, g.data(), up.data(), dy.data(), rdg.data(), rdu.data(), aux_s);
    spec.residual_fwd(c, g.data(), up.data(), res.data());
    spec.residual_bwd(c, dy.data(), da.data(), dbb.data());
    Compare cmp{"gelu, swiglu, relu2_mul, residual n=10007"};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      m::Aux a1, a2, a3, none;
      std::vector<float> gy2(n), gdx2(n), gdx3(n), sy2(n), sdg2(n), sdu2(n), sdg3(n), sdu3(n), ry2(n), rdg2(n),
          rdu2(n), res2(n), da2(n), db2(n);
      f.gelu_fwd(c, g.data(), gy2.data(), a1);
      f.gelu_bwd(c, g.data(), dy.data(), gdx2.data(), a1);
      f.gelu_bwd(c, g.data(), dy.data(), gdx3.data(), none);  // without the kept tanh
      f.swiglu_fwd(c, g.data(), up.data(), sy2.data(), a2);
      f.swiglu_bwd(c, g.data(), up.data(), dy.data(), sdg2.data(), sdu2.data(), a2);
      f.swiglu_bwd(c, g.data(), up.data(), dy.data(), sdg3.data(), sdu3.data(), none);
      f.relu2mul_fwd(c, g.data(), up.data(), ry2.data(), a3);
      f.relu2mul_bwd(c, g.data(), up.data(), dy.data(), rdg2.data(), rdu2.data(), a3);
      f.residual_fwd(c, g.data(), up.data(), res2.data());
      f.residual_bwd(c, dy.data(), da2.data(), db2.data());
      for (auto [got, want] :
           {std::pair{&gy2, &gy}, {&gdx2, &gdx}, {&gdx3, &gdx}, {&sy2, &sy}, {&sdg2, &sdg}, {&sdu2, &sdu},
            {&sdg3, &sdg}, {&sdu3, &sdu}, {&ry2, &ry}, {&rdg2, &rdg}, {&rdu2, &rdu}, {&res2, &res}, {&da2, &da},
            {&db2, &dbb}})
        cmp.add(*got, *want);
    }
  }
}

TEST(CpuKernels, EmbeddingsRopeAndCrossEntropyEqualTheSpec) {
  lockstep::ad::Rng rng(seed() ^ 3);
  {
    const std::size_t B = 3, T = 7, V = 11, D = 10, S = 9;
    std::vector<ops::Index> ids(B * T);
    for (auto& id : ids) id = static_cast<ops::Index>(rng.below(V / 2));  // repeated ids, unused rows
    const auto wte = normal(V * D, rng), wpe = normal(S * D, rng), dy = normal(B * T * D, rng);
    const ops::Embedding::Config ec{B * T, V, D};
    const ops::LearnedPositions::Config pc{B, T, D, S, 2};
    m::SpecKernels<float> spec;
    std::vector<float> y(B * T * D), dwte(V * D), py(B * T * D), pdx(B * T * D), dwpe(S * D);
    spec.embedding_fwd(ec, ids.data(), wte.data(), y.data());
    spec.embedding_bwd(ec, ids.data(), dy.data(), dwte.data());
    spec.positions_fwd(pc, y.data(), wpe.data(), py.data());
    spec.positions_bwd(pc, dy.data(), pdx.data(), dwpe.data());
    Compare cmp{"embedding + positions (offset 2)"};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      std::vector<float> y2(y.size()), dwte2(dwte.size(), 9.0f), py2(py.size()), pdx2(pdx.size()),
          dwpe2(dwpe.size(), 9.0f);
      f.embedding_fwd(ec, ids.data(), wte.data(), y2.data());
      f.embedding_bwd(ec, ids.data(), dy.data(), dwte2.data());
      f.positions_fwd(pc, y.data(), wpe.data(), py2.data());
      f.positions_bwd(pc, dy.data(), pdx2.data(), dwpe2.data());
      for (auto [got, want] : {std::pair{&y2, &y}, {&dwte2, &dwte}, {&py2, &py}, {&pdx2, &pdx}, {&dwpe2, &dwpe}})
        cmp.add(*got, *want);
    }
  }
  for (auto layout : {ops::RopeLayout::rotate_half, ops::RopeLayout::interleaved}) {
    const ops::Rope::Config c{2, 37, 3, 12, 500000.0, layout, 5};
    const auto x = normal(2 * 37 * 3 * 12, rng);
    m::SpecKernels<float> spec;
    std::vector<float> y(x.size()), dx(x.size());
    spec.rope_fwd(c, x.data(), y.data());
    spec.rope_bwd(c, x.data(), dx.data());
    Compare cmp{std::string("rope ") + (layout == ops::RopeLayout::rotate_half ? "rotate-half" : "interleaved")};
    OpKernels f;  // one kernel object: its cached table must follow the config
    for (int threads : {1, 2, 5}) {
      f.threads = threads;
      std::vector<float> y2(y.size()), dx2(dx.size());
      ops::Rope::Config other = c;
      other.seq = 3;
      other.offset = 0;
      std::vector<float> scratch(2 * 3 * 3 * 12);
      f.rope_fwd(other, x.data(), scratch.data());  // another table in between
      f.rope_fwd(c, x.data(), y2.data());
      f.rope_bwd(c, x.data(), dx2.data());
      cmp.add(y2, y);
      cmp.add(dx2, dx);
    }
  }
  for (auto [N, V] : {std::pair<std::size_t, std::size_t>{6, 11}, {9, 5000}}) {
    const auto z = normal(N * V, rng, 3.0), dl = normal(N, rng);
    std::vector<ops::Index> t(N);
    for (auto& x : t) x = static_cast<ops::Index>(rng.below(V));
    t[1] = -1;  // ignored row
    const ops::CrossEntropy::Config c{N, V};
    m::SpecKernels<float> spec;
    std::vector<float> loss(N), lse(N), dz(N * V);
    spec.ce_fwd(c, z.data(), t.data(), loss.data(), lse.data());
    spec.ce_bwd(c, z.data(), t.data(), lse.data(), dl.data(), dz.data());
    Compare cmp{"cross-entropy " + std::to_string(N) + "x" + std::to_string(V) + " (one row ignored)"};
    for (int threads : {1, 2, 5}) {
      OpKernels f;
      f.threads = threads;
      std::vector<float> loss2(N), lse2(N), dz2 = z;
      f.ce_fwd(c, z.data(), t.data(), loss2.data(), lse2.data());
      f.ce_bwd(c, dz2.data(), t.data(), lse.data(), dl.data(), dz2.data());  // in place, as the model does
      cmp.add(loss2, loss);
      cmp.add(lse2, lse);
      cmp.add(dz2, dz);
    }
  }
}
