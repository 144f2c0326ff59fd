// How a Param holds its value (model.hpp): the storage rule and the dtype
// refusal every model applies before its kernels read a parameter.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lockstep/model/model.hpp"

namespace lockstep::model {

void check_param_storage(const Param& p) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("parameter '{}' ({} {}): {}", p.name, tensor::dtype_name(p.dtype),
                                            tensor::dims_str(p.shape), why));
  };
  const std::size_t n = tensor::numel_of(p.shape);
  if (p.dtype == tensor::DType::f32) {
    // A frozen parameter may hold no gradient (nothing writes it: lora_params.hpp's freeze).
    const bool grad_ok = p.grad.size() == n || (!p.trainable && p.grad.empty());
    if (p.value.size() != n || !grad_ok)
      fail(fmt::format("value/grad hold {}/{} floats, expected {}", p.value.size(), p.grad.size(), n));
    if (!p.frozen_value.empty()) fail("an F32 parameter keeps its value in `value`, but frozen_value is set");
    return;
  }
  if (p.trainable) fail("only a frozen parameter is held in another dtype than F32 (trainable is true)");
  if (!p.value.empty() || !p.grad.empty()) fail("a frozen typed parameter has no f32 value or grad, but they are set");
  if (p.frozen_value.empty()) fail("frozen_value is empty");
  if (p.frozen_value.dtype() != p.dtype || p.frozen_value.shape() != p.shape)
    fail(fmt::format("frozen_value is {} {}", tensor::dtype_name(p.frozen_value.dtype()),
                     tensor::dims_str(p.frozen_value.shape())));
}

std::size_t bytes_held(const Param& p) {
  return (p.value.capacity() + p.grad.capacity()) * sizeof(float) + p.frozen_value.bytes_held();
}

void require_param_dtypes(const std::vector<Param>& params, std::span<const tensor::DType> runs,
                          std::string_view model) {
  for (const Param& p : params) {
    if (std::find(runs.begin(), runs.end(), p.dtype) == runs.end()) {
      std::string names;
      for (tensor::DType d : runs) {
        if (!names.empty()) names.append(", ");
        names.append(tensor::dtype_name(d));
      }
      throw std::invalid_argument(fmt::format(
          "{}: parameter '{}' is held as {}{}; this model runs {} parameters only: it is refused, not converted",
          model, p.name, tensor::dtype_name(p.dtype), p.trainable ? "" : " (frozen)", names));
    }
    check_param_storage(p);
  }
}

}  // namespace lockstep::model
