#include "aggregator/core/combining_queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace tandem::aggregator {
namespace {

struct Item {
  int key = 0;    // a Take may batch by key
  int value = 0;  // input
  int result = -1;
  int runs = 0;  // how many batches ran this item
  bool done = false;
};

// Every item runs exactly once, batches never overlap, and each caller
// returns with its own result set.
TEST(CombiningQueue, EveryItemRunsOnceAndBatchesNeverOverlap) {
  CombiningQueue<Item> queue;
  std::atomic<int> running{0}, overlaps{0}, batches{0}, largest{0};
  constexpr int kThreads = 8, kPerThread = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Item mine;
        mine.value = t * kPerThread + i;
        queue.Submit(&mine, CombiningQueue<Item>::TakeAll, [&](const std::vector<Item*>& batch) {
          if (running.fetch_add(1) != 0) ++overlaps;
          ++batches;
          int seen = largest.load();
          while (static_cast<int>(batch.size()) > seen &&
                 !largest.compare_exchange_weak(seen, static_cast<int>(batch.size()))) {
          }
          for (Item* it : batch) {
            it->result = 2 * it->value;
            ++it->runs;
          }
          running.fetch_sub(1);
        });
        if (mine.result != 2 * mine.value || mine.runs != 1) ++wrong;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GE(batches.load(), 1);
  EXPECT_LE(batches.load(), kThreads * kPerThread);
  EXPECT_LE(largest.load(), kThreads);  // at most one queued item per caller
}

// Calls queued behind a running batch are served by the next batch, all at
// once; a Take that batches by key leaves the other keys for later batches.
TEST(CombiningQueue, CallsQueuedBehindABatchShareTheNextOneByKey) {
  CombiningQueue<Item> queue;
  absl::Mutex mu;
  std::vector<std::vector<int>> batch_keys;  // guarded by mu
  std::atomic<int> submitted{0};
  constexpr int kWaiters = 6;
  const auto take_head_key = [](std::vector<Item*>* q) {
    const int key = q->front()->key;
    std::vector<Item*> batch, rest;
    for (Item* it : *q) (it->key == key ? batch : rest).push_back(it);
    *q = std::move(rest);
    return batch;
  };
  const auto run = [&](const std::vector<Item*>& batch) {
    std::vector<int> keys;
    for (Item* it : batch) {
      keys.push_back(it->key);
      it->result = it->key;
    }
    {
      absl::MutexLock lock(&mu);
      batch_keys.push_back(keys);
    }
    // The first batch holds the queue until every waiter has submitted.
    if (batch.size() == 1 && batch[0]->value == -1) {
      while (submitted.load() < kWaiters) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // into Submit
    }
  };
  std::thread first([&] {
    Item mine;
    mine.value = -1;
    mine.key = 9;
    queue.Submit(&mine, take_head_key, run);
  });
  // Wait until the first batch runs, then queue three items of key 0 and
  // three of key 1 behind it.
  while (true) {
    {
      absl::MutexLock lock(&mu);
      if (!batch_keys.empty()) break;
    }
    std::this_thread::yield();
  }
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      Item mine;
      mine.key = i % 2;
      mine.value = i;
      ++submitted;
      queue.Submit(&mine, take_head_key, run);
      EXPECT_EQ(mine.result, mine.key);
    });
  }
  first.join();
  for (std::thread& th : waiters) th.join();
  absl::MutexLock lock(&mu);
  // Normally exactly two batches follow the first, one per key (a waiter
  // descheduled for the whole 200 ms would make a batch of its own).
  ASSERT_GE(batch_keys.size(), 3u);
  EXPECT_EQ(batch_keys[0], std::vector<int>{9});
  size_t items = 0, largest = 0;
  for (size_t b = 1; b < batch_keys.size(); ++b) {
    items += batch_keys[b].size();
    largest = std::max(largest, batch_keys[b].size());
    for (int k : batch_keys[b]) EXPECT_EQ(k, batch_keys[b][0]) << "batch " << b;
  }
  EXPECT_EQ(items, static_cast<size_t>(kWaiters));
  EXPECT_GE(largest, 2u) << "the calls queued behind the first batch were not combined";
}

}  // namespace
}  // namespace tandem::aggregator
