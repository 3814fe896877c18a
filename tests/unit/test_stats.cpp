// The statistics of run groups against values computed independently: R's t.test on its
// `sleep` data (Welch and paired, as printed by R), Student t and normal quantiles from
// tables, the exact bootstrap distribution of small samples enumerated resample by resample
// (reference values from a separate enumeration in Python: itertools.product over the
// indices, NumPy's default linear percentile), quantiles from mpmath at 30 digits, the Monte Carlo bootstrap converging to it, and
// the textbook sample size of a two-group comparison.
#include <QtTest>

#include <cmath>
#include <vector>

#include "stats/stats.hpp"

namespace st = fp8rl::stats;

namespace {

// R's datasets::sleep: extra sleep (hours) of 10 patients under two drugs.
const std::vector<double> kSleep1 = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
const std::vector<double> kSleep2 = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};

bool near(double a, double b, double tol) {
  return std::fabs(a - b) <= tol;
}

}  // namespace

class TestStats : public QObject {
  Q_OBJECT
 private slots:
  void meanSdQuantile() {
    const std::vector<double> x = {2, 4, 4, 4, 5, 5, 7, 9};
    QCOMPARE(st::mean(x), 5.0);
    QVERIFY(near(st::sample_sd(x), std::sqrt(32.0 / 7), 1e-15));
    QVERIFY(std::isnan(st::sample_sd(std::vector<double>{1})));
    const std::vector<double> s = {1, 2, 3, 4};
    QCOMPARE(st::quantile_sorted(s, 0.0), 1.0);
    QCOMPARE(st::quantile_sorted(s, 1.0), 4.0);
    QCOMPARE(st::quantile_sorted(s, 0.5), 2.5);
    QCOMPARE(st::quantile_sorted(s, 0.25), 1.75);  // numpy.percentile([1,2,3,4], 25)
  }

  void distributionsAgainstTables() {
    QVERIFY(near(st::normal_quantile(0.975), 1.959963984540054, 1e-12));
    QVERIFY(near(st::normal_quantile(0.8), 0.8416212335729143, 1e-12));
    QVERIFY(near(st::normal_quantile(1e-10), -6.361340902404056, 1e-9));
    QVERIFY(near(st::normal_cdf(1.959963984540054), 0.975, 1e-14));
    // Student t 97.5 % points, to 16 digits from mpmath (30-digit betainc and findroot).
    QVERIFY(near(st::student_t_quantile(0.975, 1), 12.70620473617471, 1e-9));
    QVERIFY(near(st::student_t_quantile(0.975, 4), 2.776445105197799, 1e-12));
    QVERIFY(near(st::student_t_quantile(0.975, 9), 2.262157162798206, 1e-12));
    QVERIFY(near(st::student_t_quantile(0.975, 30), 2.042272456301238, 1e-12));
    QVERIFY(near(st::student_t_quantile(0.025, 9), -2.262157162798206, 1e-12));
    QVERIFY(near(st::student_t_cdf(2.262157162798206, 9), 0.975, 1e-13));
    // I_x(a, b) = x^a for b = 1.
    QVERIFY(near(st::incomplete_beta(2.5, 1, 0.3), std::pow(0.3, 2.5), 1e-14));
  }

  void welchAgainstR() {
    // R: t.test(extra ~ group, data = sleep)
    //   t = -1.8608, df = 17.776, 95 percent confidence interval: -3.3654832  0.2054832
    const st::Estimate e = st::welch_difference(kSleep1, kSleep2);
    QVERIFY(near(e.value, 0.75 - 2.33, 1e-12));
    QVERIFY2(near(e.df, 17.776, 5e-4), qPrintable(QString::number(e.df, 'g', 10)));
    QVERIFY2(near(e.ci.lo, -3.3654832, 5e-7), qPrintable(QString::number(e.ci.lo, 'g', 10)));
    QVERIFY2(near(e.ci.hi, 0.2054832, 5e-7), qPrintable(QString::number(e.ci.hi, 'g', 10)));
  }

  void pairedTAgainstR() {
    // R: with(sleep, t.test(extra[group == 1], extra[group == 2], paired = TRUE))
    //   t = -4.0621, df = 9, 95 percent confidence interval: -2.4598858 -0.7001142
    const st::Estimate e = st::paired_t_difference(kSleep1, kSleep2);
    QCOMPARE(e.df, 9.0);
    QVERIFY(near(e.value, -1.58, 1e-12));
    QVERIFY2(near(e.ci.lo, -2.4598858, 5e-7), qPrintable(QString::number(e.ci.lo, 'g', 10)));
    QVERIFY2(near(e.ci.hi, -0.7001142, 5e-7), qPrintable(QString::number(e.ci.hi, 'g', 10)));
  }

