#include "web/search_slots.h"

#include <cmath>
#include <tuple>

#include "common/strings.h"

namespace paratune::web {

SearchSlots::Ticket::~Ticket() {
  if (!slots_) return;
  std::lock_guard<std::mutex> lock(slots_->mu_);
  slots_->ReleaseLocked(*this);
}

double SearchSlots::UsageLocked(Client& c, Clock::time_point now) const {
  const double age = std::chrono::duration<double>(now - c.used_at).count();
  if (age > 0) {
    c.used_s *= std::exp2(-age / options_.usage_half_life_s);
    c.used_at = now;
  }
  return c.used_s;
}

void SearchSlots::GrantLocked() {
  const auto now = Clock::now();
  while (running_ < options_.slots) {
    // The waiting client holding the fewest slots, then the one that used the
    // least slot time lately, then its cheapest search, then the oldest.
    auto best = waiters_.end();
    std::tuple<int, double, double, uint64_t> best_key{};
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->granted) continue;
      Client& c = clients_[it->client];
      const auto key = std::make_tuple(c.running, UsageLocked(c, now), it->cost, it->seq);
      if (best == waiters_.end() || key < best_key) {
        best = it;
        best_key = key;
      }
    }
    if (best == waiters_.end()) break;
    best->granted = true;
    Client& c = clients_[best->client];
    --c.waiting;
    ++c.running;
    ++running_;
  }
  cv_.notify_all();
}

void SearchSlots::ReleaseLocked(Ticket& t) {
  const auto now = Clock::now();
  Client& c = clients_[t.client_];
  UsageLocked(c, now);
  c.used_s += std::chrono::duration<double>(now - t.since_).count();
  --c.running;
  --running_;
  t.slots_ = nullptr;
  GrantLocked();
}

bool SearchSlots::WaitLocked(std::unique_lock<std::mutex>& lock, std::list<Waiter>::iterator me,
                             Clock::time_point until) {
  cv_.wait_until(lock, until, [&] { return me->granted; });
  const bool granted = me->granted;
  if (!granted) --clients_[me->client].waiting;
  waiters_.erase(me);
  return granted;
}

Result<SearchSlots::Ticket> SearchSlots::Acquire(const std::string& client, double cost,
                                                 SlotRefusal* why) {
  *why = SlotRefusal::kNone;
  std::unique_lock<std::mutex> lock(mu_);
  const auto now = Clock::now();
  // Forget clients that hold nothing and whose usage has faded.
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = it->second;
    if (c.running == 0 && c.waiting == 0 && UsageLocked(c, now) < 1e-3) {
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
  Client& c = clients_[client];
  if (c.used_at == Clock::time_point{}) c.used_at = now;
  if (running_ < options_.slots) {  // a free slot means nobody is waiting
    ++running_;
    ++c.running;
    return Ticket(this, client, cost);
  }
  if (c.waiting >= options_.max_waiting_per_client) {
    *why = SlotRefusal::kClientShare;
    return Status::Unavailable("this client has " + std::to_string(c.waiting) +
                               " searches waiting for a slot already; send the next when one "
                               "is answered");
  }
  if (static_cast<int>(waiters_.size()) >= options_.max_waiting) {
    *why = SlotRefusal::kQueueFull;
    return Status::Unavailable("every search slot is taken and " +
                               std::to_string(waiters_.size()) + " searches wait; retry later");
  }
  auto me = waiters_.insert(waiters_.end(), Waiter{client, cost, ++seq_});
  ++c.waiting;
  const auto until = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.max_wait_s));
  if (!WaitLocked(lock, me, until)) {
    *why = SlotRefusal::kWaitedTooLong;
    return Status::Unavailable("every search slot stayed busy for " +
                               FormatFixed(options_.max_wait_s, 0) + " s; retry later");
  }
  return Ticket(this, client, cost);
}

bool SearchSlots::ShouldYield(const Ticket& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!t.slots_) return false;
  if (std::chrono::duration<double>(Clock::now() - t.since_).count() < options_.quantum_s)
    return false;
  for (const Waiter& w : waiters_) {
    if (!w.granted && (w.client != t.client_ || w.cost < t.cost_)) return true;
  }
  return false;
}

Status SearchSlots::Yield(Ticket& t, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!t.slots_) return Status::Internal("yield without a slot");
  const std::string client = t.client_;
  ReleaseLocked(t);  // grants the slot to the best waiter
  auto me = waiters_.insert(waiters_.end(), Waiter{client, t.cost_, ++seq_});
  ++clients_[client].waiting;
  GrantLocked();  // the slot may still be free: nobody else was waiting
  if (!WaitLocked(lock, me, deadline)) {
    return Status::Timeout("the search ran past the service's time limit while sharing its slot");
  }
  t.slots_ = this;
  t.since_ = Clock::now();
  return Status::Ok();
}

int SearchSlots::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

int SearchSlots::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Waiter& w : waiters_) n += w.granted ? 0 : 1;
  return n;
}

}  // namespace paratune::web
