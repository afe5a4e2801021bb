//! CartPole-v1 (gymnasium `classic_control/cartpole.py`).

use ndarray::{Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Params, Space, Step, Valid};
use serde::{Deserialize, Serialize};

use crate::common::{boxed, non_negative, positive, snapshot_finite, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::rng::uniform;
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

/// How CartPole integrates its equations of motion (gymnasium's `kinematics_integrator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CartPoleIntegrator {
    /// Explicit Euler (gymnasium's default): positions move with the old velocities.
    #[default]
    Euler,
    /// Semi-implicit Euler: velocities first, positions with the new velocities.
    SemiImplicitEuler,
}

/// Parameters of [`CartPole`]; the defaults are gymnasium's `CartPole-v1`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `gravity` | 9.8 | gravity | `>= 0` |
/// | `masscart` | 1.0 | cart mass | `> 0` |
/// | `masspole` | 0.1 | pole mass | `> 0` |
/// | `length` | 0.5 | half the pole's length | `> 0` |
/// | `force_mag` | 10.0 | force of each push | `> 0` |
/// | `tau` | 0.02 | seconds per step | `> 0` |
/// | `integrator` | `euler` | `euler` or `semi_implicit_euler` | |
/// | `theta_threshold_radians` | 12·2π/360 | pole angle beyond which the episode terminates | `> 0` |
/// | `x_threshold` | 2.4 | cart position beyond which the episode terminates | `> 0` |
/// | `sutton_barto_reward` | false | reward 0 per step and −1 on termination instead of 1 per step | |
/// | `reset_low`, `reset_high` | −0.05, 0.05 | each state entry drawn from `U(low, high)` at reset | `low <= high` |
/// | `max_episode_steps` | 500 | time limit (registered by gymnasium); 0 = none | any |
/// | `continue_after_termination` | false | allow steps after `terminated` as gymnasium does (see [`CartPole`]) instead of [`rl_core::RlCoreError::NeedsReset`] | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CartPoleParams {
    /// Gravity.
    pub gravity: f64,
    /// Cart mass.
    pub masscart: f64,
    /// Pole mass.
    pub masspole: f64,
    /// Half the pole's length.
    pub length: f64,
    /// Push force.
    pub force_mag: f64,
    /// Seconds per step.
    pub tau: f64,
    /// Integration scheme.
    pub integrator: CartPoleIntegrator,
    /// Termination angle.
    pub theta_threshold_radians: f64,
    /// Termination position.
    pub x_threshold: f64,
    /// Sutton and Barto's reward (0 per step, −1 on termination).
    pub sutton_barto_reward: bool,
    /// Lower reset bound.
    pub reset_low: f64,
    /// Upper reset bound.
    pub reset_high: f64,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
    /// Steps after termination go on as in gymnasium instead of erroring.
    pub continue_after_termination: bool,
}

impl Default for CartPoleParams {
    fn default() -> Self {
        Self {
            gravity: 9.8,
            masscart: 1.0,
            masspole: 0.1,
            length: 0.5,
            force_mag: 10.0,
            tau: 0.02,
            integrator: CartPoleIntegrator::Euler,
            theta_threshold_radians: 12.0 * 2.0 * std::f64::consts::PI / 360.0,
            x_threshold: 2.4,
            sutton_barto_reward: false,
            reset_low: -0.05,
            reset_high: 0.05,
            max_episode_steps: 500,
            continue_after_termination: false,
        }
    }
}

impl CartPoleParams {
    /// Sets `continue_after_termination`.
    #[must_use]
    pub fn continue_after_termination(mut self, v: bool) -> Self {
        self.continue_after_termination = v;
        self
    }
    /// Sets `gravity`.
    #[must_use]
    pub fn gravity(mut self, v: f64) -> Self {
        self.gravity = v;
        self
    }
    /// Sets `masscart`.
    #[must_use]
    pub fn masscart(mut self, v: f64) -> Self {
        self.masscart = v;
        self
    }
    /// Sets `masspole`.
    #[must_use]
    pub fn masspole(mut self, v: f64) -> Self {
        self.masspole = v;
        self
    }
    /// Sets `length` (half the pole's length).
    #[must_use]
    pub fn length(mut self, v: f64) -> Self {
        self.length = v;
        self
    }
    /// Sets `force_mag`.
    #[must_use]
    pub fn force_mag(mut self, v: f64) -> Self {
        self.force_mag = v;
        self
    }
    /// Sets `tau`.
    #[must_use]
    pub fn tau(mut self, v: f64) -> Self {
        self.tau = v;
        self
    }
    /// Sets `integrator`.
    #[must_use]
    pub fn integrator(mut self, v: CartPoleIntegrator) -> Self {
        self.integrator = v;
        self
    }
    /// Sets `theta_threshold_radians`.
    #[must_use]
    pub fn theta_threshold_radians(mut self, v: f64) -> Self {
        self.theta_threshold_radians = v;
        self
    }
    /// Sets `x_threshold`.
    #[must_use]
    pub fn x_threshold(mut self, v: f64) -> Self {
        self.x_threshold = v;
        self
    }
    /// Sets `sutton_barto_reward`.
    #[must_use]
    pub fn sutton_barto_reward(mut self, v: bool) -> Self {
        self.sutton_barto_reward = v;
        self
    }
    /// Sets `reset_low`.
    #[must_use]
    pub fn reset_low(mut self, v: f64) -> Self {
        self.reset_low = v;
        self
    }
    /// Sets `reset_high`.
    #[must_use]
    pub fn reset_high(mut self, v: f64) -> Self {
        self.reset_high = v;
        self
    }
    /// Sets `max_episode_steps` (0 = no limit).
    #[must_use]
    pub fn max_episode_steps(mut self, n: usize) -> Self {
        self.max_episode_steps = n;
        self
    }
}

