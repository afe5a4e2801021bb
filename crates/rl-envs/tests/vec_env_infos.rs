//! `VecEnv`'s per-environment infos against the same environments stepped one by one, with
//! gymnasium 1.4's `SyncVectorEnv(autoreset_mode=SAME_STEP)` semantics: a step that does not
//! end an episode puts its info in `infos[i]` and leaves `final_info[i]` empty; a step that ends
//! one puts exactly that step's info (and observation) in `final_info[i]` (`final_obs[i]`), and
//! `infos[i]` is the reset's info, which is empty here because `Env::reset` returns none
//! (gymnasium puts the sub-environment's reset info there; `envs()[i].reset_info()` gives it).

use ndarray::{Array1, Array2};
use rl_core::{derive_seed, rng_from_seed, Env, Info, InfoValue, Params, SeededRng};
use rl_envs::maze::{MazeLayout, PointMaze, PointMazeParams};
use rl_envs::wrappers::VecEnv;

/// What one comparison run covered.
#[derive(Debug, Default)]
struct Coverage {
    steps: usize,
    nonempty_infos: usize,
    terminal_resets: usize,
    truncation_resets: usize,
}

/// Steps `batch` and, beside it, copies of its environments (`singles`, reset from the same
/// generators `SeededRng(derive_seed(seed, i))`) for `steps` steps of `policy`, comparing every
/// observation, reward, flag, info, final observation and final info.
fn compare<E: Env + Clone>(
    batch: &mut VecEnv<E>,
    seed: u64,
    steps: usize,
    mut policy: impl FnMut(usize, &Array1<f32>) -> Array1<f32>,
    mut reset_info: impl FnMut(&E) -> Info,
) -> Coverage {
    let n = batch.len();
    let mut singles: Vec<E> = batch.envs().to_vec();
    let mut rngs: Vec<SeededRng> = (0..n).map(|i| rng_from_seed(derive_seed(seed, i as u64))).collect();
    let obs = batch.reset().unwrap();
    let mut current: Vec<Array1<f32>> = Vec::with_capacity(n);
    for (i, (env, rng)) in singles.iter_mut().zip(&mut rngs).enumerate() {
        let o = env.reset(rng).unwrap();
        assert_eq!(obs.row(i), o, "reset obs of env {i}");
        current.push(o);
    }
    let mut cov = Coverage::default();
    for t in 0..steps {
        let act_dim = batch.action_space().dim();
        let mut actions = Array2::zeros((n, act_dim));
        for (i, o) in current.iter().enumerate() {
            actions.row_mut(i).assign(&policy(i, o));
        }
        let vs = batch.step(actions.view()).unwrap();
        for (i, (env, rng)) in singles.iter_mut().zip(&mut rngs).enumerate() {
            let what = format!("step {t} env {i}");
            let s = env.step(actions.row(i)).unwrap();
            assert_eq!(vs.rewards[i], s.reward, "{what} reward");
            assert_eq!((vs.terminated[i], vs.truncated[i]), (s.terminated, s.truncated), "{what} flags");
            if s.done() {
                assert_eq!(vs.final_obs[i].as_ref(), Some(&s.obs), "{what} final_obs");
                assert_eq!(vs.final_info[i].as_ref(), Some(&s.info), "{what} final_info");
                assert!(!s.info.is_empty(), "{what}: the terminal info must not be empty");
                assert!(vs.infos[i].is_empty(), "{what}: infos is the reset's (empty), got {:?}", vs.infos[i]);
                let o = env.reset(rng).unwrap();
                assert_eq!(vs.obs.row(i), o, "{what} obs after auto-reset");
                // gymnasium's infos row after an auto-reset: the sub-environment's reset info
                assert_eq!(reset_info(&batch.envs()[i]), reset_info(env), "{what} reset info");
                if s.terminated {
                    cov.terminal_resets += 1;
                } else {
                    cov.truncation_resets += 1;
                }
                current[i] = o;
            } else {
                assert_eq!(vs.final_obs[i], None, "{what} final_obs");
                assert_eq!(vs.final_info[i], None, "{what} final_info");
                assert_eq!(vs.infos[i], s.info, "{what} info");
                assert_eq!(vs.obs.row(i), s.obs, "{what} obs");
                cov.nonempty_infos += usize::from(!s.info.is_empty());
                current[i] = s.obs;
            }
            cov.steps += 1;
        }
    }
    cov
}

