//! Pendulum-v1 (gymnasium `classic_control/pendulum.py`).

use ndarray::{array, Array1, ArrayView1};
use rand::RngCore;
use rl_core::{Env, Params, Space, Step, Valid};
use serde::{Deserialize, Serialize};

use crate::common::{boxed, check_box_action, non_negative, positive, snapshot_finite, EpisodeClock};
use crate::error::{EnvError, Result};
use crate::rng::uniform;
use crate::traits::{check_task, Snapshot, TaskParam, TaskParams};

/// Parameters of [`Pendulum`]; the defaults are gymnasium's `Pendulum-v1`.
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `g` | 10.0 | gravity (m/s², gymnasium's `g`) | `>= 0` |
/// | `m` | 1.0 | mass | `> 0` |
/// | `l` | 1.0 | length | `> 0` |
/// | `dt` | 0.05 | time step (s) | `> 0` |
/// | `max_speed` | 8.0 | angular velocity clip | `> 0` |
/// | `max_torque` | 2.0 | action bound | `> 0` |
/// | `x_init` | π | reset angle drawn from `U(-x_init, x_init)` | `>= 0` |
/// | `y_init` | 1.0 | reset angular velocity drawn from `U(-y_init, y_init)` | `>= 0` |
/// | `max_episode_steps` | 200 | time limit (registered by gymnasium); 0 = none | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PendulumParams {
    /// Gravity.
    pub g: f64,
    /// Mass.
    pub m: f64,
    /// Length.
    pub l: f64,
    /// Time step.
    pub dt: f64,
    /// Angular velocity clip.
    pub max_speed: f64,
    /// Action bound.
    pub max_torque: f64,
    /// Reset angle bound.
    pub x_init: f64,
    /// Reset angular velocity bound.
    pub y_init: f64,
    /// Time limit (0 = none).
    pub max_episode_steps: usize,
}

impl Default for PendulumParams {
    fn default() -> Self {
        Self {
            g: 10.0,
            m: 1.0,
            l: 1.0,
            dt: 0.05,
            max_speed: 8.0,
            max_torque: 2.0,
            x_init: std::f64::consts::PI,
            y_init: 1.0,
            max_episode_steps: 200,
        }
    }
}

impl PendulumParams {
    /// Sets `g`.
    #[must_use]
    pub fn g(mut self, g: f64) -> Self {
        self.g = g;
        self
    }
    /// Sets `m`.
    #[must_use]
    pub fn m(mut self, m: f64) -> Self {
        self.m = m;
        self
    }
    /// Sets `l`.
    #[must_use]
    pub fn l(mut self, l: f64) -> Self {
        self.l = l;
        self
    }
    /// Sets `dt`.
    #[must_use]
    pub fn dt(mut self, dt: f64) -> Self {
        self.dt = dt;
        self
    }
    /// Sets `max_speed`.
    #[must_use]
    pub fn max_speed(mut self, v: f64) -> Self {
        self.max_speed = v;
        self
    }
    /// Sets `max_torque`.
    #[must_use]
    pub fn max_torque(mut self, v: f64) -> Self {
        self.max_torque = v;
        self
    }
    /// Sets `x_init`.
    #[must_use]
    pub fn x_init(mut self, v: f64) -> Self {
        self.x_init = v;
        self
    }
    /// Sets `y_init`.
    #[must_use]
    pub fn y_init(mut self, v: f64) -> Self {
        self.y_init = v;
        self
    }
    /// Sets `max_episode_steps` (0 = no limit).
    #[must_use]
    pub fn max_episode_steps(mut self, n: usize) -> Self {
        self.max_episode_steps = n;
        self
    }
}

impl Params for PendulumParams {
    type Error = EnvError;
    fn validate(&self) -> Result<()> {
        non_negative("g", self.g)?;
        positive("m", self.m)?;
        positive("l", self.l)?;
        positive("dt", self.dt)?;
        positive("max_speed", self.max_speed)?;
        positive("max_torque", self.max_torque)?;
        non_negative("x_init", self.x_init)?;
        non_negative("y_init", self.y_init)?;
        Ok(())
    }
}

