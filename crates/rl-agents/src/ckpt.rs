//! Checkpoint plumbing of the agents: the tensor-holding parts are [`rl_nn::parts`] (shared
//! with offline-rl); the saved-field comparison is [`AgentError::ensure_same`].

pub(crate) use rl_nn::parts::{restore, Parts};