fn success(info: Option<&Info>) -> bool {
    info.and_then(|i| i.get("success")) == Some(&InfoValue::Bool(true))
}

/// Drives the ball toward the goal (observation `[x, y, vx, vy, gx, gy]`).
fn seek(o: &Array1<f32>) -> Array1<f32> {
    let a = |k: usize| (3.0 * (o[4 + k] - o[k]) - 0.5 * o[2 + k]).clamp(-1.0, 1.0);
    Array1::from(vec![a(0), a(1)])
}

fn mazes() -> VecEnv<PointMaze> {
    let open = PointMazeParams::default().layout(MazeLayout::Open);
    let params = [
        // ends at the goal: terminal info success = true
        open.clone().continuing_task(false),
        // continuing: success = true in ordinary steps, then the time limit
        open.max_episode_steps(Some(60)),
        // the time limit before the goal: truncation info success = false
        PointMazeParams::default().layout(MazeLayout::UMaze).continuing_task(false).max_episode_steps(Some(25)),
    ];
    let envs = params.into_iter().map(|p| PointMaze::new(p.check().unwrap()).unwrap()).collect();
    VecEnv::new(envs, 11).unwrap()
}

#[test]
fn point_maze_infos_and_final_infos_match_single_envs() {
    let mut batch = mazes();
    let cov = compare(&mut batch, 11, 150, |_, o| seek(o), PointMaze::reset_info);
    assert_eq!(cov.steps, 450);
    assert!(cov.terminal_resets >= 1 && cov.truncation_resets >= 3, "{cov:?}");
    assert!(cov.nonempty_infos > 300, "{cov:?}");
}

#[test]
fn final_info_holds_the_terminal_success() {
    // the same batch, read as a user would: success shows in final_info at the terminal step
    // and in infos for a continuing task's ordinary steps, never in an auto-reset's infos row
    let mut batch = mazes();
    let mut obs = batch.reset().unwrap();
    let (mut terminal_success, mut truncated_fail, mut running_success) = (0, 0, 0);
    for _ in 0..150 {
        let mut actions = Array2::zeros((3, 2));
        for i in 0..3 {
            actions.row_mut(i).assign(&seek(&obs.row(i).to_owned()));
        }
        let vs = batch.step(actions.view()).unwrap();
        for i in 0..3 {
            let done = vs.terminated[i] || vs.truncated[i];
            assert_eq!(vs.final_info[i].is_some(), done);
            assert_eq!(vs.final_obs[i].is_some(), done);
            if vs.terminated[i] {
                assert!(success(vs.final_info[i].as_ref()), "terminated without success");
                terminal_success += 1;
            }
            if vs.truncated[i] && i == 2 {
                assert!(!success(vs.final_info[i].as_ref()));
                truncated_fail += 1;
            }
            if done {
                assert!(vs.infos[i].is_empty());
            } else {
                running_success += usize::from(success(Some(&vs.infos[i])));
            }
        }
        obs = vs.obs;
    }
    assert!(terminal_success >= 1 && truncated_fail >= 1 && running_success >= 1);
}

#[cfg(feature = "mujoco")]
#[test]
fn locomotion_infos_match_single_envs() {
    use rl_envs::mujoco::{HopperParams, Locomotion};
    // Hopper-v4 falls within tens of steps under large random actions; a short limit adds
    // truncations; infos hold x_position and x_velocity
    let mut batch = VecEnv::from_fn(2, 5, |i| {
        Locomotion::hopper(HopperParams::default().max_episode_steps(if i == 0 { 1000 } else { 15 }).check()?)
    })
    .unwrap();
    let mut k = 0u32;
    let cov = compare(
        &mut batch,
        5,
        60,
        |_, _| {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let u = |s: u32| ((k >> s) & 0xff) as f32 / 127.5 - 1.0;
            Array1::from(vec![u(0), u(8), u(16)])
        },
        Locomotion::reset_info,
    );
    assert!(cov.terminal_resets >= 1 && cov.truncation_resets >= 1, "{cov:?}");
    assert!(cov.nonempty_infos > 80, "{cov:?}");
}
