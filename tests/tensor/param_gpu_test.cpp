// The CUDA model refuses a frozen ternary parameter by name, as the CPU model
// does (storage_test.cpp), before it uploads any value; put back as F32 it
// gives the loss it gave before, bit for bit. Runs on the device (label gpu).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/model/model.hpp"
#include "lockstep/num/fp.hpp"
#include "lockstep/ops/quant.hpp"
#include "lockstep/tensor/storage.hpp"

namespace m = lockstep::model;
namespace t = lockstep::tensor;
using lockstep::num::bits_of;

TEST(TensorParamGpu, TheCudaModelRefusesAFrozenTernaryParamByName) {
  auto model = m::make_cuda_model(m::preset("bitnet-micro"), "off");
  model->init(5);
  const std::vector<std::int32_t> ids{1, 2, 3, 4, 5, 6, 7, 8}, targets{2, 3, 4, 5, 6, 7, 8, 9};
  const float before = model->loss(ids, targets, 2, 4, 0);

  const std::string name = "model.layers.1.mlp.down_proj.weight";
  m::Param* p = nullptr;
  for (m::Param& q : model->params())
    if (q.name == name) p = &q;
  ASSERT_NE(p, nullptr);
  const std::vector<float> kept = p->value;
  const auto codes = lockstep::ops::quantize_ternary(p->value.data(), p->value.size());
  p->trainable = false;
  p->dtype = t::DType::ternary2;
  p->frozen_value = t::Storage::ternary(p->shape, codes.q, codes.scale);
  p->value = {};
  p->grad = {};
  std::string what;
  try {
    model->loss(ids, targets, 2, 4, 0);
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  EXPECT_EQ(what, "the CUDA model: parameter '" + name +
                      "' is held as TERNARY2 (frozen); this model runs F32 parameters only: it is refused, not "
                      "converted");

  for (m::Param& q : model->params())
    if (q.name == name) {
      q.dtype = t::DType::f32;
      q.frozen_value = {};
      q.trainable = true;
      q.value = kept;
      q.grad.assign(kept.size(), 0.0f);
    }
  EXPECT_EQ(bits_of(model->loss(ids, targets, 2, 4, 0)), bits_of(before));
}
