// Factories of the learned policies (rows of rl::learners() in policy/rl/learners.cpp) and the adapter
// that makes each of them a Placer of the registry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "policy/placer.h"
#include "policy/rl/trainer.h"

namespace placelab::learned {

std::unique_ptr<rl::Learner> make_gdp_learner(const nlohmann::json& options, uint64_t seed);
std::unique_ptr<rl::Learner> make_placeto_learner(const nlohmann::json& options, uint64_t seed);
std::unique_ptr<rl::Learner> make_hdp_learner(const nlohmann::json& options, uint64_t seed);
/**
 * HDP's options that depend on the run, when not given: groups min(256, 20 x devices) (the TensorFlow
 * implementation's count), and logit noise until 30% of the planned steps (measured best at 300 of 1000).
 */
void hdp_run_defaults(nlohmann::json& options, int32_t devices, int64_t steps);
std::unique_ptr<rl::Learner> make_hsdag_learner(const nlohmann::json& options, uint64_t seed);

/** The committed pre-trained GDP checkpoint (embedded in the library at build time). */
const nlohmann::json& pretrained_gdp_checkpoint();

/**
 * The Placer of learned policy `name`. Its options: "checkpoint" (file or directory to start from),
 * "steps" (training steps on the request's graph before placing), "minutes", "reward" options, and the
 * policy's own options. With no checkpoint, gdp starts from pretrained_gdp_checkpoint() (zero-shot when
 * steps is 0); the others train from scratch for their default steps. The result is the best of the
 * policy's placement and the best rollout seen while training; info reports steps, wall time, cost.
 */
std::unique_ptr<policy::Placer> make_learned_placer(const std::string& name);

}  // namespace placelab::learned