/// The state of a [`Pendulum`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PendulumState {
    /// Angle (0 = upright), not normalised.
    pub theta: f64,
    /// Angular velocity.
    pub theta_dot: f64,
    /// Step counter and episode flags.
    pub clock: EpisodeClock,
}

/// Pendulum swing-up (gymnasium `Pendulum-v1`), step for step.
///
/// ```text
/// u        = clip(a, -max_torque, max_torque)
/// reward   = -(angle_normalize(θ)² + 0.1 θ̇² + 0.001 u²)
/// θ̇'       = clip(θ̇ + (3g/(2l) sin θ + 3/(m l²) u) dt, -max_speed, max_speed)
/// θ'       = θ + θ̇' dt
/// obs      = (cos θ', sin θ', θ̇')
/// ```
///
/// Never terminates; truncated after `max_episode_steps` (200). The state is `f64` and the
/// float32 roundings of gymnasium's NumPy expressions (the torque term, the action cost) are
/// reproduced, so rollouts match gymnasium 1.4 to float32 precision (`tests/golden_classic.rs`).
/// Actions outside `[-max_torque, max_torque]` are clipped like gymnasium does; a wrong length
/// or a NaN is an error.
///
/// ```
/// use rl_core::{Env, Params};
/// use rl_envs::classic::{Pendulum, PendulumParams};
/// use rl_envs::rng::NumpyRng;
/// let mut env = Pendulum::new(PendulumParams::default().check()?)?;
/// let obs = env.reset(&mut NumpyRng::new(0))?; // = gymnasium's env.reset(seed=0)
/// let step = env.step(ndarray::array![0.5].view())?;
/// assert!(step.reward <= 0.0 && obs.len() == 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pendulum {
    params: PendulumParams,
    obs_space: Space,
    act_space: Space,
    state: PendulumState,
}

