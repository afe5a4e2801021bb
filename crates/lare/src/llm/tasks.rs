//! Task prompts for the environments of `rl-envs`: descriptions (in the spirit of LaRe's
//! hand-written ones: the goal, what is rewarded, "prevent excessive torque") and the named
//! observation layouts the scripts read.

use crate::encoder::{Layout, StateSource};
use crate::error::{LareError, Result};

use super::prompt::{PromptMode, TaskPrompt};

fn prompt(task: &str, description: &str, obs: Layout, action: &str, act_dim: usize, source: StateSource) -> TaskPrompt {
    TaskPrompt {
        task: task.into(),
        description: description.into(),
        obs_layout: obs,
        action_description: action.into(),
        act_dim,
        state_source: source,
        mode: PromptMode::Factors,
        include_action_form: true,
    }
}

/// Pendulum-v1.
pub fn pendulum() -> TaskPrompt {
    prompt(
        "Pendulum-v1",
        "An inverted pendulum is attached at one end to a fixed pivot; the other end is free. It starts at a random \
angle with a random angular velocity. The goal is to apply torque at the pivot to swing the pendulum up and keep it \
balanced upright (angle 0, pointing up), as still as possible. Being far from upright and spinning fast are \
penalised. Maintain safe control and prevent excessive torque.",
        Layout::new()
            .scalar("cos_theta", "cosine of the pendulum angle (1 when upright)")
            .scalar("sin_theta", "sine of the pendulum angle")
            .scalar("theta_dot", "angular velocity (rad/s, in [-8, 8])"),
        "1 number: the torque applied at the pivot, in [-2, 2].",
        1,
        StateSource::Current,
    )
}

/// MountainCarContinuous-v0.
pub fn mountain_car_continuous() -> TaskPrompt {
    prompt(
        "MountainCarContinuous-v0",
        "A car is placed at the bottom of a sinusoidal valley and must reach the flag on top of the right hill \
(position >= 0.45). Its engine is too weak to drive straight up, so it has to build momentum by driving back and \
forth. Reaching the flag is rewarded; every step costs a little in proportion to the squared engine force.",
        Layout::new()
            .scalar("position", "position of the car along the x-axis, in [-1.2, 0.6]")
            .scalar("velocity", "velocity of the car, in [-0.07, 0.07]"),
        "1 number: the engine force, in [-1, 1].",
        1,
        StateSource::Current,
    )
}

/// Cooperative navigation (mpe2 `simple_spread_v3`) with `n` agents, as LaRe's MPE prompt:
/// every agent runs the function on the observation it reaches after the step.
pub fn simple_spread(n: usize) -> Result<TaskPrompt> {
    if n < 2 {
        return Err(LareError::invalid("n_agents", n, "cooperative navigation needs >= 2 agents"));
    }
    let obs = Layout::new()
        .vector("vel", 2, "the agent's own velocity (x, y)")
        .vector("pos", 2, "the agent's own position (x, y)")
        .vector(
            "landmark_rel",
            2 * n,
            &format!("positions of the {n} landmarks relative to the agent, (x, y) per landmark: landmark.x - agent.x, landmark.y - agent.y"),
        )
        .vector(
            "other_rel",
            2 * (n - 1),
            &format!("positions of the {} other agents relative to the agent, (x, y) per agent", n - 1),
        )
        .vector("comm", 2 * (n - 1), "communication channels of the other agents (always 0)");
    Ok(prompt(
        "simple_spread",
        &format!(
            "We are playing Cooperative Navigation. {n} agents must cover {n} landmarks: each agent should move close \
to a different landmark, so that every landmark has an agent near it, while avoiding collisions with other agents \
(two agents collide when their distance is below 0.3). The function scores one agent."
        ),
        obs,
        "1 number: the chosen move (0 stay, 1 left, 2 right, 3 down, 4 up).",
        1,
        StateSource::Next,
    ))
}

const TORQUE: &str = "Maintain safe control and prevent excessive torque norm.";