  void exactBootstrapByEnumeration() {
    // Three seeds per group: 27 × 27 = 729 resamples, every one enumerated.
    const std::vector<double> a = {0.61, 0.55, 0.70}, b = {0.58, 0.66, 0.52};
    const st::Estimate d = st::bootstrap_mean_difference(a, b);
    QVERIFY(d.exact);
    QCOMPARE(d.resamples, 729);
    QVERIFY(near(d.value, (1.86 - 1.76) / 3, 1e-15));
    QVERIFY(near(d.ci.lo, -0.06333333333333324, 1e-12));
    QVERIFY(near(d.ci.hi, 0.1299999999999999, 1e-12));
    const st::Estimate r = st::bootstrap_ratio_of_means(a, b);
    QVERIFY(r.exact);
    QVERIFY(near(r.ci.lo, 0.9000000000000001, 1e-12));
    QVERIFY(near(r.ci.hi, 1.2407407407407405, 1e-12));
    const st::Estimate p = st::bootstrap_paired_difference(a, b);
    QVERIFY(p.exact);
    QCOMPARE(p.resamples, 27);
    QVERIFY(near(p.ci.lo, -0.07966666666666665, 1e-12));
    QVERIFY(near(p.ci.hi, 0.14749999999999985, 1e-12));
    const st::Estimate m = st::bootstrap_mean(a);
    QVERIFY(near(m.ci.lo, 0.563, 1e-12));
    QVERIFY(near(m.ci.hi, 0.6804999999999999, 1e-12));
    // Four values: 256 resamples; a 90 % interval too.
    const std::vector<double> c = {1, 2, 4, 8};
    const st::Estimate m95 = st::bootstrap_mean(c);
    QCOMPARE(m95.resamples, 256);
    QVERIFY(near(m95.ci.lo, 1.5, 1e-12) && near(m95.ci.hi, 6.5, 1e-12));
    st::BootstrapOptions ninety;
    ninety.level = 0.90;
    const st::Estimate m90 = st::bootstrap_mean(c, ninety);
    QVERIFY(near(m90.ci.lo, 1.75, 1e-12) && near(m90.ci.hi, 6.0625, 1e-12));
    QVERIFY(m95.method.find("every one of 256 resamples") != std::string::npos);
  }

  void monteCarloBootstrapIsSeededAndConverges() {
    // Fewer draws than resamples: drawn, deterministic for a seed, near the exact interval.
    const std::vector<double> a = {0.61, 0.55, 0.70}, b = {0.58, 0.66, 0.52};
    st::BootstrapOptions opt;
    opt.resamples = 500;
    const st::Estimate one = st::bootstrap_mean_difference(a, b, opt);
    const st::Estimate two = st::bootstrap_mean_difference(a, b, opt);
    QVERIFY(!one.exact);
    QCOMPARE(one.ci.lo, two.ci.lo);
    QCOMPARE(one.ci.hi, two.ci.hi);
    opt.resamples = 200000;
    opt.allow_exact = false;  // drawn, though enumerating would be cheaper
    const st::Estimate many = st::bootstrap_mean_difference(a, b, opt);
    QVERIFY(!many.exact);
    QVERIFY2(near(many.ci.lo, -0.06333333333333324, 0.004), qPrintable(QString::number(many.ci.lo)));
    QVERIFY2(near(many.ci.hi, 0.1299999999999999, 0.004), qPrintable(QString::number(many.ci.hi)));
    // Another seed draws other resamples (few draws: the interval moves).
    opt.resamples = 300;
    const st::Estimate seed1 = st::bootstrap_mean_difference(a, b, opt);
    opt.seed = 7;
    const st::Estimate seed7 = st::bootstrap_mean_difference(a, b, opt);
    QVERIFY(seed7.ci.lo != seed1.ci.lo || seed7.ci.hi != seed1.ci.hi);
  }

  void ratioDeltaMethod() {
    // Step times of two groups: ratio of means with the log-scale delta method.
    const std::vector<double> fast = {0.60, 0.62, 0.61, 0.63, 0.59};
    const std::vector<double> slow = {1.00, 0.98, 1.02, 1.01, 0.99};
    const st::Estimate r = st::ratio_delta_method(fast, slow);
    QVERIFY(near(r.value, 0.61 / 1.0, 1e-12));
    QVERIFY(r.ci.lo < 0.61 && r.ci.hi > 0.61);
    // Computed by hand: var(log) = s²/(n m²) summed, Welch df.
    const double va = 0.00025 / (5 * 0.61 * 0.61), vb = 0.00025 / (5 * 1.0);
    const double df = (va + vb) * (va + vb) / (va * va / 4 + vb * vb / 4);
    const double t = st::student_t_quantile(0.975, df);
    QVERIFY(near(r.ci.lo, 0.61 * std::exp(-t * std::sqrt(va + vb)), 1e-12));
    QVERIFY(near(r.ci.hi, 0.61 * std::exp(t * std::sqrt(va + vb)), 1e-12));
    const st::Estimate b = st::bootstrap_ratio_of_means(fast, slow);
    QVERIFY(b.ci.lo > 0.59 && b.ci.hi < 0.63);
  }

  void seedsNeeded() {
    // Effect size 0.5 (d = 0.5 sd), α 0.05, power 0.8: 63 per group by the normal
    // approximation (64 with the t correction, Cohen's table).
    QCOMPARE(st::seeds_needed(1.0, 0.5, false), int64_t{63});
    QCOMPARE(st::seeds_needed(2.0, 1.0, false), int64_t{63});
    // Paired: half as many.
    QCOMPARE(st::seeds_needed(1.0, 0.5, true), int64_t{32});
    QCOMPARE(st::seeds_needed(0.0, 0.5, false), int64_t{-1});
    // The detectable difference with 63 seeds is just under 0.5 sd.
    QVERIFY(near(st::detectable_difference(1.0, 63, false), 0.4991, 1e-3));
  }

  void degenerateInputs() {
    const std::vector<double> one = {0.5}, none;
    QVERIFY(std::isnan(st::welch_difference(one, one).ci.lo));
    QVERIFY(std::isnan(st::bootstrap_mean_difference(none, one).ci.lo));
    const st::Estimate same = st::bootstrap_mean_difference(one, one);
    QCOMPARE(same.ci.lo, 0.0);
    QCOMPARE(same.ci.hi, 0.0);
    const std::vector<double> flat = {0.5, 0.5, 0.5};
    const st::Estimate w = st::welch_difference(flat, flat);
    QCOMPARE(w.ci.lo, 0.0);
    QCOMPARE(w.ci.hi, 0.0);
  }
};

QTEST_APPLESS_MAIN(TestStats)
#include "test_stats.moc"
