// The communicator of this process (engine/dist): run plain (one process) and under
// `mpirun -np 3` (CTest dist_communicator*). Every collective against what the ranks sent, sums
// bit-identical on every rank, uneven shares, messages of different sizes per rank; and the
// launcher's command line (contract/rank_launch). Plain C++ (no Qt): prints each failed check
// with its line and exits 1.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "contract/rank_launch.hpp"
#include "dist/communicator.hpp"

namespace {

int g_failed = 0, g_checks = 0;
int g_rank = 0;

void expect(bool ok, const char* what, int line) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::fprintf(stderr, "rank %d: FAIL line %d: %s\n", g_rank, line, what);
  }
}
#define EXPECT(cond) expect((cond), #cond, __LINE__)

void shares() {
  for (int size = 1; size <= 8; ++size)
    for (int64_t n = 0; n <= 40; ++n) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const auto [b, e] = fp8rl::share_of(n, r, size);
        EXPECT(b == next && e >= b && e - b <= n / size + 1 && e - b >= n / size);
        next = e;
      }
      EXPECT(next == n);
    }
}

void launch_command() {
  using fp8rl::ranks_command;
  EXPECT(ranks_command(1, "", "/bin/fp8rl", {"train"}) ==
         (std::vector<std::string>{"/bin/fp8rl", "train"}));
  const auto two = ranks_command(2, "", "/bin/fp8rl", {"worker", "--db", "x"});
  EXPECT(two.size() >= 9 && two[1] == "-np" && two[2] == "2" && two[3] == "--oversubscribe");
  EXPECT(two[two.size() - 4] == "/bin/fp8rl" && two.back() == "x");
  const auto hosts = ranks_command(4, "hosts", "/bin/fp8rl", {"train"});
  EXPECT(hosts[3] == "--hostfile" && hosts[4] == "hosts");
  bool root_option = false;
  for (const auto& a : hosts) root_option |= a == "--allow-run-as-root";
  EXPECT(root_option == (::geteuid() == 0));
  bool threw = false;
  try {
    ranks_command(0, "", "/bin/fp8rl", {});
  } catch (const fp8rl::Error& e) {
    threw = std::string(e.what()).find("ranks must be at least 1") != std::string::npos;
  }
  EXPECT(threw);
}

void collectives(fp8rl::Communicator& comm) {
  const int R = comm.size(), r = comm.rank();
  EXPECT(r >= 0 && r < R && R == fp8rl::launched_ranks());
  const uint64_t bytes0 = comm.bytes_communicated();

  // Sums of values that round: every rank must end with the same bits.
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.1f * static_cast<float>(i + 1) / (r + 3.0f);
  comm.all_reduce_sum(f.data(), f.size());
  double worst = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    double want = 0;
    for (int k = 0; k < R; ++k) want += 0.1f * static_cast<float>(i + 1) / (k + 3.0f);
    worst = std::max(worst, std::abs(f[i] - want) / want);
  }
  EXPECT(worst < 1e-6);
  std::vector<float> all(f.size() * static_cast<size_t>(R));
  comm.all_gather(f.data(), f.size() * sizeof(float), all.data());
  for (int k = 0; k < R; ++k)
    EXPECT(std::memcmp(all.data() + k * f.size(), f.data(), f.size() * sizeof(float)) == 0);

  double d[3] = {1.0 / (r + 1), static_cast<double>(r), -static_cast<double>(r)};
  comm.all_reduce_sum(d, 3);
  double want = 0;
  for (int k = 0; k < R; ++k) want += 1.0 / (k + 1);
  EXPECT(std::abs(d[0] - want) < 1e-12 && d[1] == R * (R - 1) / 2.0);
  double m[2] = {static_cast<double>(r), -static_cast<double>(r)};
  comm.all_reduce_max(m, 2);
  EXPECT(m[0] == R - 1 && m[1] == 0);

  // A large broadcast from the last rank.
  std::vector<uint8_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<uint8_t>(r == R - 1 ? (i * 7 + 3) & 0xff : 0);
  comm.broadcast(big.data(), big.size(), R - 1);
  bool same = true;
  for (size_t i = 0; i < big.size(); ++i)
    same &= big[i] == static_cast<uint8_t>((i * 7 + 3) & 0xff);
  EXPECT(same);

  // Strings of different sizes (with NUL bytes), floats, a string from rank 0.
  std::string mine(static_cast<size_t>(r) * 1000 + 1, static_cast<char>('a' + r));
  mine[0] = '\0';
  const auto strings = fp8rl::all_gather_strings(comm, mine);
  EXPECT(static_cast<int>(strings.size()) == R);
  for (int k = 0; k < R; ++k)
    EXPECT(strings[static_cast<size_t>(k)].size() == static_cast<size_t>(k) * 1000 + 1 &&
           strings[static_cast<size_t>(k)].back() == (k == 0 ? '\0' : static_cast<char>('a' + k)));
  const auto floats =
      fp8rl::all_gather_floats(comm, std::vector<float>(static_cast<size_t>(r), 1.5f * r));
  EXPECT(floats.size() == static_cast<size_t>(R * (R - 1) / 2));
  size_t at = 0;
  for (int k = 0; k < R; ++k)
    for (int j = 0; j < k; ++j) EXPECT(floats[at++] == 1.5f * k);
  const std::string text = fp8rl::broadcast_string(comm, r == 0 ? "from rank 0" : "", 0);
  EXPECT(text == "from rank 0");
  comm.barrier();
  EXPECT(R == 1 || comm.bytes_communicated() > bytes0 + big.size());
}

}  // namespace

int main() {
  try {
    fp8rl::Communicator& comm = fp8rl::world();
    g_rank = comm.rank();
    shares();
    launch_command();
    collectives(comm);
    std::printf("rank %d of %d (%s): %d checks, %d failed\n", comm.rank(), comm.size(),
                comm.name().c_str(), g_checks, g_failed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", g_rank, e.what());
    fp8rl::end_world(false);
    return 1;
  }
  fp8rl::end_world(g_failed == 0);
  return g_failed == 0 ? 0 : 1;
}
