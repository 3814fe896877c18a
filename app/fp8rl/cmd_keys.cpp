// fp8rl keys: this install's CURVE keys for workers reachable beyond this machine
// (engine/ipc/curve.hpp, docs/protocol.md#remote-workers).
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "ipc/curve.hpp"

namespace fp8rl::cli {

int cmd_keys(const std::vector<std::string>& args) {
  const Args a(args, {"keys", "comment"}, {"help"});
  const auto& words = a.positional();
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl keys [show] [--keys DIR]\n"
        "       fp8rl keys authorize CLIENT_PUBLIC_KEY [--comment TEXT] [--keys DIR]\n\n"
        "A worker bound beyond loopback (fp8rl worker --allow-remote) speaks ZeroMQ CURVE: it\n"
        "answers only clients whose public key its install authorized. `show` prints this\n"
        "install's keys folder and public keys (made on first use: the folder 0700, every file\n"
        "0600): the worker key clients need, and the client key to authorize on the machines\n"
        "whose workers this one controls. `authorize` adds a client's public key there.\n"
        "Keys: --keys DIR, else $FP8RL_KEYS, else ~/.config/fp8rl/keys.\n");
  need(words.empty() || words[0] == "show" || words[0] == "authorize",
       "unknown action '" + (words.empty() ? "" : words[0]) + "' (show or authorize)");
  const bool authorize = !words.empty() && words[0] == "authorize";
  need(!authorize || words.size() >= 2, "authorize needs the client's public key");
  a.max_positional(authorize ? 2 : 1);
  const std::string dir = a.get("keys", ipc::keys_dir());
  if (!words.empty() && words[0] == "authorize") {
    const bool added = ipc::authorize_client(dir, words[1], a.get("comment", ""));
    std::printf("%s %s in %s/authorized_clients\n", words[1].c_str(),
                added ? "authorized" : "was already authorized", dir.c_str());
    return 0;
  }
  const ipc::CurveKeys k = ipc::load_or_create_keys(dir);
  std::printf("keys folder:        %s\n", k.dir.c_str());
  std::printf("worker public key:  %s\n", k.server.public_key.c_str());
  std::printf("client public key:  %s\n", k.client.public_key.c_str());
  std::printf("authorized clients: %zu\n", k.authorized.size());
  for (const auto& c : k.authorized) std::printf("  %s\n", c.c_str());
  return 0;
}

}  // namespace fp8rl::cli