/// HalfCheetah-v4 (17 observations, x position excluded).
pub fn half_cheetah() -> TaskPrompt {
    let obs = Layout::new()
        .scalar("rootz", "z-coordinate (height) of the front tip")
        .scalar("rooty", "angle of the front tip")
        .scalar("bthigh", "angle of the back thigh")
        .scalar("bshin", "angle of the back shin")
        .scalar("bfoot", "angle of the back foot")
        .scalar("fthigh", "angle of the front thigh")
        .scalar("fshin", "angle of the front shin")
        .scalar("ffoot", "angle of the front foot")
        .scalar("vx", "velocity of the front tip along x (forward)")
        .scalar("vz", "velocity of the front tip along z")
        .scalar("vangle", "angular velocity of the front tip")
        .vector("joint_vel", 6, "angular velocities of bthigh, bshin, bfoot, fthigh, fshin, ffoot");
    prompt(
        "HalfCheetah-v4",
        &format!(
            "The HalfCheetah is a 2-dimensional robot of 9 body parts and 8 joints. The goal is to apply torques on its \
6 actuated joints (back and front thigh, shin, foot) to run forward (right, +x) as fast as possible: moving forward is \
rewarded, moving backward penalised. {TORQUE}"
        ),
        obs,
        "6 numbers in [-1, 1]: torques of bthigh, bshin, bfoot, fthigh, fshin, ffoot.",
        6,
        StateSource::Current,
    )
}

/// Hopper-v4 (11 observations, x position excluded).
pub fn hopper() -> TaskPrompt {
    let obs = Layout::new()
        .scalar("z", "height of the torso")
        .scalar("angle", "angle of the torso")
        .scalar("thigh", "angle of the thigh joint")
        .scalar("leg", "angle of the leg joint")
        .scalar("foot", "angle of the foot joint")
        .scalar("vx", "velocity of the torso along x (forward)")
        .scalar("vz", "velocity of the torso along z")
        .scalar("vangle", "angular velocity of the torso")
        .vector("joint_vel", 3, "angular velocities of the thigh, leg and foot joints");
    prompt(
        "Hopper-v4",
        &format!(
            "The hopper is a 2-dimensional one-legged robot (torso, thigh, leg, foot). The goal is to hop forward \
(right, +x) by applying torques on its three hinges. Every step it stays healthy (torso high enough and upright) is \
rewarded, moving forward is rewarded, and the episode ends when it falls. {TORQUE}"
        ),
        obs,
        "3 numbers in [-1, 1]: torques of the thigh, leg and foot hinges.",
        3,
        StateSource::Current,
    )
}

/// Walker2d-v4 (17 observations, x position excluded).
pub fn walker2d() -> TaskPrompt {
    let obs = Layout::new()
        .scalar("z", "height of the torso")
        .scalar("angle", "angle of the torso")
        .vector("right_joints", 3, "angles of the right thigh, leg and foot joints")
        .vector("left_joints", 3, "angles of the left thigh, leg and foot joints")
        .scalar("vx", "velocity of the torso along x (forward)")
        .scalar("vz", "velocity of the torso along z")
        .scalar("vangle", "angular velocity of the torso")
        .vector("joint_vel", 6, "angular velocities of the right then left thigh, leg and foot joints");
    prompt(
        "Walker2d-v4",
        &format!(
            "The walker is a 2-dimensional two-legged figure (torso, two thighs, two legs, two feet). The goal is to \
walk forward (right, +x) by applying torques on its six hinges. Every step it stays healthy (torso high enough and \
upright) is rewarded, moving forward is rewarded, and the episode ends when it falls. {TORQUE}"
        ),
        obs,
        "6 numbers in [-1, 1]: torques of the right thigh, leg, foot and left thigh, leg, foot hinges.",
        6,
        StateSource::Current,
    )
}

/// The prompt of a task by name (`pendulum`, `mountain_car`, `simple_spread`, `half_cheetah`,
/// `hopper`, `walker2d`; `simple_spread` with 3 agents).
///
/// # Errors
/// [`LareError::UnknownId`].
pub fn by_name(name: &str) -> Result<TaskPrompt> {
    Ok(match name {
        "pendulum" => pendulum(),
        "mountain_car" => mountain_car_continuous(),
        "simple_spread" => simple_spread(3)?,
        "half_cheetah" => half_cheetah(),
        "hopper" => hopper(),
        "walker2d" => walker2d(),
        other => return Err(LareError::UnknownId { what: "task".into(), id: other.into() }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_environments() {
        for name in ["pendulum", "mountain_car", "simple_spread", "half_cheetah", "hopper", "walker2d"] {
            let p = by_name(name).unwrap();
            p.obs_layout.validate().unwrap();
            let dim = match name {
                "pendulum" => 3,
                "mountain_car" => 2,
                "simple_spread" => 18,
                "hopper" => 11,
                _ => 17,
            };
            assert_eq!(p.obs_layout.dim, dim, "{name}");
        }
        assert!(by_name("nope").is_err());
        assert!(simple_spread(1).is_err());
    }
}
