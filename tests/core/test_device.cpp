// Device parsing, printing, hashing and availability errors.
#include <catch2/catch.hpp>
#include <unordered_set>

#include <octo/octo.h>

using octo::Device;

TEST_CASE("Device parses and prints cpu and cuda specs") {
  CHECK(Device("cpu") == Device("cpu:0"));
  CHECK(Device("cpu:3").index() == 3);
  CHECK(Device("cpu:3").is_cpu());
  CHECK(Device("cuda:1").is_cuda());
  CHECK(Device("cuda:1").index() == 1);
  CHECK(Device("cuda") == Device("cuda:0"));  // the current CUDA device, cuda:0 by default
  CHECK(Device("cpu:12").str() == "cpu:12");
  CHECK(Device("cuda:2").str() == "cuda:2");
  CHECK(Device("cpu:1") != Device("cpu:2"));
  CHECK(Device("cpu:1") < Device("cpu:2"));
  CHECK(Device("cpu:9") < Device("cuda:0"));
}

TEST_CASE("Device rejects malformed specs with a clear message") {
  CHECK_THROWS_AS(Device("gpu:0"), octo::ValueError);
  CHECK_THROWS_WITH(Device("gpu:0"),
                    Catch::Contains("Expected a device like") && Catch::Contains("'gpu:0'"));
  CHECK_THROWS_AS(Device("cpu:"), octo::ValueError);
  CHECK_THROWS_AS(Device("cpu:-1"), octo::ValueError);
  CHECK_THROWS_AS(Device("cuda:1x"), octo::ValueError);
  CHECK_THROWS_WITH(Device("cuda:x"), Catch::Contains("Invalid device index"));
}

TEST_CASE("Device hashes consistently") {
  std::unordered_set<Device> set{Device("cpu:0"), Device("cpu"), Device("cpu:1"), Device("cuda:0")};
  CHECK(set.size() == 3);
}

TEST_CASE("Errors carry the message first and the source location after") {
  try {
    OCTO_CHECK_VALUE(1 + 1 == 3, "shapes ", 2, " and ", 3, " cannot be multiplied");
    FAIL("OCTO_CHECK_VALUE did not throw");
  } catch (const octo::ValueError& e) {
    CHECK(e.msg() == "shapes 2 and 3 cannot be multiplied");
    CHECK(std::string(e.what()).rfind("shapes 2 and 3 cannot be multiplied (", 0) == 0);
    CHECK_THAT(e.what(), Catch::Contains("test_device.cpp:"));
  }
}

TEST_CASE("A cuda device is refused clearly when it is not available") {
  if (octo::cuda::is_available()) return;  // covered by the gpu suite instead
  auto use_cuda = [] { return octo::zeros({2}, {.device = Device("cuda:0")}); };
  CHECK_THROWS_AS(use_cuda(), octo::DeviceError);
  if (!octo::cuda_hooks().is_built()) {
    CHECK_THROWS_WITH(use_cuda(), Catch::Contains("octo was built without CUDA support"));
  } else {
    CHECK_THROWS_WITH(use_cuda(), Catch::Contains("no CUDA GPU is visible"));
  }
}

TEST_CASE("DeviceGuard sets and restores the current device") {
  CHECK(octo::current_device_index(octo::DeviceType::CPU) == 0);
  {
    octo::DeviceGuard g(Device("cpu:2"));
    CHECK(octo::current_device_index(octo::DeviceType::CPU) == 2);
  }
  CHECK(octo::current_device_index(octo::DeviceType::CPU) == 0);
}