impl Params for CartPoleParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        non_negative("gravity", self.gravity)?;
        positive("masscart", self.masscart)?;
        positive("masspole", self.masspole)?;
        positive("length", self.length)?;
        positive("force_mag", self.force_mag)?;
        positive("tau", self.tau)?;
        positive("theta_threshold_radians", self.theta_threshold_radians)?;
        positive("x_threshold", self.x_threshold)?;
        if !(self.reset_low.is_finite() && self.reset_high.is_finite() && self.reset_low <= self.reset_high) {
            return Err(EnvError::invalid(
                "reset_low",
                self.reset_low,
                format!("need finite reset_low <= reset_high (= {})", self.reset_high),
            ));
        }
        Ok(())
    }
}

/// The state of a [`CartPole`]: `[x, x_dot, theta, theta_dot]` and the clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CartPoleState {
    /// `[x, x_dot, theta, theta_dot]`.
    pub x: [f64; 4],
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
    /// gymnasium's `steps_beyond_terminated`: `None` until the pole falls, then the number of
    /// steps taken after the terminating one (only grows with `continue_after_termination`).
    #[serde(default)]
    pub steps_beyond_terminated: Option<usize>,
}

/// Cart-pole balancing (gymnasium `CartPole-v1`), step for step.
///
/// Discrete actions `0` (push left) and `1` (push right), as a one-element vector. With
/// `F = ±force_mag`, `M = masscart + masspole`, `ml = masspole · length`:
///
/// ```text
/// temp = (F + ml θ̇² sin θ) / M
/// θ̈    = (g sin θ − cos θ · temp) / (length (4/3 − masspole cos²θ / M))
/// ẍ    = temp − ml θ̈ cos θ / M
/// x' = x + τ ẋ,  ẋ' = ẋ + τ ẍ,  θ' = θ + τ θ̇,  θ̇' = θ̇ + τ θ̈     (explicit Euler)
/// terminated = |x'| > x_threshold or |θ'| > theta_threshold_radians
/// reward = 1 every step, including the terminating one
/// ```
///
/// Truncated after `max_episode_steps` (500). Stepping after termination is
/// [`rl_core::RlCoreError::NeedsReset`] by default; gymnasium 1.4 only logs a warning and goes on.
/// With `continue_after_termination` this environment goes on as gymnasium does (without the
/// warning): the dynamics keep integrating, `terminated` is recomputed from the new state,
/// a step that is still terminated returns reward 0 (−1 with `sutton_barto_reward`) and counts
/// [`CartPole::steps_beyond_terminated`], and a step back inside the thresholds returns the
/// ordinary reward. The time limit still truncates (and then ends the episode: stepping after
/// truncation is an error, where gymnasium's `TimeLimit` keeps returning `truncated`).
#[derive(Debug, Clone)]
pub struct CartPole {
    params: CartPoleParams,
    obs_space: Space,
    act_space: Space,
    state: CartPoleState,
}

impl CartPole {
    /// A cart-pole with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<CartPoleParams>) -> Result<Self> {
        let params = params.into_inner();
        let hx = (params.x_threshold * 2.0) as f32;
        let ht = (params.theta_threshold_radians * 2.0) as f32;
        Ok(Self {
            obs_space: boxed(
                vec![-hx, f32::NEG_INFINITY, -ht, f32::NEG_INFINITY],
                vec![hx, f32::INFINITY, ht, f32::INFINITY],
            )?,
            act_space: Space::discrete(2)?,
            params,
            state: CartPoleState { x: [0.0; 4], clock: EpisodeClock::default(), steps_beyond_terminated: None },
        })
    }

    /// The parameters.
    pub fn params(&self) -> &CartPoleParams {
        &self.params
    }

    /// gymnasium's `steps_beyond_terminated`: `None` until the episode terminates, then how many
    /// steps were taken after the terminating one.
    pub fn steps_beyond_terminated(&self) -> Option<usize> {
        self.state.steps_beyond_terminated
    }

    fn obs(&self) -> Array1<f32> {
        self.state.x.iter().map(|&v| v as f32).collect()
    }
}

