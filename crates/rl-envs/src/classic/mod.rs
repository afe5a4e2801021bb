//! Classic control, step for step with gymnasium 1.4's `classic_control` (pure Rust).
//!
//! | environment | gymnasium id | observation | action | limit |
//! |---|---|---|---|---|
//! | [`Pendulum`] | `Pendulum-v1` | `cos θ, sin θ, θ̇` | torque in `[-2, 2]` | 200 |
//! | [`CartPole`] | `CartPole-v1` | `x, ẋ, θ, θ̇` | discrete {0, 1} | 500 |
//! | [`MountainCarContinuous`] | `MountainCarContinuous-v0` | `x, v` | force in `[-1, 1]` | 999 |
//!
//! Reset draws follow NumPy's `Generator`, so `reset(&mut NumpyRng::new(seed))` equals
//! gymnasium's `reset(seed=seed)` (see [`crate::rng`]). Golden rollouts recorded from
//! gymnasium (`scripts/golden_rl_envs.py`) are matched to 1e-6 (relative to `max(1, |x|)`).

mod cartpole;
mod mountain_car;
mod pendulum;

pub use cartpole::{CartPole, CartPoleIntegrator, CartPoleParams, CartPoleState};
pub use mountain_car::{MountainCarContinuous, MountainCarContinuousParams, MountainCarState};
pub use pendulum::{Pendulum, PendulumParams, PendulumState};
