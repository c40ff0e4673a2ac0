// Tensors on two virtual CPU devices: a matmul, a broadcasted add, and the mixed-device error.
//
// Build it outside the tree after `meson install`:
//   c++ -std=c++20 hello_devices.cpp $(pkg-config --cflags --libs octo) -o hello_devices
#include <iostream>

#include <octo/octo.h>

int main() {
  octo::manual_seed(0);
  auto a = octo::randn({2, 3}, {.device = octo::Device("cpu:0")});
  auto b = octo::randn({3, 2}, {.device = octo::Device("cpu:0")});
  auto bias = octo::tensor({10.0, 20.0});  // [2], broadcast over rows

  std::cout << "a @ b + bias on cpu:0:\n" << octo::matmul(a, b) + bias << "\n\n";

  auto c = octo::ones({2, 2}, {.dtype = octo::kFloat64, .device = octo::Device("cpu:1")});
  std::cout << "c on cpu:1:\n" << c << "\n\n";

  try {
    auto wrong = octo::matmul(a, b) + c.to(octo::kFloat32);  // cpu:0 + cpu:1
    std::cout << wrong << "\n";
    return 1;  // not reached
  } catch (const octo::DeviceError& e) {
    std::cout << "adding tensors from cpu:0 and cpu:1 fails:\n  " << e.msg() << "\n";
  }
  return 0;
}