impl Env for CartPole {
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    fn action_space(&self) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        for v in &mut self.state.x {
            *v = uniform(rng, self.params.reset_low, self.params.reset_high);
        }
        self.state.clock.start();
        self.state.steps_beyond_terminated = None;
        Ok(self.obs())
    }

    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.state.clock.guard()?;
        self.act_space.check("action", action)?;
        let p = &self.params;
        let [x, x_dot, theta, theta_dot] = self.state.x;
        let force = if action[0] == 1.0 { p.force_mag } else { -p.force_mag };
        let total_mass = p.masspole + p.masscart;
        let polemass_length = p.masspole * p.length;
        let (sintheta, costheta) = (theta.sin(), theta.cos());
        let temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
        let thetaacc = (p.gravity * sintheta - costheta * temp)
            / (p.length * (4.0 / 3.0 - p.masspole * (costheta * costheta) / total_mass));
        let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
        let new = match p.integrator {
            CartPoleIntegrator::Euler => {
                [x + p.tau * x_dot, x_dot + p.tau * xacc, theta + p.tau * theta_dot, theta_dot + p.tau * thetaacc]
            }
            CartPoleIntegrator::SemiImplicitEuler => {
                let xd = x_dot + p.tau * xacc;
                let td = theta_dot + p.tau * thetaacc;
                [x + p.tau * xd, xd, theta + p.tau * td, td]
            }
        };
        self.state.x = new;
        let terminated = new[0] < -p.x_threshold
            || new[0] > p.x_threshold
            || new[2] < -p.theta_threshold_radians
            || new[2] > p.theta_threshold_radians;
        let reward = if !terminated {
            if p.sutton_barto_reward {
                0.0
            } else {
                1.0
            }
        } else if let Some(beyond) = self.state.steps_beyond_terminated {
            // gymnasium: "any further steps are undefined behavior", reward 0 (or −1)
            self.state.steps_beyond_terminated = Some(beyond + 1);
            if p.sutton_barto_reward {
                -1.0
            } else {
                0.0
            }
        } else {
            self.state.steps_beyond_terminated = Some(0);
            if p.sutton_barto_reward {
                -1.0
            } else {
                1.0
            }
        };
        let ends = terminated && !p.continue_after_termination;
        let truncated = self.state.clock.tick(ends, p.max_episode_steps);
        Ok(Step::new(self.obs(), reward, terminated, truncated))
    }
}

impl Snapshot for CartPole {
    type State = CartPoleState;
    fn snapshot(&self) -> CartPoleState {
        self.state
    }
    fn restore(&mut self, state: &CartPoleState) -> Result<()> {
        snapshot_finite("cartpole state", &state.x)?;
        self.state = *state;
        Ok(())
    }
}

impl TaskParams for CartPole {
    fn task_spec(&self) -> Vec<TaskParam> {
        let d = CartPoleParams::default();
        vec![
            TaskParam::new("gravity", d.gravity, 0.0, 1e3),
            TaskParam::new("masscart", d.masscart, 1e-3, 1e3),
            TaskParam::new("masspole", d.masspole, 1e-3, 1e3),
            TaskParam::new("length", d.length, 1e-3, 1e3),
            TaskParam::new("force_mag", d.force_mag, 1e-3, 1e4),
        ]
    }
    fn task(&self) -> Vec<f64> {
        let p = &self.params;
        vec![p.gravity, p.masscart, p.masspole, p.length, p.force_mag]
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.task_spec(), task)?;
        let p = &mut self.params;
        (p.gravity, p.masscart, p.masspole, p.length, p.force_mag) = (task[0], task[1], task[2], task[3], task[4]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NumpyRng;
    use ndarray::array;
    use rl_core::RlCoreError;

    #[test]
    fn terminates_when_pushed_one_way_and_rejects_bad_actions() {
        let mut e = CartPole::new(CartPoleParams::default().check().unwrap()).unwrap();
        e.reset(&mut NumpyRng::new(3)).unwrap();
        assert!(matches!(e.step(array![2.0].view()), Err(RlCoreError::OutOfSpace(_))));
        assert!(matches!(e.step(array![0.5].view()), Err(RlCoreError::OutOfSpace(_))));
        assert!(matches!(e.step(array![f32::NAN].view()), Err(RlCoreError::NonFinite { .. })));
        assert!(matches!(e.step(array![1.0, 0.0].view()), Err(RlCoreError::ShapeMismatch { .. })));
        let mut n = 0;
        loop {
            let s = e.step(array![1.0].view()).unwrap();
            n += 1;
            assert_eq!(s.reward, 1.0);
            if s.terminated {
                break;
            }
            assert!(n < 100);
        }
        assert!(matches!(e.step(array![1.0].view()), Err(RlCoreError::NeedsReset)));
    }

    #[test]
    fn sutton_barto_reward_and_semi_implicit() {
        let p = CartPoleParams::default().sutton_barto_reward(true).integrator(CartPoleIntegrator::SemiImplicitEuler);
        let mut e = CartPole::new(p.check().unwrap()).unwrap();
        e.reset(&mut NumpyRng::new(0)).unwrap();
        let s = e.step(array![0.0].view()).unwrap();
        assert_eq!(s.reward, 0.0);
        assert!(CartPoleParams::default().reset_low(1.0).check().is_err());
    }
}
