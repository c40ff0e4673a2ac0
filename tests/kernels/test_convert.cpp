// Tensor::to between float32 and the 16-bit floats takes kernels/cpu/convert_run.h's vector loops
// on contiguous tensors; they must give the element-wise conversion's bits (core/half.h), NaNs
// and the tail past the last full vector included.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include <octo/octo.h>

using octo::Tensor;

namespace {

/// A contiguous 1-d tensor of `dtype` holding these raw element bits.
template <typename Bits>
Tensor from_bits(const std::vector<Bits>& bits, octo::DType dtype) {
  REQUIRE(octo::itemsize(dtype) == sizeof(Bits));
  Tensor t = octo::empty({static_cast<int64_t>(bits.size())}, {.dtype = dtype});
  std::memcpy(t.raw_data(), bits.data(), bits.size() * sizeof(Bits));
  return t;
}

template <typename Bits>
std::vector<Bits> bits_of(const Tensor& t) {
  REQUIRE(t.is_contiguous());
  std::vector<Bits> out(static_cast<size_t>(t.numel()));
  std::memcpy(out.data(), t.raw_data(), out.size() * sizeof(Bits));
  return out;
}

/// Every 16-bit pattern, plus 5 so that the run ends in a partial vector.
std::vector<uint16_t> every_16bit_value() {
  std::vector<uint16_t> v;
  for (uint32_t b = 0; b < 0x10000u; ++b) v.push_back(static_cast<uint16_t>(b));
  for (uint16_t b : {0x7fc1, 0xffff, 0x0001, 0x8000, 0x3c00}) v.push_back(b);
  return v;
}

/// A sweep of float bit patterns (every sign, exponent, NaN payloads, subnormals, ties) and the
/// values at the edges of both 16-bit formats; not a multiple of 16 long.
std::vector<uint32_t> float_sweep() {
  std::vector<uint32_t> v;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) v.push_back(static_cast<uint32_t>(u));
  for (float f : {65504.0f, 65520.0f, 65519.99f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                  1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -0.0f,
                  3.3895314e38f, 3.4028235e38f}) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    v.push_back(b);
  }
  for (uint32_t b : {0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fbfffffu, 0xffc00000u, 0x7fffffffu})
    v.push_back(b);
  return v;
}

float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

uint32_t bits_of_float(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

}  // namespace

TEST_CASE("16-bit to float32 conversion of a contiguous tensor gives the element-wise bits",
          "[half][convert]") {
  const std::vector<uint16_t> h = every_16bit_value();
  const std::vector<uint32_t> bf =
      bits_of<uint32_t>(from_bits(h, octo::kBFloat16).to(octo::kFloat32));
  const std::vector<uint32_t> f16 =
      bits_of<uint32_t>(from_bits(h, octo::kFloat16).to(octo::kFloat32));
  int bf_bad = 0, f16_bad = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    octo::BFloat16 b;
    b.bits = h[i];
    octo::Float16 f;
    f.bits = h[i];
    if (bf[i] != bits_of_float(static_cast<float>(b))) ++bf_bad;
    if (f16[i] != bits_of_float(static_cast<float>(f))) ++f16_bad;
  }
  CHECK(bf_bad == 0);
  CHECK(f16_bad == 0);
}

TEST_CASE("float32 to 16-bit conversion of a contiguous tensor gives the element-wise bits",
          "[half][convert]") {
  const std::vector<uint32_t> x = float_sweep();
  const Tensor t = from_bits(x, octo::kFloat32);
  const std::vector<uint16_t> bf = bits_of<uint16_t>(t.to(octo::kBFloat16));
  const std::vector<uint16_t> f16 = bits_of<uint16_t>(t.to(octo::kFloat16));
  int bf_bad = 0, f16_bad = 0, nans = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float f = float_of(x[i]);
    nans += f != f;
    if (bf[i] != octo::BFloat16(f).bits) ++bf_bad;
    if (f16[i] != octo::Float16(f).bits) ++f16_bad;
  }
  REQUIRE(nans > 100);  // the sweep reaches NaN payloads of both signs
  CHECK(bf_bad == 0);
  CHECK(f16_bad == 0);
}

TEST_CASE("a strided 16-bit conversion agrees with the contiguous one", "[half][convert]") {
  const Tensor x = octo::randn({37, 19}) * 1000;
  for (octo::DType dt : {octo::kBFloat16, octo::kFloat16}) {
    INFO(dt);
    const Tensor strided = x.t().to(dt);  // the element loop
    const Tensor contiguous = x.t().contiguous().to(dt);
    CHECK(bits_of<uint16_t>(strided.contiguous()) == bits_of<uint16_t>(contiguous));
    CHECK(strided.to(octo::kFloat32).contiguous().to_vector<float>() ==
          contiguous.to(octo::kFloat32).to_vector<float>());
  }
}
