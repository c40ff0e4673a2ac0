// The examples' training loop.
#include "common/train.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "common/metrics.h"
#include "common/progress.h"

namespace examples {

namespace F = octo::nn::functional;
namespace dist = octo::distributed;

bool is_main_rank() { return !dist::is_initialized() || dist::get_rank() == 0; }

std::shared_ptr<octo::data::Sampler> train_sampler(const TrainOptions& opts) {
  if (!opts.distributed) return nullptr;
  return std::make_shared<octo::data::DistributedSampler>(
      size_t(dist::get_world_size()), size_t(dist::get_rank()), /*shuffle=*/true, opts.seed);
}

std::shared_ptr<octo::data::TensorDataset> take(const octo::data::TensorDataset& ds,
                                                int64_t limit) {
  int64_t n = static_cast<int64_t>(ds.size());
  if (limit > 0 && limit < n) n = limit;
  return std::make_shared<octo::data::TensorDataset>(ds.data().narrow(0, 0, n).contiguous(),
                                                     ds.targets().narrow(0, 0, n).contiguous());
}

namespace {

struct EpochResult {
  double loss = 0, acc = 0;
  int64_t samples = 0;
  int64_t skipped = 0;  // steps the loss scaler skipped (inf/NaN gradients; --amp fp16 only)
};

// Sums of a few numbers over the ranks (loss, correct, samples), when distributed.
void sum_over_ranks(double* values, int64_t n) {
  if (!dist::is_initialized()) return;
  auto group = dist::default_group();
  octo::Tensor t = octo::empty({n}, {.dtype = octo::kFloat64});
  std::copy(values, values + n, t.data_ptr<double>());
  octo::Tensor on_device = t.to(group->device());
  group->all_reduce(on_device, dist::ReduceOp::Sum)->wait();
  t = on_device.to(octo::kCPU);
  std::copy(t.data_ptr<double>(), t.data_ptr<double>() + n, values);
}

// Correct predictions in a batch.
double correct(const octo::Tensor& logits, const octo::Tensor& target) {
  return octo::eq(logits.argmax(1), target).to(octo::kFloat64).sum().item<double>();
}

/// The forward pass and loss under --amp's autocast (none when off).
struct Forward {
  octo::Tensor out, loss;
};
Forward forward_and_loss(octo::nn::Module& fwd, const octo::Tensor& x, const octo::Tensor& y,
                         const F::CrossEntropyOptions& loss_options,
                         std::optional<octo::DType> amp) {
  std::optional<octo::autocast> cast;
  if (amp) cast.emplace(*amp);
  Forward f;
  f.out = fwd.forward(x);
  f.loss = F::cross_entropy(f.out, y, loss_options);  // float32 under autocast
  return f;
}

EpochResult run_epoch(TrainSetup& s, octo::nn::Module& fwd, octo::GradScaler& scaler,
                      std::optional<octo::DType> amp, int64_t epoch, int64_t epochs) {
  s.model->train();
  EpochResult r;
  double loss_sum = 0, correct_sum = 0;
  // Only rank 0 draws the bar in a distributed run (its own shard's running figures).
  std::optional<ProgressBar> bar;
  if (is_main_rank())
    bar.emplace("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(epochs) + " batch",
                static_cast<int64_t>(s.train_loader->size()));
  int64_t done = 0;
  for (const auto& batch : *s.train_loader) {
    // Non-blocking: an asynchronous upload when the loader pins its batches (pin_memory), an
    // ordinary copy otherwise; later work on the device's stream is ordered after it.
    octo::Tensor x = batch.data.to(s.devices[0], /*non_blocking=*/true);
    octo::Tensor y = batch.target.to(s.devices[0], /*non_blocking=*/true);
    s.optimizer->zero_grad();
    auto [out, loss] = forward_and_loss(fwd, x, y, s.loss_options, amp);
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      throw octo::ValueError(
          "training stopped: the loss is " + std::to_string(loss_value) + " at epoch " +
          std::to_string(epoch + 1) + ", batch " + std::to_string(done + 1) + " of " +
          std::to_string(s.train_loader->size()) +
          " (before its backward and step, so the weights are those of the batch before); lower --lr, or check the data (--detect-anomaly names the op that first produces a NaN or Inf)");
    }
    scaler.scale(loss).backward();                // the loss itself unless --amp fp16
    if (!scaler.step(*s.optimizer)) ++r.skipped;  // a step whose gradients overflowed
    scaler.update();
    if (s.scheduler) s.scheduler->step();
    int64_t n = x.size(0);
    loss_sum += loss_value * n;
    {
      octo::NoGradGuard no_grad;
      correct_sum += correct(out.detach(), y);
    }
    r.samples += n;
    ++done;
    if (bar) bar->update(done, loss_sum / r.samples, correct_sum / r.samples, r.samples);
  }
  if (bar) bar->finish();
  double totals[3] = {loss_sum, correct_sum, double(r.samples)};
  sum_over_ranks(totals, 3);  // every rank's shard: the epoch's figures over the whole data
  loss_sum = totals[0];
  correct_sum = totals[1];
  r.samples = static_cast<int64_t>(totals[2]);
  r.loss = loss_sum / std::max<int64_t>(r.samples, 1);
  r.acc = correct_sum / std::max<int64_t>(r.samples, 1);
  return r;
}

EpochResult evaluate(TrainSetup& s, octo::nn::Module& fwd, std::optional<octo::DType> amp) {
  s.model->eval();
  octo::NoGradGuard no_grad;
  EpochResult r;
  double loss_sum = 0, correct_sum = 0;
  F::CrossEntropyOptions plain;  // test loss without label smoothing
  plain.reduction = "sum";
  for (const auto& batch : *s.test_loader) {
    octo::Tensor x = batch.data.to(s.devices[0], /*non_blocking=*/true);
    octo::Tensor y = batch.target.to(s.devices[0], /*non_blocking=*/true);
    auto [out, loss] = forward_and_loss(fwd, x, y, plain, amp);
    loss_sum += loss.item<double>();
    correct_sum += correct(out, y);
    r.samples += x.size(0);
  }
  r.loss = loss_sum / std::max<int64_t>(r.samples, 1);
  r.acc = correct_sum / std::max<int64_t>(r.samples, 1);
  return r;
}

std::ostream& null_stream() {
  static std::ostream sink(nullptr);  // no buffer: every write is dropped
  return sink;
}

// A checkpoint from a run with another number of batches per epoch (a distributed run resumed in
// one process, or the other way round): the schedule continues at the start of the next epoch of
// this run, as if it had run here from the beginning.
void realign_schedule(TrainSetup& s, const octo::TrainingState& state, int64_t batches,
                      std::ostream& out) {
  auto it = state.metadata.find("batches_per_epoch");
  if (!s.scheduler || it == state.metadata.end() || it->second == std::to_string(batches)) return;
  octo::nn::NamedTensors sd = s.scheduler->state_dict();
  const int64_t position = state.epoch * batches;
  for (auto& [key, t] : sd)
    if (key == "last_epoch" || key == "step_count")
      t = octo::scalar_tensor(position, {.dtype = octo::kInt64});
  s.scheduler->load_state_dict(sd);
  out << "the checkpoint ran " << it->second << " batches per epoch, this run " << batches
      << ": the learning-rate schedule continues at step " << position << "\n";
}

std::string history_to_string(const std::vector<EpochMetrics>& h) {
  std::ostringstream os;
  for (const auto& m : h)
    os << m.epoch << "," << m.train_loss << "," << m.train_acc << "," << m.test_loss << ","
       << m.test_acc << "," << m.seconds << "," << m.samples_per_s << "\n";
  return os.str();
}

std::vector<EpochMetrics> history_from_string(const std::string& text) {
  std::vector<EpochMetrics> h;
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) {
    EpochMetrics m;
    long long e;
    if (std::sscanf(line.c_str(), "%lld,%lf,%lf,%lf,%lf,%lf,%lf", &e, &m.train_loss, &m.train_acc,
                    &m.test_loss, &m.test_acc, &m.seconds, &m.samples_per_s) == 7) {
      m.epoch = e;
      h.push_back(m);
    }
  }
  return h;
}

}  // namespace

