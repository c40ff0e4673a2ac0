// Per-epoch metrics: appended to a CSV file and drawn as an SVG plot (no external tools).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace examples {

struct EpochMetrics {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0;
  double seconds = 0, samples_per_s = 0;
};

/// Appends one row (writing the header first when the file is new or empty).
void append_csv(const std::string& path, const EpochMetrics& m);

/// Reads the rows of a CSV written by append_csv (for plotting a resumed run's whole history).
std::vector<EpochMetrics> read_csv(const std::string& path);

/// Two panels side by side: train/test loss and train/test accuracy against the epoch.
void write_svg_plot(const std::string& path, const std::vector<EpochMetrics>& history,
                    const std::string& title);

}  // namespace examples
