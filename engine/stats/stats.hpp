// Statistics for comparing groups of runs (seeds of one configuration against seeds of
// another): means and standard deviations, the normal and Student t distributions, bootstrap
// percentile intervals (seeded, or exact by enumerating every resample when there are few),
// t-based intervals for comparison (Welch and paired), ratio intervals, and how many seeds a
// difference of a given size needs (power, normal approximation).
//
// Plain C++ (core only), deterministic: the same inputs and seed give the same bits. The CLI
// (`fp8rl compare`, `fp8rl report`) and the studio use it without the run loop.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8rl::stats {

struct Interval {
  double lo = 0, hi = 0;
  bool contains(double x) const { return lo <= x && x <= hi; }
};

// The arithmetic mean (NaN for no values).
double mean(std::span<const double> x);
// The sample standard deviation (divisor n − 1; NaN for fewer than two values).
double sample_sd(std::span<const double> x);
// The p-quantile of sorted values, linear between order statistics (R's type 7, NumPy's
// default): sorted[(n − 1) p] interpolated. NaN for no values.
double quantile_sorted(std::span<const double> sorted, double p);

// The standard normal distribution.
double normal_cdf(double x);
double normal_quantile(double p);  // p in (0, 1)
// Student's t distribution with df > 0 degrees of freedom (df need not be an integer).
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);  // p in (0, 1)
// The regularized incomplete beta function I_x(a, b).
double incomplete_beta(double a, double b, double x);

// How a bootstrap resamples: `resamples` draws with `seed`, unless the number of distinct
// ordered resamples is at most `resamples`, when every one of them is enumerated (exact,
// independent of the seed).
struct BootstrapOptions {
  int resamples = 10000;
  uint64_t seed = 20261125;
  double level = 0.95;
  bool allow_exact = true;  // false: always draw (tests of the drawn bootstrap)
};

// A point estimate and its interval, with how it was obtained.
struct Estimate {
  double value = 0;
  Interval ci;
  double level = 0.95;
  int n_a = 0, n_b = 0;  // values in each group (pairs: both the number of pairs)
  bool exact = false;    // bootstrap by enumeration of every resample
  int resamples = 0;     // bootstrap resamples used (enumerated or drawn)
  double df = 0;         // t-based: degrees of freedom
  std::string method;    // in words, e.g. "bootstrap percentile, paired by seed, 10000 resamples"
};

// Percentile interval of the mean of x.
Estimate bootstrap_mean(std::span<const double> x, const BootstrapOptions& opt = {});
// mean(a) − mean(b), each group resampled on its own.
Estimate bootstrap_mean_difference(std::span<const double> a, std::span<const double> b,
                                   const BootstrapOptions& opt = {});
// mean(a − b) over pairs (a[i], b[i]) resampled together (a and b the same length).
Estimate bootstrap_paired_difference(std::span<const double> a, std::span<const double> b,
                                     const BootstrapOptions& opt = {});
// mean(a) / mean(b), each group resampled on its own (resamples with mean(b) = 0 are left out).
Estimate bootstrap_ratio_of_means(std::span<const double> a, std::span<const double> b,
                                  const BootstrapOptions& opt = {});
// mean(a) / mean(b) over pairs (a[i], b[i]) resampled together.
Estimate bootstrap_paired_ratio(std::span<const double> a, std::span<const double> b,
                                const BootstrapOptions& opt = {});

// Welch's t interval of mean(a) − mean(b) (unequal variances, Welch–Satterthwaite df).
Estimate welch_difference(std::span<const double> a, std::span<const double> b, double level = 0.95);
// The paired t interval of mean(a − b).
Estimate paired_t_difference(std::span<const double> a, std::span<const double> b,
                             double level = 0.95);
// mean(a) / mean(b) by the delta method on the log scale with Welch's df (t-based).
Estimate ratio_delta_method(std::span<const double> a, std::span<const double> b,
                            double level = 0.95);

// Seeds per group needed to detect a true difference d of means at two-sided significance
// alpha with the given power, for an outcome whose standard deviation per seed is sd:
// n = 2 (z_{1−α/2} + z_power)² sd² / d² for two independent groups, or (paired: sd is that of
// the per-seed differences) n = (z_{1−α/2} + z_power)² sd² / d². Normal approximation; rounded
// up, at least 2. Returns −1 when sd or d is not positive and finite.
int64_t seeds_needed(double sd, double d, bool paired, double alpha = 0.05, double power = 0.8);
// The smallest true difference detectable with n seeds per group (same approximation).
double detectable_difference(double sd, double n, bool paired, double alpha = 0.05,
                             double power = 0.8);

}  // namespace fp8rl::stats