impl Pendulum {
    /// A pendulum with `params`.
    ///
    /// # Errors
    /// None for valid parameters (kept fallible for the shape of every constructor).
    pub fn new(params: Valid<PendulumParams>) -> Result<Self> {
        let params = params.into_inner();
        let ms = params.max_speed as f32;
        let mt = params.max_torque as f32;
        Ok(Self {
            obs_space: boxed(vec![-1.0, -1.0, -ms], vec![1.0, 1.0, ms])?,
            act_space: boxed(vec![-mt], vec![mt])?,
            params,
            state: PendulumState { theta: 0.0, theta_dot: 0.0, clock: EpisodeClock::default() },
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PendulumParams {
        &self.params
    }

    fn obs(&self) -> Array1<f32> {
        let th = self.state.theta;
        array![th.cos() as f32, th.sin() as f32, self.state.theta_dot as f32]
    }
}

/// `((x + π) mod 2π) − π` with NumPy's (floored) modulo.
pub(crate) fn angle_normalize(x: f64) -> f64 {
    let pi = std::f64::consts::PI;
    (x + pi).rem_euclid(2.0 * pi) - pi
}

impl Env for Pendulum {
    fn observation_space(&self) -> &Space {
        &self.obs_space
    }

    fn action_space(&self) -> &Space {
        &self.act_space
    }

    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        let (x, y) = (self.params.x_init, self.params.y_init);
        self.state.theta = uniform(rng, -x, x);
        self.state.theta_dot = uniform(rng, -y, y);
        self.state.clock.start();
        Ok(self.obs())
    }

    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        self.state.clock.guard()?;
        check_box_action(&self.act_space, action)?;
        let p = &self.params;
        let mt = p.max_torque as f32;
        let u: f32 = action[0].clamp(-mt, mt);
        let (th, thdot) = (self.state.theta, self.state.theta_dot);
        // NumPy 2 evaluates `0.001 * u**2` and `3.0 / (m * l**2) * u` in float32 (u is float32).
        let action_cost = f64::from(0.001f32 * (u * u));
        let costs = angle_normalize(th).powi(2) + 0.1 * thdot.powi(2) + action_cost;
        let torque = f64::from((3.0 / (p.m * p.l * p.l)) as f32 * u);
        let mut new_thdot = thdot + (3.0 * p.g / (2.0 * p.l) * th.sin() + torque) * p.dt;
        new_thdot = new_thdot.clamp(-p.max_speed, p.max_speed);
        let new_th = th + new_thdot * p.dt;
        self.state.theta = new_th;
        self.state.theta_dot = new_thdot;
        let truncated = self.state.clock.tick(false, p.max_episode_steps);
        Ok(Step::new(self.obs(), -costs as f32, false, truncated))
    }
}

impl Snapshot for Pendulum {
    type State = PendulumState;
    fn snapshot(&self) -> PendulumState {
        self.state
    }
    fn restore(&mut self, state: &PendulumState) -> Result<()> {
        snapshot_finite("pendulum state", &[state.theta, state.theta_dot])?;
        self.state = *state;
        Ok(())
    }
}

impl TaskParams for Pendulum {
    fn task_spec(&self) -> Vec<TaskParam> {
        let d = PendulumParams::default();
        vec![
            TaskParam::new("g", d.g, 0.0, 1e3),
            TaskParam::new("m", d.m, 1e-3, 1e3),
            TaskParam::new("l", d.l, 1e-3, 1e3),
        ]
    }
    fn task(&self) -> Vec<f64> {
        vec![self.params.g, self.params.m, self.params.l]
    }
    fn set_task(&mut self, task: &[f64]) -> Result<()> {
        check_task(&self.task_spec(), task)?;
        self.params.g = task[0];
        self.params.m = task[1];
        self.params.l = task[2];
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::NumpyRng;
    use rl_core::RlCoreError;

    fn env() -> Pendulum {
        Pendulum::new(PendulumParams::default().check().unwrap()).unwrap()
    }

    #[test]
    fn angle_normalize_is_floored() {
        let pi = std::f64::consts::PI;
        assert!((angle_normalize(3.0 * pi / 2.0) + pi / 2.0).abs() < 1e-12);
        assert!((angle_normalize(-3.0 * pi / 2.0) - pi / 2.0).abs() < 1e-12);
        assert_eq!(angle_normalize(0.0), 0.0);
    }

    #[test]
    fn bad_actions_are_typed_errors() {
        let mut e = env();
        assert!(matches!(e.step(array![0.0].view()), Err(RlCoreError::NeedsReset)));
        e.reset(&mut NumpyRng::new(0)).unwrap();
        assert!(matches!(e.step(array![0.0, 1.0].view()), Err(RlCoreError::ShapeMismatch { .. })));
        assert!(matches!(e.step(array![f32::NAN].view()), Err(RlCoreError::NonFinite { .. })));
        // out of range is clipped, as in gymnasium
        let a = e.clone().step(array![5.0].view()).unwrap();
        let b = e.step(array![2.0].view()).unwrap();
        assert_eq!(a.obs, b.obs);
    }

    #[test]
    fn truncates_at_200_and_needs_reset() {
        let mut e = env();
        e.reset(&mut NumpyRng::new(1)).unwrap();
        for t in 1..=200 {
            let s = e.step(array![0.1].view()).unwrap();
            assert_eq!(s.truncated, t == 200);
            assert!(!s.terminated);
        }
        assert!(matches!(e.step(array![0.0].view()), Err(RlCoreError::NeedsReset)));
    }

    #[test]
    fn params_validated() {
        assert!(PendulumParams::default().m(0.0).check().is_err());
        let e = PendulumParams::default().g(f64::NAN).check().unwrap_err();
        assert!(e.to_string().contains("`g`"));
        let mut p = env();
        p.set_task(&[9.81, 1.0, 1.0]).unwrap();
        assert_eq!(p.task(), vec![9.81, 1.0, 1.0]);
        assert!(p.set_task(&[9.81, -1.0, 1.0]).is_err());
    }
}
