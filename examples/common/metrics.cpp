// CSV metrics and a small SVG line-plot writer.
#include "common/metrics.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

namespace examples {

static const char* kHeader = "epoch,train_loss,train_acc,test_loss,test_acc,seconds,samples_per_s";

void append_csv(const std::string& path, const EpochMetrics& m) {
  bool fresh;
  {
    std::ifstream in(path);
    fresh = !in || in.peek() == std::ifstream::traits_type::eof();
  }
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error("cannot write " + path);
  if (fresh) out << kHeader << "\n";
  char row[256];
  std::snprintf(row, sizeof row, "%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f\n",
                static_cast<long long>(m.epoch), m.train_loss, m.train_acc, m.test_loss, m.test_acc,
                m.seconds, m.samples_per_s);
  out << row;
}

std::vector<EpochMetrics> read_csv(const std::string& path) {
  std::vector<EpochMetrics> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    EpochMetrics m;
    long long epoch;
    if (std::sscanf(line.c_str(), "%lld,%lf,%lf,%lf,%lf,%lf,%lf", &epoch, &m.train_loss,
                    &m.train_acc, &m.test_loss, &m.test_acc, &m.seconds, &m.samples_per_s) == 7) {
      m.epoch = epoch;
      rows.push_back(m);
    }
  }
  return rows;
}

namespace {

struct Series {
  std::string name, color;
  std::function<double(const EpochMetrics&)> value;
};

// One panel at (x0, y0) of size w x h: axes, min/max labels, a polyline per series, a legend.
void panel(std::ostream& os, double x0, double y0, double w, double h, const std::string& title,
           const std::vector<EpochMetrics>& hist, const std::vector<Series>& series) {
  double lo = 1e300, hi = -1e300;
  for (const auto& s : series)
    for (const auto& m : hist) lo = std::min(lo, s.value(m)), hi = std::max(hi, s.value(m));
  if (hi - lo < 1e-12) lo -= 0.5, hi += 0.5;
  double e0 = hist.front().epoch, e1 = std::max<double>(hist.back().epoch, e0 + 1);
  auto px = [&](double e) { return x0 + 50 + (w - 60) * (e - e0) / (e1 - e0); };
  auto py = [&](double v) { return y0 + h - 30 - (h - 60) * (v - lo) / (hi - lo); };
  os << "<text x='" << x0 + w / 2 << "' y='" << y0 + 18 << "' text-anchor='middle'>" << title
     << "</text>\n";
  os << "<polyline fill='none' stroke='black' points='" << x0 + 50 << "," << y0 + 30 << " "
     << x0 + 50 << "," << y0 + h - 30 << " " << x0 + w - 10 << "," << y0 + h - 30 << "'/>\n";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", hi);
  os << "<text x='" << x0 + 46 << "' y='" << py(hi) + 4 << "' text-anchor='end'>" << buf
     << "</text>\n";
  std::snprintf(buf, sizeof buf, "%.4g", lo);
  os << "<text x='" << x0 + 46 << "' y='" << py(lo) + 4 << "' text-anchor='end'>" << buf
     << "</text>\n";
  os << "<text x='" << x0 + w / 2 + 20 << "' y='" << y0 + h - 8
     << "' text-anchor='middle'>epoch</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    os << "<polyline fill='none' stroke-width='2' stroke='" << s.color << "' points='";
    for (const auto& m : hist) os << px(m.epoch) << "," << py(s.value(m)) << " ";
    os << "'/>\n";
    for (const auto& m : hist)
      os << "<circle r='3' fill='" << s.color << "' cx='" << px(m.epoch) << "' cy='"
         << py(s.value(m)) << "'/>\n";
    os << "<text x='" << x0 + w - 15 << "' y='" << y0 + 40 + 16 * i << "' text-anchor='end' fill='"
       << s.color << "'>" << s.name << "</text>\n";
  }
}

}  // namespace

void write_svg_plot(const std::string& path, const std::vector<EpochMetrics>& hist,
                    const std::string& title) {
  if (hist.empty()) return;
  std::ofstream os(path);
  if (!os) throw std::runtime_error("cannot write " + path);
  const double w = 420, h = 300;
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << 2 * w << "' height='" << h + 30
     << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n<text x='"
     << w << "' y='16' text-anchor='middle' font-size='14'>" << title << "</text>\n";
  panel(os, 0, 30, w, h, "loss", hist,
        {{"train", "#1f77b4", [](const EpochMetrics& m) { return m.train_loss; }},
         {"test", "#d62728", [](const EpochMetrics& m) { return m.test_loss; }}});
  panel(os, w, 30, w, h, "accuracy (%)", hist,
        {{"train", "#1f77b4", [](const EpochMetrics& m) { return 100 * m.train_acc; }},
         {"test", "#d62728", [](const EpochMetrics& m) { return 100 * m.test_acc; }}});
  os << "</svg>\n";
}

}  // namespace examples
