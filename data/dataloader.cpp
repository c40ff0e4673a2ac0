// DataLoader: samplers, batch assembly, background prefetching and pinning of batches.
#include "data/dataloader.h"

#include <algorithm>
#include <numeric>

#include "autograd/grad_mode.h"
#include "core/device_hooks.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/rethrow.h"

namespace octo::data {

namespace {

/// A Fisher-Yates permutation of 0..n-1 drawn from Philox(seed) on subsequence (epoch + 2): a
/// pure function of (seed, epoch).
std::vector<size_t> permutation(size_t n, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> p(n);
  std::iota(p.begin(), p.end(), size_t{0});
  Philox philox(seed);
  uint64_t counter = 0;
  for (size_t i = n; i > 1; --i) {
    uint32_t r[4];
    philox(counter++, epoch + 2, r);
    uint64_t x = (uint64_t(r[0]) << 32) | r[1];
    size_t j = static_cast<size_t>(x % i);  // bias < i / 2^64: negligible for any dataset
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

}  // namespace

std::vector<size_t> SequentialSampler::indices(size_t n) const {
  std::vector<size_t> p(n);
  std::iota(p.begin(), p.end(), size_t{0});
  return p;
}

std::vector<size_t> RandomSampler::indices(size_t n) const { return permutation(n, seed_, epoch_); }

DistributedSampler::DistributedSampler(size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  OCTO_CHECK_VALUE(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got ",
                   num_replicas);
  OCTO_CHECK_VALUE(rank < num_replicas, "DistributedSampler: invalid rank ", rank,
                   ", rank should be in the interval [0, ", num_replicas - 1, "]");
}

std::vector<size_t> DistributedSampler::indices(size_t n) const {
  std::vector<size_t> all =
      shuffle_ ? permutation(n, seed_, epoch_) : SequentialSampler().indices(n);
  size_t per_rank = drop_last_ ? n / num_replicas_ : (n + num_replicas_ - 1) / num_replicas_;
  size_t total = per_rank * num_replicas_;
  if (total > all.size()) {  // pad by repeating from the start
    size_t original = all.size();
    for (size_t i = 0; all.size() < total && original > 0; ++i) all.push_back(all[i % original]);
  }
  all.resize(total);
  std::vector<size_t> mine;
  for (size_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(std::move(options)), sampler_(std::move(sampler)) {
  OCTO_CHECK_VALUE(dataset_ != nullptr, "DataLoader: dataset is null");
  OCTO_CHECK_VALUE(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ",
                   options_.batch_size);
  OCTO_CHECK_VALUE(!(sampler_ && options_.shuffle),
                   "DataLoader: sampler option is mutually exclusive with shuffle");
  seed_ = options_.seed ? *options_.seed : default_generator().next_u64();
  pin_ = options_.pin_memory && cuda::is_available();
  if (!sampler_) {
    if (options_.shuffle) {
      sampler_ = std::make_shared<RandomSampler>(seed_);
    } else {
      sampler_ = std::make_shared<SequentialSampler>();
    }
  }
}

DataLoader::~DataLoader() { stop_workers(); }

size_t DataLoader::batches_of(size_t n) const {
  return options_.drop_last ? n / options_.batch_size
                            : (n + options_.batch_size - 1) / options_.batch_size;
}

size_t DataLoader::size() const { return batches_of(sampler_->indices(dataset_->size()).size()); }

void DataLoader::set_epoch(uint64_t epoch) {
  stop_workers();
  sampler_->set_epoch(epoch);
}

Example DataLoader::make_batch(size_t b) const {
  size_t begin = b * options_.batch_size;
  size_t end = std::min(order_.size(), begin + options_.batch_size);
  std::vector<size_t> idx(order_.begin() + static_cast<int64_t>(begin),
                          order_.begin() + static_cast<int64_t>(end));
  NoGradGuard no_grad;
  Example batch = dataset_->get_batch(idx);
  if (options_.transform) {
    // Augmentation randomness from (seed, epoch, batch): independent of worker scheduling.
    Generator gen(seed_ ^ (0x9E3779B97F4A7C15ull * (sampler_->epoch() + 1)));
    gen.set_state({gen.seed(), static_cast<uint64_t>(b) << 32});
    batch = options_.transform(std::move(batch), gen);
  }
  if (pin_) {
    if (batch.data.defined() && batch.data.device().is_cpu()) batch.data = batch.data.pin_memory();
    if (batch.target.defined() && batch.target.device().is_cpu()) {
      batch.target = batch.target.pin_memory();
    }
  }
  return batch;
}

void DataLoader::start_workers() {
  stopping_ = false;
  next_to_make_ = 0;
  next_to_return_ = 0;
  ready_.clear();
  errors_.clear();
  const size_t total = epoch_batches_;
  for (size_t w = 0; w < options_.num_workers; ++w) {
    workers_.emplace_back([this, total] {
      while (true) {
        size_t b;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          // Bounded prefetch: stay at most workers * prefetch_factor batches ahead.
          size_t ahead = options_.num_workers * std::max<size_t>(1, options_.prefetch_factor);
          cv_.wait(lock, [&] {
            return stopping_ || next_to_make_ >= total || next_to_make_ < next_to_return_ + ahead;
          });
          if (stopping_ || next_to_make_ >= total) return;
          b = next_to_make_++;
        }
        Example batch;
        std::exception_ptr error;
        try {
          batch = make_batch(b);
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (error) {
            errors_[b] = error;
          } else {
            ready_[b] = std::move(batch);
          }
        }
        cv_.notify_all();
      }
    });
  }
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  ready_.clear();
  errors_.clear();
}

namespace {

/// Rethrows `e` with "where" in front of its message, keeping octo's error type (a worker's
/// IOError stays an IOError) so that the caller learns where it came from. An exception of a
/// type octo does not know passes on as it is.
[[noreturn]] void rethrow_with_origin(const std::exception_ptr& e, const std::string& where) {
  const std::string message = where + detail::exception_message(e);
  detail::throw_same_subclass(e, message);
  try {
    std::rethrow_exception(e);
  } catch (const std::exception&) {
    throw Error(message);
  }
}

}  // namespace

Example DataLoader::next_batch(size_t b) {
  // Built only on failure: no string work per batch on the normal path.
  auto origin = [&](const char* thread) {
    return "DataLoader: batch " + std::to_string(b) + " of epoch " +
           std::to_string(sampler_->epoch()) + " (made " + thread + "): ";
  };
  if (options_.num_workers == 0) {
    try {
      return make_batch(b);
    } catch (...) {
      rethrow_with_origin(std::current_exception(), origin("on the calling thread"));
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  next_to_return_ = b;
  cv_.notify_all();
  cv_.wait(lock, [&] { return ready_.count(b) || errors_.count(b); });
  if (auto it = errors_.find(b); it != errors_.end()) {
    auto e = it->second;
    errors_.erase(it);
    lock.unlock();
    rethrow_with_origin(e, origin("in a worker thread"));
  }
  Example batch = std::move(ready_[b]);
  ready_.erase(b);
  next_to_return_ = b + 1;
  cv_.notify_all();
  return batch;
}

DataLoader::Iterator DataLoader::begin() {
  stop_workers();
  order_ = sampler_->indices(dataset_->size());
  epoch_batches_ = batches_of(order_.size());
  if (options_.num_workers > 0) start_workers();
  Iterator it(this, 0);
  if (epoch_batches_ > 0) it.current_ = next_batch(0);
  return it;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  if (index_ < loader_->epoch_batches_) current_ = loader_->next_batch(index_);
  return *this;
}

}  // namespace octo::data
