#include "stats/stats.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "core/rng.hpp"

namespace fp8rl::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// n^n, saturating at cap + 1 (the number of ordered resamples of n values).
uint64_t resample_count(size_t n, uint64_t cap) {
  uint64_t c = 1;
  for (size_t i = 0; i < n; ++i) {
    if (c > cap / std::max<uint64_t>(n, 1)) return cap + 1;
    c *= n;
  }
  return c;
}

// The mean of every ordered resample of x (n^n of them), in enumeration order.
std::vector<double> all_resample_means(std::span<const double> x) {
  const size_t n = x.size();
  const uint64_t count = resample_count(n, std::numeric_limits<uint32_t>::max());
  std::vector<double> out;
  out.reserve(static_cast<size_t>(count));
  std::vector<size_t> idx(n, 0);
  for (uint64_t k = 0; k < count; ++k) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += x[idx[i]];
    out.push_back(s / static_cast<double>(n));
    for (size_t i = 0; i < n; ++i) {  // next index tuple (odometer)
      if (++idx[i] < n) break;
      idx[i] = 0;
    }
  }
  return out;
}

// The mean of a resample of x drawn with rng.
double drawn_mean(std::span<const double> x, Rng& rng) {
  const size_t n = x.size();
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = std::min(n - 1, static_cast<size_t>(rng.uniform() * static_cast<double>(n)));
    s += x[j];
  }
  return s / static_cast<double>(n);
}

double tail(double level) {
  return (1 - level) / 2;
}

// The percentile interval of the bootstrap values (sorted here).
Interval percentile(std::vector<double>& values, double level) {
  values.erase(std::remove_if(values.begin(), values.end(),
                              [](double v) { return !std::isfinite(v); }),
               values.end());
  if (values.empty()) return {kNaN, kNaN};
  std::sort(values.begin(), values.end());
  return {quantile_sorted(values, tail(level)), quantile_sorted(values, 1 - tail(level))};
}

std::string count_words(int resamples, bool exact) {
  return exact ? "every one of " + std::to_string(resamples) + " resamples"
               : std::to_string(resamples) + " resamples";
}

// The bootstrap of stat(indices) over resamples of n items (indices drawn with replacement):
// every one of the n^n ordered resamples when there are at most opt.resamples, else that many
// drawn with opt.seed.
Estimate indexed(size_t n, double value, const BootstrapOptions& opt,
                 const std::function<double(const std::vector<size_t>&)>& stat, const char* what) {
  Estimate e;
  e.level = opt.level;
  e.n_a = e.n_b = static_cast<int>(n);
  e.value = value;
  const uint64_t cap = static_cast<uint64_t>(std::max(1, opt.resamples));
  std::vector<double> values;
  std::vector<size_t> idx(n, 0);
  if (n == 0) {
    e.ci = {kNaN, kNaN};
  } else if (const uint64_t count = resample_count(n, cap); opt.allow_exact && count <= cap) {
    values.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k) {
      values.push_back(stat(idx));
      for (size_t i = 0; i < n; ++i) {  // next index tuple (odometer)
        if (++idx[i] < n) break;
        idx[i] = 0;
      }
    }
    e.exact = true;
  } else {
    Rng rng(opt.seed);
    values.reserve(cap);
    for (uint64_t r = 0; r < cap; ++r) {
      for (size_t i = 0; i < n; ++i)
        idx[i] = std::min(n - 1, static_cast<size_t>(rng.uniform() * static_cast<double>(n)));
      values.push_back(stat(idx));
    }
  }
  e.resamples = static_cast<int>(values.size());
  if (!values.empty()) e.ci = percentile(values, opt.level);
  e.method = std::string("bootstrap percentile") + what + ", " + count_words(e.resamples, e.exact);
  return e;
}

Estimate one_group(std::span<const double> x, const BootstrapOptions& opt, const char* what) {
  return indexed(x.size(), mean(x), opt,
                 [&](const std::vector<size_t>& idx) {
                   double s = 0;
                   for (size_t i : idx) s += x[i];
                   return s / static_cast<double>(idx.size());
                 },
                 what);
}

