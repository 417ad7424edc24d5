// Spares, waiting or continuing on fewer GPUs (elastic/failure_policy.h):
// the spare pool as a Poisson quantile, each policy's cost per failure from
// its parts, Daly's fraction and the GPU-hours that follow, and replan's
// answer to a lost node as the shrink option, in the replan document too.
#include "elastic/failure_policy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/elastic/running_job.h"

namespace paratune::planner {
namespace {

using elastic_test::RunningConfig;
using elastic_test::RunningJob;

// P(N <= k) for N ~ Poisson(mean), summed term by term from its definition.
double PoissonCdf(int k, double mean) {
  double sum = 0;
  for (int i = 0; i <= k; ++i) sum += std::exp(-mean) * std::pow(mean, i) / std::tgamma(i + 1.0);
  return sum;
}

TEST(FailurePolicy, SparesCoverTheNodesInRepairWith99PercentProbability) {
  EXPECT_EQ(SpareNodesFor(0), 0);
  for (double mean : {0.02, 0.3, 1.3, 4.0, 12.5}) {
    const int k = SpareNodesFor(mean);
    EXPECT_GE(PoissonCdf(k, mean), kSpareCoverage) << mean;
    if (k > 0) {
      EXPECT_LT(PoissonCdf(k - 1, mean), kSpareCoverage) << mean;
    }
  }
}

TEST(FailurePolicy, EachPolicyCostsItsParts) {
  const Job job = RunningJob();
  const ParallelConfig c = RunningConfig();
  CostModel cm(job.model, job.training, job.cluster, job.gpus);
  const Prediction p = cm.Predict(c);
  GoodputOptions o;
  o.tokens = 1e12;
  o.failures_per_gpu_hour = 1e-3;  // one failure every 15.6 h on 64 GPUs
  o.gpu_hour_price = 2;
  const Goodput g = GoodputOf(job, Framework::kMegatron, c, p, o);
  ShrinkOption shrink;
  shrink.gpus = 56;
  shrink.relative_tokens_per_s = 0.8;
  shrink.load_s = 30;
  const double repair = 3 * 3600;
  o.repair_s = repair;
  const FailurePolicies f = CompareFailurePolicies(job, g, o, shrink);
  ASSERT_TRUE(f.budgeted);
  ASSERT_TRUE(f.shrink);
  // Spare: the plan's own restart; wait: plus the repair; shrink: the
  // restart onto the GPUs left with their load, a fifth of the repair time
  // lost to the slower layout, then a restart and load back onto the full one.
  EXPECT_DOUBLE_EQ(f.spare.per_failure_s, g.restart_s);
  EXPECT_DOUBLE_EQ(f.wait.per_failure_s, g.restart_s + repair);
  EXPECT_NEAR(f.shrink->per_failure_s, g.restart_s + 30 + 0.2 * repair + o.restart_s, 1e-9);
  // Nodes in repair: failures per second times the repair (Little's law).
  EXPECT_NEAR(f.nodes_in_repair, repair / g.job_mtbf_s, 1e-12);
  EXPECT_EQ(f.spare.spare_nodes, SpareNodesFor(f.nodes_in_repair));
  // The run: Daly's fraction at the plan's interval, spares' GPUs paid for.
  for (const PolicyOutcome* x : {&f.spare, &f.wait, &*f.shrink}) {
    EXPECT_NEAR(x->effective_fraction,
                EffectiveFraction(g.interval_s, g.checkpoint.blocking_s, x->per_failure_s, g.job_mtbf_s),
                1e-12);
    EXPECT_NEAR(x->time_to_train_s, g.compute_s / x->effective_fraction, 1e-6 * x->time_to_train_s);
    const double gpus = job.gpus + x->spare_nodes * 8.0;
    EXPECT_NEAR(x->gpu_hours, x->time_to_train_s * gpus / 3600, 1e-6 * x->gpu_hours);
    EXPECT_NEAR(x->cost, 2 * x->gpu_hours, 1e-6 * x->cost);
  }
  // A spare trains soonest; here continuing beats waiting three hours.
  EXPECT_STREQ(f.soonest, "spare");
  EXPECT_LT(f.shrink->time_to_train_s, f.wait.time_to_train_s);
  // Without a repair to wait for, waiting is a spare without the spares.
  GoodputOptions at_once = o;
  at_once.repair_s = 0;
  const FailurePolicies instant = CompareFailurePolicies(job, g, at_once, shrink);
  EXPECT_DOUBLE_EQ(instant.wait.per_failure_s, instant.spare.per_failure_s);
  EXPECT_EQ(instant.spare.spare_nodes, 0);
  EXPECT_STREQ(instant.fewest_gpu_hours, "spare");  // ties keep the first
  // Without a budget: per-failure costs only, no GPU-hours verdict.
  GoodputOptions none = o;
  none.tokens = 0;
  const FailurePolicies per = CompareFailurePolicies(job, g, none, shrink);
  EXPECT_FALSE(per.budgeted);
  EXPECT_STREQ(per.fewest_gpu_hours, "");
  EXPECT_TRUE(FailurePoliciesToJson(per)["fewest_gpu_hours"].is_null());
}

TEST(FailurePolicy, ReplanAnswersALostNode) {
  const Job job = RunningJob();
  auto s = ShrinkOnNodeLoss(job, RunningConfig(), 500);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->has_value());
  EXPECT_LE((*s)->gpus, 56);
  EXPECT_GT((*s)->relative_tokens_per_s, 0);
  EXPECT_LE((*s)->relative_tokens_per_s, 1.0);
  EXPECT_GT((*s)->load_s, 0);
  // One node: nothing to continue on.
  Job one = job;
  one.gpus = 8;
  ParallelConfig c = RunningConfig();
  c.gdata = 2;
  auto none = ShrinkOnNodeLoss(one, c, 500);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(FailurePolicy, TheReplanDocumentPricesContinuingAgainstWaiting) {
  ReplanOptions o;
  o.lost_nodes = 1;
  o.search.top_k = 3;
  o.goodput.repair_s = 7200;
  auto r = Replan(RunningJob(), RunningConfig(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const OrderedJson doc = ReplanToJson(*r, o);
  const OrderedJson& c = doc["continue_or_wait"];
  ASSERT_FALSE(c.is_null());
  EXPECT_EQ(c["repair_s"], 7200.0);
  EXPECT_FALSE(c["repair_assumed"].get<bool>());
  EXPECT_EQ(c["policies"].size(), 3u);
  EXPECT_EQ(c["shrink_to"]["gpus"], r->candidates.front().gpus);
  // No budget in the options: per-failure costs only.
  EXPECT_FALSE(c["policies"][0].contains("time_to_train_days"));
  // Nodes added: nothing failed.
  ReplanOptions add;
  add.add_nodes = 1;
  add.search.top_k = 1;
  auto grown = Replan(RunningJob(), RunningConfig(), add);
  ASSERT_TRUE(grown.ok());
  EXPECT_TRUE(ReplanToJson(*grown, add)["continue_or_wait"].is_null());
}

// A plans document made with a budget carries it, its filesystem and its
// repair time into the replan request; the request's own values replace
// them; a malformed goodput_inputs is refused by its pointer.
TEST(FailurePolicy, APlansDocumentsBudgetCarriesIntoTheReplan) {
  const Job job = RunningJob();
  CostModel cm(job.model, job.training, job.cluster, job.gpus);
  SearchOptions opt;
  opt.top_k = 2;
  opt.family = Family::kMegatron;
  opt.goodput.tokens = 1e12;
  opt.goodput.fs_GBps = 2000;
  opt.goodput.repair_s = 3600;
  const SearchResult res = Search(cm, opt).RunAll();
  ASSERT_FALSE(res.top.empty());
  const Json plans = Json::parse(PlansToJson({PlanSection{job, res, 0.0, {}}}, opt).dump());
  Json req = {{"from", plans}, {"lost_nodes", 1}};
  auto in = ParseReplanRequest(req);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_DOUBLE_EQ(in->options.goodput.tokens, 1e12);
  EXPECT_DOUBLE_EQ(in->options.goodput.repair_s, 3600);
  EXPECT_DOUBLE_EQ(in->options.reshard.fs_GBps, 2000);
  req["fs_GBps"] = 100;
  req["repair_s"] = 60;
  in = ParseReplanRequest(req);
  ASSERT_TRUE(in.ok());
  EXPECT_DOUBLE_EQ(in->options.reshard.fs_GBps, 100);
  EXPECT_DOUBLE_EQ(in->options.goodput.fs_GBps, 100);
  EXPECT_DOUBLE_EQ(in->options.goodput.repair_s, 60);
  Json bad = req;
  bad["from"]["goodput_inputs"]["tokens"] = -1;
  auto refused = ParseReplanRequest(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("/from/goodput_inputs/tokens"), std::string::npos)
      << refused.status().ToString();
  bad = req;
  bad["repair_s"] = 1e300;
  EXPECT_FALSE(ParseReplanRequest(bad).ok());
}

}  // namespace
}  // namespace paratune::planner
