// DataLoader: batches from a Dataset in sampler order, prefetched by background worker threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/random.h"
#include "data/dataset.h"

namespace octo::data {

/// The order examples are visited in, per epoch.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<size_t> indices(size_t dataset_size) const = 0;
  /// Reshuffles for a new epoch (random samplers derive their order from (seed, epoch)).
  virtual void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }

 protected:
  uint64_t epoch_ = 0;
};

class SequentialSampler : public Sampler {
 public:
  std::vector<size_t> indices(size_t n) const override;
};

/// A permutation that depends only on (seed, epoch): the same seed gives the same order on every
/// run, and resuming at an epoch gives that epoch's order.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(uint64_t seed) : seed_(seed) {}
  std::vector<size_t> indices(size_t n) const override;

 private:
  uint64_t seed_;
};

/// torch.utils.data.DistributedSampler: rank r of `num_replicas` sees every num_replicas-th
/// example of the (optionally shuffled, same on every rank) order; padded by repeating from the
/// start so all ranks get ceil(n / num_replicas) examples, or trimmed with drop_last.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(size_t num_replicas, size_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<size_t> indices(size_t n) const override;

 private:
  size_t num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
};

/// Applied to each batch in a worker thread; `gen` is seeded from (loader seed, epoch, batch
/// index), so augmentations are reproducible whatever the number of workers.
using BatchTransform = std::function<Example(Example batch, Generator& gen)>;

struct DataLoaderOptions {
  size_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  /// Background threads preparing batches (0: prepare them on the calling thread).
  size_t num_workers = 0;
  /// Batches prepared ahead per worker.
  size_t prefetch_factor = 2;
  /// Copies every collated (and transformed) batch into pinned host memory, in the worker
  /// threads when there are workers, so that `batch.data.to(cuda, /*non_blocking=*/true)` is a
  /// true asynchronous upload (torch's pin_memory=True). Without CUDA support or without a
  /// visible GPU it has no effect: batches stay in ordinary memory.
  bool pin_memory = false;
  /// Seed for shuffling and augmentation; default: drawn from octo's generator (manual_seed).
  std::optional<uint64_t> seed;
  BatchTransform transform;
};

/// Iterates over batches:
///
///   octo::data::DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .num_workers = 2,
///                                           .pin_memory = true});
///   for (size_t epoch = 0; epoch < 3; ++epoch) {
///     loader.set_epoch(epoch);
///     for (const octo::data::Example& batch : loader) { ... batch.data, batch.target ... }
///   }
class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Batches per epoch.
  size_t size() const;
  void set_epoch(uint64_t epoch);
  uint64_t seed() const { return seed_; }
  const Dataset& dataset() const { return *dataset_; }

  class Iterator {
   public:
    Iterator(DataLoader* loader, size_t index) : loader_(loader), index_(index) {}
    const Example& operator*() const { return current_; }
    const Example* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator!=(const Iterator& other) const { return index_ != other.index_; }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class DataLoader;
    DataLoader* loader_;
    size_t index_;
    Example current_;
  };
  /// Starts an epoch (stopping any unfinished one).
  Iterator begin();
  Iterator end() { return Iterator(this, size()); }

 private:
  Example make_batch(size_t batch_index) const;
  void start_workers();
  void stop_workers();
  Example next_batch(size_t batch_index);
  /// Batches in an epoch of `n` sampled indices.
  size_t batches_of(size_t n) const;

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  uint64_t seed_;
  bool pin_ = false;  // options_.pin_memory and a GPU is visible
  std::vector<size_t> order_;
  // Batches in the current epoch (of order_), so the iterator never redraws the sampler's
  // indices: a RandomSampler's are a fresh permutation of the whole dataset each call.
  size_t epoch_batches_ = 0;

  // Worker state for the current epoch.
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  std::map<size_t, Example> ready_;
  std::map<size_t, std::exception_ptr> errors_;
  size_t next_to_make_ = 0;    // next batch index a worker will claim
  size_t next_to_return_ = 0;  // next batch index the iterator needs
  bool stopping_ = false;
};

}  // namespace octo::data
