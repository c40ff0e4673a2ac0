// A per-epoch progress bar: redrawn in place on a terminal, periodic plain lines otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace examples {

class ProgressBar {
 public:
  /// total: batches in the epoch. On a terminal (isatty) the line is redrawn with '\r'; otherwise
  /// a line is printed every `plain_every` batches and at the end.
  ProgressBar(std::string label, int64_t total, int64_t plain_every = 0);
  /// After each batch: running mean loss, running accuracy, examples seen so far.
  void update(int64_t done, double loss, double acc, int64_t samples);
  /// Ends the line.
  void finish();
  double seconds() const;

 private:
  std::string label_;
  int64_t total_, plain_every_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::string last_line_;
};

}  // namespace examples