int train(const TrainOptions& opts, TrainSetup& s) {
  std::optional<octo::DetectAnomalyGuard> anomaly;
  if (opts.detect_anomaly) anomaly.emplace();
  std::shared_ptr<octo::nn::Module> fwd = s.model;
  if (opts.distributed)
    fwd = std::make_shared<dist::DistributedDataParallel>(s.model);
  else if (s.devices.size() > 1)
    fwd = std::make_shared<octo::parallel::DataParallel>(s.model, s.devices);
  // --amp: autocast around each forward; fp16 also scales the loss (bf16 has float32's range).
  const std::optional<octo::DType> amp = amp_dtype(opts);
  octo::GradScaler scaler({.enabled = amp == octo::kFloat16});
  std::string where;
  for (const auto& d : s.devices) {
    if (!where.empty()) where += ",";
    where += d.str();
  }
  if (opts.distributed)
    where += " in each of " + std::to_string(dist::get_world_size()) +
             " processes (DistributedDataParallel over " + dist::default_group()->backend_name() +
             ", " + std::to_string(octo::get_num_threads()) +
             (octo::get_num_threads() == 1 ? " thread" : " threads") + " each)";
  if (amp)
    where += std::string(", mixed precision ") +
             (*amp == octo::kFloat16 ? "float16 (autocast and GradScaler)" : "bfloat16 (autocast)");
  // Rank 0 speaks for the job: it prints, writes the CSV, the plot and the checkpoints.
  const bool main_rank = is_main_rank();
  std::ostream& out = main_rank ? std::cout : null_stream();
  out << s.name << ": " << s.model->num_parameters() << " parameters on " << where << ", "
      << s.train_loader->dataset().size() << " training / " << s.test_loader->dataset().size()
      << " test examples\n";

  octo::TrainingState state;
  state.model = s.model.get();
  state.optimizer = s.optimizer;
  state.scheduler = s.scheduler;
  state.scaler = &scaler;  // saves and restores the loss scale (nothing when disabled)
  std::vector<EpochMetrics> history;
  const int64_t batches = static_cast<int64_t>(s.train_loader->size());
  if (!opts.resume.empty()) {
    octo::load_checkpoint(state, opts.resume);
    history = history_from_string(state.metadata["history"]);
    out << "resumed from " << opts.resume << " after epoch " << state.epoch << "\n";
    realign_schedule(s, state, batches, out);
  }
  for (int64_t epoch = state.epoch; epoch < opts.epochs; ++epoch) {
    s.train_loader->set_epoch(static_cast<uint64_t>(epoch));
    auto t0 = std::chrono::steady_clock::now();
    EpochResult tr = run_epoch(s, *fwd, scaler, amp, epoch, opts.epochs);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EpochResult te = evaluate(s, *fwd, amp);
    EpochMetrics m{epoch + 1, tr.loss, tr.acc, te.loss, te.acc, secs, tr.samples / secs};
    history.push_back(m);
    if (main_rank) {
      std::printf(
          "epoch %lld: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s, %.0f samples/s\n",
          static_cast<long long>(m.epoch), m.train_loss, 100 * m.train_acc, m.test_loss,
          100 * m.test_acc, m.seconds, m.samples_per_s);
      // With --amp fp16, what the loss scaler did: a scale that keeps falling means float16
      // gradients overflow at every scale (docs/errors.md, "Mixed precision").
      if (scaler.is_enabled())
        std::printf(
            "  loss scale %g after the epoch, %lld of %lld steps skipped (inf/NaN gradients)\n",
            scaler.get_scale(), static_cast<long long>(tr.skipped),
            static_cast<long long>(batches));
      std::fflush(stdout);
      if (!opts.csv.empty()) append_csv(opts.csv, m);
      if (!opts.save.empty()) {
        state.epoch = epoch + 1;
        state.metadata["history"] = history_to_string(history);
        state.metadata["example"] = s.name;
        state.metadata["batches_per_epoch"] = std::to_string(batches);
        octo::save_checkpoint(state, opts.save);
      }
      if (!opts.plot.empty()) write_svg_plot(opts.plot, history, s.name);
    }
    if (opts.stop_after > 0 && epoch + 1 >= opts.stop_after && epoch + 1 < opts.epochs) {
      out << "stopping after epoch " << epoch + 1 << " (--stop-after)\n";
      break;
    }
  }
  if (!history.empty() && main_rank)
    std::printf("test accuracy: %.2f%%\n", 100 * history.back().test_acc);
  std::fflush(stdout);
  if (opts.distributed) {
    fwd.reset();  // the DistributedDataParallel wrapper goes before its process group
    dist::destroy_process_group();
  }
  return 0;
}

int guarded_main(const std::function<int()>& body) {
  try {
    return body();
  } catch (const octo::Error& e) {
    std::cerr << "error: " << e.msg() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace examples
