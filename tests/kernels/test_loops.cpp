// Tests for the CPU kernels' strided loop (kernels/cpu/loops.h).
#include <catch2/catch.hpp>

#include <octo/octo.h>

#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cpu/loops.h"

using octo::Shape;
using octo::Tensor;

// Note [Splitting long rows] (kernels/cpu/loops.h): every element is visited exactly once, in
// runs of at most `grain`, and a contiguous tensor -- one coalesced row -- is spread over threads.
TEST_CASE("strided_runs visits every element once and splits long rows across threads") {
  struct Layout {
    Shape shape;
    std::function<Tensor(const Tensor&)> view;  // of a contiguous base of `shape`
  };
  const std::vector<Layout> layouts{
      {{1000}, [](const Tensor& t) { return t; }},
      {{0}, [](const Tensor& t) { return t; }},
      {{1}, [](const Tensor& t) { return t; }},
      {{7, 131}, [](const Tensor& t) { return t; }},
      {{7, 131}, [](const Tensor& t) { return t.t(); }},
      {{5, 4, 97}, [](const Tensor& t) { return t.select(1, 2); }},
      {{3, 2, 250}, [](const Tensor& t) { return t.narrow(2, 3, 240).transpose(0, 1); }},
  };
  const int saved = octo::get_num_threads();
  for (const Layout& layout : layouts) {
    for (int threads : {1, 2, 3}) {
      for (int64_t grain : {1, 7, 64, 100000}) {
        CAPTURE(layout.shape, threads, grain);
        octo::set_num_threads(threads);
        Tensor t = layout.view(octo::zeros(layout.shape, {.dtype = octo::kInt32}));
        std::mutex mutex;
        std::set<std::thread::id> ids;
        int64_t longest = 0, shortest = t.numel();
        octo::kernels::cpu::strided_runs<1>(
            {t.arg()},
            [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
              for (int64_t i = 0; i < n; ++i) ++*reinterpret_cast<int32_t*>(p[0] + i * s[0]);
              std::lock_guard<std::mutex> lock(mutex);
              ids.insert(std::this_thread::get_id());
              longest = std::max(longest, n);
              shortest = std::min(shortest, n);
            },
            grain);
        for (double v : t.to_vector<double>()) REQUIRE(v == 1.0);
        CHECK(longest <= grain);
        CHECK(shortest >= std::min<int64_t>(t.numel(), 1));  // no empty run
        // Enough work for several chunks: more than one thread took part.
        if (threads > 1 && t.numel() >= 2 * grain) CHECK(ids.size() > 1);
      }
    }
  }
  octo::set_num_threads(saved);
}
