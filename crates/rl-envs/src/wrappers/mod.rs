//! Wrappers: each is an environment holding an inner one, with its own state in the snapshot.
//!
//! | wrapper | what | gymnasium / reference |
//! |---|---|---|
//! | [`TimeLimit`] | truncates after `max_steps` | `gymnasium.wrappers.TimeLimit` |
//! | [`EpisodicReward`] | reward 0 every step, the episode's sum at its last step (delayed reward) | LaRe, RUDDER, IRCR episodic setting |
//! | [`EpisodicRewardMulti`] | the same for a multi-agent environment (team return, shared or split) | LaRe MPE |
//! | [`DomainRandomization`] | a task-parameter vector per episode: sampled, queued by a task sampler, or fixed | robust RL / task samplers |
//! | [`NormalizeObservation`] | running mean/std normalisation with clipping, frozen for evaluation | `gymnasium.wrappers.NormalizeObservation` + CleanRL's clip |
//! | [`RescaleAction`] | the agent acts in `[min, max]`, mapped linearly onto the inner box | `gymnasium.wrappers.RescaleAction` |
//! | [`VecEnv`] | a batch of environments stepped together, same-step auto-reset, one seeded stream each | `gymnasium.vector.SyncVectorEnv` (`AutoresetMode.SAME_STEP`) |
//!
//! Order matters where a wrapper must see the end of an episode: put [`EpisodicReward`]
//! outside [`TimeLimit`], so the delayed reward is paid when the time limit cuts the episode.

mod domain;
mod episodic;
mod normalize;
mod rescale;
mod time_limit;
mod vec_env;

pub use domain::{DomainRandomization, DomainRandomizationSnapshot, DomainRandomizationState, TaskDistribution};
pub use episodic::{EpisodicReward, EpisodicRewardMulti, EpisodicState, MultiRewardSplit, Wrapped};
pub use normalize::{NormalizeObservation, NormalizeObservationParams, NormalizeState};
pub use rescale::RescaleAction;
pub use time_limit::{TimeLimit, TimeLimitState};
pub use vec_env::{VecEnv, VecEnvState, VecStep};
