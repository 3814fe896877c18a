// Core: errors carry what and where (and read without the where); parallel_for covers every index,
// nested and from several threads at once, and rethrows; an LRU cache forgets the least recently
// used entry.
#include <QtTest>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/lru_cache.hpp"
#include "core/parallel.hpp"

class TestCore : public QObject {
  Q_OBJECT
 private slots:
  void errorCarriesWhatStatusAndWhere() {
    const int line = __LINE__ + 2;
    try {
      throw fp8rl::Error("cublasLtMatmul failed", "CUBLAS_STATUS_NOT_SUPPORTED");
    } catch (const fp8rl::Error& e) {
      QCOMPARE(QString::fromStdString(e.message()), QStringLiteral("cublasLtMatmul failed"));
      QCOMPARE(QString::fromStdString(e.status()), QStringLiteral("CUBLAS_STATUS_NOT_SUPPORTED"));
      QCOMPARE(e.line(), static_cast<unsigned>(line));
      const QString what = QString::fromUtf8(e.what());
      QVERIFY2(what.contains("[CUBLAS_STATUS_NOT_SUPPORTED]"), qPrintable(what));
      QVERIFY2(what.contains(QStringLiteral("test_core.cpp:%1").arg(line)), qPrintable(what));
      // What a user reads: the message and the status, not our file and line.
      QCOMPARE(QString::fromStdString(fp8rl::error_text(e)),
               QStringLiteral("cublasLtMatmul failed [CUBLAS_STATUS_NOT_SUPPORTED]"));
    }
    QCOMPARE(fp8rl::error_text(fp8rl::Error("no such file")), std::string("no such file"));
    QCOMPARE(fp8rl::error_text(std::runtime_error("plain")), std::string("plain"));
  }

  void lruCacheEvictsTheLeastRecentlyUsed() {
    fp8rl::LruCache<int, std::unique_ptr<std::string>> cache(3);
    for (int k : {1, 2, 3}) cache.insert(k, std::make_unique<std::string>(std::to_string(k)));
    QCOMPARE(cache.size(), size_t{3});
    QVERIFY(cache.find(1) != nullptr);  // 1 is now the most recent; 2 the least
    cache.insert(4, std::make_unique<std::string>("4"));
    QCOMPARE(cache.size(), size_t{3});
    QCOMPARE(cache.evictions(), uint64_t{1});
    QVERIFY(cache.find(2) == nullptr);
    QCOMPARE(**cache.find(1), std::string("1"));
    QCOMPARE(**cache.find(3), std::string("3"));
    QCOMPARE(**cache.find(4), std::string("4"));
    // Order now 4, 3, 1 (most recent first): the next insert evicts 1.
    std::string& five = *cache.insert(5, std::make_unique<std::string>("5"));
    QCOMPARE(five, std::string("5"));
    QVERIFY(cache.find(1) == nullptr);
    QCOMPARE(cache.evictions(), uint64_t{2});
    QVERIFY_THROWS_EXCEPTION(fp8rl::Error, cache.insert(5, nullptr));
    cache.clear();
    QCOMPARE(cache.size(), size_t{0});
    QVERIFY(cache.find(5) == nullptr);
    QVERIFY_THROWS_EXCEPTION(fp8rl::Error, (fp8rl::LruCache<int, int>(0)));
  }

  void checkThrowsOnlyWhenFalse() {
    fp8rl::check(true, "never");
    QVERIFY_THROWS_EXCEPTION(fp8rl::Error, fp8rl::check(false, "K must be a multiple of 16"));
  }

  void parallelForCoversEveryIndexOnce() {
    for (int64_t n : {0, 1, 7, 1000, 100001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      fp8rl::parallel_for(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) QCOMPARE(h.load(), 1);
    }
  }

  void parallelForRethrows() {
    QVERIFY_THROWS_EXCEPTION(fp8rl::Error, fp8rl::parallel_for(1000, 1, [](int64_t, int64_t e) {
                               if (e == 1000) throw fp8rl::Error("chunk failed");
                             }));
  }

  // The workers are shared: a parallel_for inside a chunk, and parallel_fors from several
  // threads at once, still cover every index once with the same chunks (they run where they
  // are called when the workers are taken).
  void parallelForNestsAndRunsFromManyThreads() {
    auto cover = [](int64_t n) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n * n));
      fp8rl::parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          fp8rl::parallel_for(n, 1, [&](int64_t b2, int64_t e2) {
            for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * n + j)]++;
          });
      });
      for (auto& h : hits)
        if (h.load() != 1) return false;
      return true;
    };
    QVERIFY(cover(37));
    std::atomic<int> good{0};
    {
      std::vector<std::jthread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
          for (int k = 0; k < 50; ++k) good += cover(11 + k % 5);
        });
    }
    QCOMPARE(good.load(), 200);
  }

  void bf16RoundsToNearestEven() {
    using fp8rl::bf16_to_float;
    using fp8rl::float_to_bf16;
    QCOMPARE(float_to_bf16(1.0f).bits, uint16_t{0x3f80});
    // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
    QCOMPARE(float_to_bf16(1.0f + 0x1p-8f).bits, uint16_t{0x3f80});
    QCOMPARE(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f).bits, uint16_t{0x3f81});
    QCOMPARE(float_to_bf16(-INFINITY).bits, uint16_t{0xff80});
    QCOMPARE(float_to_bf16(NAN).bits, uint16_t{0x7fff});
    QCOMPARE(bf16_to_float(fp8rl::bf16{0x4049}), 3.140625f);
  }
};

QTEST_APPLESS_MAIN(TestCore)
#include "test_core.moc"
