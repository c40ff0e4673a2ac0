// The progress bar of the training examples.
#include "common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

namespace examples {

ProgressBar::ProgressBar(std::string label, int64_t total, int64_t plain_every)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      plain_every_(plain_every > 0 ? plain_every : std::max<int64_t>(total_ / 10, 1)),
      tty_(isatty(STDOUT_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

double ProgressBar::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::update(int64_t done, double loss, double acc, int64_t samples) {
  auto now = std::chrono::steady_clock::now();
  double secs = seconds();
  double rate = secs > 0 ? samples / secs : 0.0;
  double eta = done > 0 ? secs / done * (total_ - done) : 0.0;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%lld/%lld loss %.4f acc %5.2f%% %7.0f samples/s ETA %4.0fs",
                static_cast<long long>(done), static_cast<long long>(total_), loss, 100.0 * acc,
                rate, eta);
  if (tty_) {
    bool last = done == total_;
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 25;
    int filled = static_cast<int>(kWidth * done / total_);
    std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
    std::cout << "\r" << label_ << " " << bar << " " << stats << "\033[K" << std::flush;
  } else if (done % plain_every_ == 0 || done == total_) {
    std::cout << label_ << " " << stats << "\n" << std::flush;
  }
}

void ProgressBar::finish() {
  if (tty_) std::cout << "\n" << std::flush;
}

}  // namespace examples