// Two independent groups: the bootstrap of combine(mean(a*), mean(b*)).
Estimate two_groups(std::span<const double> a, std::span<const double> b,
                    const BootstrapOptions& opt, const std::function<double(double, double)>& combine,
                    const char* what) {
  Estimate e;
  e.level = opt.level;
  e.n_a = static_cast<int>(a.size());
  e.n_b = static_cast<int>(b.size());
  e.value = combine(mean(a), mean(b));
  const uint64_t cap = static_cast<uint64_t>(std::max(1, opt.resamples));
  std::vector<double> values;
  if (a.empty() || b.empty()) {
    e.ci = {kNaN, kNaN};
  } else {
    const uint64_t ca = resample_count(a.size(), cap), cb = resample_count(b.size(), cap);
    if (opt.allow_exact && ca <= cap && cb <= cap && ca * cb <= cap) {
      const std::vector<double> ma = all_resample_means(a), mb = all_resample_means(b);
      values.reserve(ma.size() * mb.size());
      for (double x : ma)
        for (double y : mb) values.push_back(combine(x, y));
      e.exact = true;
    } else {
      Rng rng(opt.seed);
      values.reserve(cap);
      for (uint64_t r = 0; r < cap; ++r) {
        const double x = drawn_mean(a, rng);
        values.push_back(combine(x, drawn_mean(b, rng)));
      }
    }
  }
  e.resamples = static_cast<int>(values.size());
  if (!values.empty()) e.ci = percentile(values, opt.level);
  e.method = std::string("bootstrap percentile") + what + ", " + count_words(e.resamples, e.exact);
  return e;
}

std::vector<double> pairwise(std::span<const double> a, std::span<const double> b,
                             const std::function<double(double, double)>& f) {
  std::vector<double> d;
  const size_t n = std::min(a.size(), b.size());
  d.reserve(n);
  for (size_t i = 0; i < n; ++i) d.push_back(f(a[i], b[i]));
  return d;
}

double sample_var(std::span<const double> x) {
  const double s = sample_sd(x);
  return s * s;
}

// Welch–Satterthwaite degrees of freedom from the two groups' variances of the mean (va, vb)
// and sizes; the pooled na + nb - 2 when both variances are zero.
double welch_df(double va, double vb, size_t na, size_t nb) {
  if (!(va + vb > 0)) return static_cast<double>(na + nb - 2);
  return (va + vb) * (va + vb) /
         (va * va / static_cast<double>(na - 1) + vb * vb / static_cast<double>(nb - 1));
}

}  // namespace

