//! MountainCarContinuous-v0 (gymnasium `classic_control/continuous_mountain_car.py`).

use ndarray::{array, Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Params, Space, Step, Valid};
use serde::{Deserialize, Serialize};

use crate::common::{boxed, check_box_action, positive, snapshot_finite, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::rng::uniform;
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

const MIN_POSITION: f64 = -1.2;
const MAX_POSITION: f64 = 0.6;
const MAX_SPEED: f64 = 0.07;
const GOAL_POSITION: f64 = 0.45;

/// Parameters of [`MountainCarContinuous`]; the defaults are gymnasium's
/// `MountainCarContinuous-v0`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `power` | 0.0015 | velocity gained per unit of action | `> 0` |
/// | `gravity` | 0.0025 | the hill term `gravity · cos(3 x)` (a literal in gymnasium) | `> 0` |
/// | `goal_velocity` | 0.0 | the car must reach the goal with at least this velocity | finite |
/// | `reset_low`, `reset_high` | −0.6, −0.4 | reset position drawn from `U(low, high)` | `low <= high` |
/// | `max_episode_steps` | 999 | time limit (registered by gymnasium); 0 = none | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MountainCarContinuousParams {
    /// Engine power.
    pub power: f64,
    /// Hill steepness.
    pub gravity: f64,
    /// Goal velocity.
    pub goal_velocity: f64,
    /// Lower reset bound.
    pub reset_low: f64,
    /// Upper reset bound.
    pub reset_high: f64,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
}

impl Default for MountainCarContinuousParams {
    fn default() -> Self {
        Self {
            power: 0.0015,
            gravity: 0.0025,
            goal_velocity: 0.0,
            reset_low: -0.6,
            reset_high: -0.4,
            max_episode_steps: 999,
        }
    }
}

impl MountainCarContinuousParams {
    /// Sets `power`.
    #[must_use]
    pub fn power(mut self, v: f64) -> Self {
        self.power = v;
        self
    }
    /// Sets `gravity`.
    #[must_use]
    pub fn gravity(mut self, v: f64) -> Self {
        self.gravity = v;
        self
    }
    /// Sets `goal_velocity`.
    #[must_use]
    pub fn goal_velocity(mut self, v: f64) -> Self {
        self.goal_velocity = v;
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

impl Params for MountainCarContinuousParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        positive("power", self.power)?;
        positive("gravity", self.gravity)?;
        if !self.goal_velocity.is_finite() {
            return Err(EnvError::invalid("goal_velocity", self.goal_velocity, "must be finite"));
        }
        let ok = self.reset_low.is_finite()
            && self.reset_high.is_finite()
            && self.reset_low <= self.reset_high
            && self.reset_low >= MIN_POSITION
            && self.reset_high <= MAX_POSITION;
        if !ok {
            return Err(EnvError::invalid(
                "reset_low",
                self.reset_low,
                format!("need -1.2 <= reset_low <= reset_high (= {}) <= 0.6", self.reset_high),
            ));
        }
        Ok(())
    }
}

/// The state of a [`MountainCarContinuous`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MountainCarState {
    /// Position.
    pub position: f64,
    /// Velocity.
    pub velocity: f64,
    /// Whether the state still has the float64 values of the reset (gymnasium keeps the reset
    /// state in float64 and every later state in float32, which changes the first step's
    /// arithmetic).
    pub float64_state: bool,
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

/// Continuous mountain car (gymnasium `MountainCarContinuous-v0`), step for step.
///
/// ```text
/// f  = clip(a, -1, 1)
/// v' = clip(v + f · power − gravity · cos(3 x), -0.07, 0.07)
/// x' = clip(x + v', -1.2, 0.6);  v' = 0 if x' = -1.2 and v' < 0
/// terminated = x' >= 0.45 and v' >= goal_velocity
/// reward = 100 · terminated − 0.1 a²     (the unclipped action, as gymnasium)
/// ```
///
/// Gymnasium keeps this state in float32 (except right after a reset); the port reproduces
/// each float32 rounding of its NumPy expressions, so rollouts match it to float32 precision.
#[derive(Debug, Clone)]
pub struct MountainCarContinuous {
    params: MountainCarContinuousParams,
    obs_space: Space,
    act_space: Space,
    state: MountainCarState,
}

impl MountainCarContinuous {
    /// A mountain car with `params`.
    ///
    /// # Errors
    /// None for valid parameters.
    pub fn new(params: Valid<MountainCarContinuousParams>) -> Result<Self> {
        Ok(Self {
            params: params.into_inner(),
            obs_space: boxed(
                vec![MIN_POSITION as f32, -MAX_SPEED as f32],
                vec![MAX_POSITION as f32, MAX_SPEED as f32],
            )?,
            act_space: boxed(vec![-1.0], vec![1.0])?,
            state: MountainCarState {
                position: 0.0,
                velocity: 0.0,
                float64_state: true,
                clock: EpisodeClock::default(),
            },
        })
    }

