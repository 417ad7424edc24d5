// web/search_slots.h: fair admission of plan searches to the few slots the
// cores allow. A search waits in a queue with a bounded wait; when a slot
// frees it goes to the waiting client that holds the fewest slots and has
// used the least slot time lately, and among one client's requests to the
// cheapest estimate. A running search steps aside between its shards when
// another client has waited a quantum (time-slicing), so one client's sweep
// cannot hold the slot while a neighbour's small plan waits. Each client may
// have only a few searches waiting; more are refused at once (429).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace paratune::web {

struct SearchSlotOptions {
  int slots = 1;                  // searches running at once
  int max_waiting_per_client = 2; // a client's searches waiting for a slot; more: refused
  int max_waiting = 8;            // all clients' searches waiting; more: refused
  double max_wait_s = 10;         // waiting longer for a first slot: refused (503)
  double quantum_s = 0.25;        // a search holding a slot this long yields to a waiting client
  double usage_half_life_s = 60;  // how fast a client's past slot time is forgotten
};

// Why Acquire refused.
enum class SlotRefusal { kNone, kClientShare, kQueueFull, kWaitedTooLong };

class SearchSlots {
 public:
  explicit SearchSlots(SearchSlotOptions options) : options_(options) {}

  // A held slot; given back when destroyed.
  class Ticket {
   public:
    Ticket(Ticket&& o) noexcept : slots_(o.slots_), client_(std::move(o.client_)),
                                  cost_(o.cost_), since_(o.since_) { o.slots_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();

   private:
    friend class SearchSlots;
    Ticket(SearchSlots* s, std::string client, double cost)
        : slots_(s), client_(std::move(client)), cost_(cost),
          since_(std::chrono::steady_clock::now()) {}
    SearchSlots* slots_;
    std::string client_;
    double cost_;
    std::chrono::steady_clock::time_point since_;  // when the slot was (re)granted
  };

  // Waits for a slot for `client` (an address or a local user) with a search
  // of estimated `cost` (configurations to cost; cheaper goes first within a
  // client). kUnavailable with `why` set when refused.
  Result<Ticket> Acquire(const std::string& client, double cost, SlotRefusal* why);

  // Whether the search holding `t` should give its slot to a waiting client:
  // it has held it for a quantum and another client waits.
  bool ShouldYield(const Ticket& t);

  // Gives the slot back and waits for it again behind the clients that were
  // waiting (no wait limit but `deadline`: kTimeout past it).
  Status Yield(Ticket& t, std::chrono::steady_clock::time_point deadline);

  // Live counts, for tests and metrics.
  int running() const;
  int waiting() const;

 private:
  struct Client {
    int running = 0;
    int waiting = 0;
    double used_s = 0;  // slot seconds, decayed
    std::chrono::steady_clock::time_point used_at{};
  };
  struct Waiter {
    std::string client;
    double cost;
    uint64_t seq;
    bool granted = false;
  };
  using Clock = std::chrono::steady_clock;
  void ReleaseLocked(Ticket& t);
  void GrantLocked();
  double UsageLocked(Client& c, Clock::time_point now) const;
  bool WaitLocked(std::unique_lock<std::mutex>& lock, std::list<Waiter>::iterator me,
                  Clock::time_point until);

  SearchSlotOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
  uint64_t seq_ = 0;
  std::list<Waiter> waiters_;
  std::map<std::string, Client> clients_;
};

}  // namespace paratune::web