double mean(std::span<const double> x) {
  if (x.empty()) return kNaN;
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

double sample_sd(std::span<const double> x) {
  if (x.size() < 2) return kNaN;
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

double quantile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return kNaN;
  const double h = (static_cast<double>(sorted.size()) - 1) * std::clamp(p, 0.0, 1.0);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : kNaN;
  // Acklam's rational approximation (relative error 1.15e-9), then one Halley step on erfc.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double plow = 0.02425;
  double x;
  if (p < plow) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - plow) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = normal_cdf(x) - p;
  const double u = e * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double incomplete_beta(double a, double b, double x) {
  if (!(x > 0)) return 0;
  if (!(x < 1)) return 1;
  // The continued fraction (modified Lentz), on the side where it converges fast.
  const auto fraction = [](double p, double q, double y) {
    const double tiny = 1e-300;
    double c = 1, d = 1 - (p + q) * y / (p + 1);
    if (std::fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 10000; ++m) {
      const double m2 = 2.0 * m;
      double aa = m * (q - m) * y / ((p + m2 - 1) * (p + m2));
      d = 1 + aa * d;
      if (std::fabs(d) < tiny) d = tiny;
      c = 1 + aa / c;
      if (std::fabs(c) < tiny) c = tiny;
      d = 1 / d;
      h *= d * c;
      aa = -(p + m) * (p + q + m) * y / ((p + m2) * (p + m2 + 1));
      d = 1 + aa * d;
      if (std::fabs(d) < tiny) d = tiny;
      c = 1 + aa / c;
      if (std::fabs(c) < tiny) c = tiny;
      d = 1 / d;
      const double del = d * c;
      h *= del;
      if (std::fabs(del - 1) < 1e-16) break;
    }
    return h;
  };
  const double ln_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                          b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(ln_front) * fraction(a, b, x) / a;
  return 1 - std::exp(ln_front) * fraction(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  if (df > 1e8) return normal_cdf(t);
  const double tail_p = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail_p : tail_p;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return kNaN;
  if (p == 0.5) return 0;
  if (df > 1e8) return normal_quantile(p);
  // Bracket, then bisect to the last bit (a few hundred evaluations at most).
  double lo = -1, hi = 1;
  while (student_t_cdf(lo, df) > p) lo *= 2;
  while (student_t_cdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 300 && hi - lo > 1e-15 * std::max(1.0, std::fabs(lo)); ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

Estimate bootstrap_mean(std::span<const double> x, const BootstrapOptions& opt) {
  return one_group(x, opt, "");
}

Estimate bootstrap_mean_difference(std::span<const double> a, std::span<const double> b,
                                   const BootstrapOptions& opt) {
  return two_groups(a, b, opt, [](double x, double y) { return x - y; }, ", groups resampled apart");
}

Estimate bootstrap_paired_difference(std::span<const double> a, std::span<const double> b,
                                     const BootstrapOptions& opt) {
  const std::vector<double> d = pairwise(a, b, [](double x, double y) { return x - y; });
  return one_group(d, opt, ", paired by seed");
}

Estimate bootstrap_ratio_of_means(std::span<const double> a, std::span<const double> b,
                                  const BootstrapOptions& opt) {
  return two_groups(
      a, b, opt, [](double x, double y) { return y == 0 ? kNaN : x / y; },
      ", groups resampled apart");
}

Estimate bootstrap_paired_ratio(std::span<const double> a, std::span<const double> b,
                                const BootstrapOptions& opt) {
  const size_t n = std::min(a.size(), b.size());
  const double mb = mean(b.first(n));
  return indexed(n, mb == 0 ? kNaN : mean(a.first(n)) / mb, opt,
                 [&](const std::vector<size_t>& idx) {
                   double sa = 0, sb = 0;
                   for (size_t i : idx) sa += a[i], sb += b[i];
                   return sb == 0 ? kNaN : sa / sb;
                 },
                 ", paired by seed");
}

Estimate welch_difference(std::span<const double> a, std::span<const double> b, double level) {
  Estimate e;
  e.level = level;
  e.n_a = static_cast<int>(a.size());
  e.n_b = static_cast<int>(b.size());
  e.value = mean(a) - mean(b);
  e.method = "Welch's t";
  e.ci = {kNaN, kNaN};
  if (a.size() < 2 || b.size() < 2) return e;
  const double va = sample_var(a) / static_cast<double>(a.size());
  const double vb = sample_var(b) / static_cast<double>(b.size());
  const double se = std::sqrt(va + vb);
  e.df = welch_df(va, vb, a.size(), b.size());
  const double t = student_t_quantile(1 - tail(level), e.df);
  e.ci = {e.value - t * se, e.value + t * se};
  return e;
}

Estimate paired_t_difference(std::span<const double> a, std::span<const double> b, double level) {
  const std::vector<double> d = pairwise(a, b, [](double x, double y) { return x - y; });
  Estimate e;
  e.level = level;
  e.n_a = e.n_b = static_cast<int>(d.size());
  e.value = mean(d);
  e.method = "paired t";
  e.ci = {kNaN, kNaN};
  if (d.size() < 2) return e;
  e.df = static_cast<double>(d.size() - 1);
  const double se = sample_sd(d) / std::sqrt(static_cast<double>(d.size()));
  const double t = student_t_quantile(1 - tail(level), e.df);
  e.ci = {e.value - t * se, e.value + t * se};
  return e;
}

Estimate ratio_delta_method(std::span<const double> a, std::span<const double> b, double level) {
  Estimate e;
  e.level = level;
  e.n_a = static_cast<int>(a.size());
  e.n_b = static_cast<int>(b.size());
  const double ma = mean(a), mb = mean(b);
  e.value = mb == 0 ? kNaN : ma / mb;
  e.method = "delta method on the log ratio, Welch's t";
  e.ci = {kNaN, kNaN};
  if (a.size() < 2 || b.size() < 2 || !(ma > 0) || !(mb > 0)) return e;
  // var(log mean) ≈ var / (n mean²) for each group.
  const double va = sample_var(a) / (static_cast<double>(a.size()) * ma * ma);
  const double vb = sample_var(b) / (static_cast<double>(b.size()) * mb * mb);
  const double se = std::sqrt(va + vb);
  e.df = welch_df(va, vb, a.size(), b.size());
  const double t = student_t_quantile(1 - tail(level), e.df);
  e.ci = {e.value * std::exp(-t * se), e.value * std::exp(t * se)};
  return e;
}

int64_t seeds_needed(double sd, double d, bool paired, double alpha, double power) {
  if (!(sd > 0) || !std::isfinite(sd) || !(std::fabs(d) > 0) || !std::isfinite(d)) return -1;
  const double z = normal_quantile(1 - alpha / 2) + normal_quantile(power);
  const double n = (paired ? 1.0 : 2.0) * z * z * sd * sd / (d * d);
  if (n > 1e12) return -1;
  // A hair below an integer is that integer (rounding of the quantiles).
  return std::max<int64_t>(2, static_cast<int64_t>(std::ceil(n - 1e-9)));
}

double detectable_difference(double sd, double n, bool paired, double alpha, double power) {
  if (!(sd >= 0) || !(n > 0)) return kNaN;
  const double z = normal_quantile(1 - alpha / 2) + normal_quantile(power);
  return z * sd * std::sqrt((paired ? 1.0 : 2.0) / n);
}

}  // namespace fp8rl::stats