    /// The parameters.
    pub fn params(&self) -> &MountainCarContinuousParams {
        &self.params
    }

    fn obs(&self) -> Array1<f32> {
        array![self.state.position as f32, self.state.velocity as f32]
    }

    /// One step in float64 (the state right after a reset).
    fn dynamics_f64(&self, a: f32) -> (f64, f64, bool) {
        let p = &self.params;
        let (x, v) = (self.state.position, self.state.velocity);
        let hill = p.gravity * (3.0 * x).cos();
        let push = if (-1.0..=1.0).contains(&a) {
            // float32 action · python float → float32; minus a python float → float32
            f64::from(a * p.power as f32 - hill as f32)
        } else {
            a.signum() as f64 * p.power - hill
        };
        let mut v = v + push;
        v = v.clamp(-MAX_SPEED, MAX_SPEED);
        let mut x = x + v;
        x = x.clamp(MIN_POSITION, MAX_POSITION);
        if x == MIN_POSITION && v < 0.0 {
            v = 0.0;
        }
        let terminated = x >= GOAL_POSITION && v >= p.goal_velocity;
        (f64::from(x as f32), f64::from(v as f32), terminated)
    }

    /// One step in float32 (every later state).
    fn dynamics_f32(&self, a: f32) -> (f64, f64, bool) {
        let p = &self.params;
        let (x, v) = (self.state.position as f32, self.state.velocity as f32);
        let hill = p.gravity * f64::from(3.0f32 * x).cos();
        let push: f32 = if (-1.0..=1.0).contains(&a) {
            a * p.power as f32 - hill as f32
        } else {
            (a.signum() as f64 * p.power - hill) as f32
        };
        let mut v = v + push;
        let (ms, lo, hi) = (MAX_SPEED as f32, MIN_POSITION as f32, MAX_POSITION as f32);
        v = v.clamp(-ms, ms);
        let mut x = x + v;
        x = x.clamp(lo, hi);
        if x == lo && v < 0.0 {
            v = 0.0;
        }
        let terminated = x >= GOAL_POSITION as f32 && v >= p.goal_velocity as f32;
        (f64::from(x), f64::from(v), terminated)
    }
}

impl Env for MountainCarContinuous {
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    fn action_space(&self) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        self.state.position = uniform(rng, self.params.reset_low, self.params.reset_high);
        self.state.velocity = 0.0;
        self.state.float64_state = true;
        self.state.clock.start();
        Ok(self.obs())
    }

    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.state.clock.guard()?;
        check_box_action(&self.act_space, action)?;
        let a = action[0];
        let (x, v, terminated) = if self.state.float64_state { self.dynamics_f64(a) } else { self.dynamics_f32(a) };
        self.state.position = x;
        self.state.velocity = v;
        self.state.float64_state = false;
        let a64 = f64::from(a);
        let reward = if terminated { 100.0 } else { 0.0 } - a64 * a64 * 0.1;
        let truncated = self.state.clock.tick(terminated, self.params.max_episode_steps);
        Ok(Step::new(self.obs(), reward as f32, terminated, truncated))
    }
}

impl Snapshot for MountainCarContinuous {
    type State = MountainCarState;
    fn snapshot(&self) -> MountainCarState {
        self.state
    }
    fn restore(&mut self, state: &MountainCarState) -> Result<()> {
        snapshot_finite("mountain car state", &[state.position, state.velocity])?;
        self.state = *state;
        Ok(())
    }
}

impl TaskParams for MountainCarContinuous {
    fn task_spec(&self) -> Vec<TaskParam> {
        let d = MountainCarContinuousParams::default();
        vec![TaskParam::new("power", d.power, 1e-6, 1.0), TaskParam::new("gravity", d.gravity, 1e-6, 1.0)]
    }
    fn task(&self) -> Vec<f64> {
        vec![self.params.power, self.params.gravity]
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.task_spec(), task)?;
        self.params.power = task[0];
        self.params.gravity = task[1];
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NumpyRng;
    use rl_core::RlCoreError;

    #[test]
    fn bang_bang_reaches_the_goal() {
        let mut e = MountainCarContinuous::new(MountainCarContinuousParams::default().check().unwrap()).unwrap();
        e.reset(&mut NumpyRng::new(0)).unwrap();
        let mut ret = 0.0;
        for _ in 0..999 {
            // push in the direction of motion (energy pumping)
            let a = if e.state.velocity >= 0.0 { 1.0 } else { -1.0 };
            let s = e.step(array![a].view()).unwrap();
            ret += f64::from(s.reward);
            if s.terminated {
                assert!(ret > 80.0, "{ret}");
                assert!(matches!(e.step(array![0.0].view()), Err(RlCoreError::NeedsReset)));
                return;
            }
        }
        panic!("never reached the goal");
    }
}
