//! Dataset generation at tiny sizes: the D4RL suite from an online SAC run, maze2d data from the
//! waypoint controller, collection flags.

use offline_rl::algo::DatasetKind;
use offline_rl::generate::{collect, generate_maze2d, generate_suite, Maze2dParams, SuiteParams, UniformPolicy};
use offline_rl::tasks::Task;
use offline_rl::DatasetInfo;
use rl_core::{ActMode, Env, Params};

#[test]
fn collect_records_d4rl_flags() {
    let mut env = Task::Pendulum.make().unwrap();
    let p = UniformPolicy::new(3, env.action_space().clone());
    let (d, returns) = collect(&mut env, &p, ActMode::Stochastic, 450, 7, DatasetInfo::default()).unwrap();
    assert_eq!(d.len(), 450);
    // Pendulum never terminates; its 200-step limit cuts episodes (timeouts), the budget the last
    let t = d.transitions();
    assert_eq!(t.terminal().sum(), 0.0);
    let cuts: Vec<usize> = (0..450).filter(|&i| t.timeout()[i] == 1.0).collect();
    assert_eq!(cuts, vec![199, 399, 449]);
    assert_eq!(returns.len(), 2);
    d.check_episodic().unwrap();
    // same seed, same data
    let mut env2 = Task::Pendulum.make().unwrap();
    let (d2, _) = collect(&mut env2, &p, ActMode::Stochastic, 450, 7, DatasetInfo::default()).unwrap();
    assert_eq!(d, d2);
}

#[test]
fn maze2d_follows_d4rl_recipe() {
    let p = Maze2dParams { transitions: 700, ..Maze2dParams::default() };
    let d = generate_maze2d(Task::Maze2dUmaze, &p.clone().check().unwrap(), 2, 3).unwrap();
    let t = d.transitions();
    assert_eq!(d.len(), 700);
    assert_eq!(t.terminal().sum(), 0.0);
    let cuts: Vec<usize> = (0..700).filter(|&i| t.timeout()[i] == 1.0).collect();
    assert_eq!(cuts, vec![299, 599, 699]); // a new goal every 300 steps, no reset
                                           // the ball is never reset: observations chain across the goal changes
    for i in 0..699 {
        assert_eq!(t.next_obs().row(i), t.obs().row(i + 1));
    }
    let (lo, hi) = (d.info().ref_min.unwrap(), d.info().ref_max.unwrap());
    assert!(hi > lo, "controller {hi} should beat random {lo}");
    assert!(t.action().iter().all(|a| a.abs() <= 1.0));
    assert!(generate_maze2d(Task::Pendulum, &p.check().unwrap(), 1, 0).is_err());
}

#[test]
fn suite_writes_five_d4rl_datasets() {
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let p = SuiteParams::default()
        .online_steps(400)
        .snapshot_every(200)
        .random_steps(100)
        .hidden(vec![16])
        .transitions(250)
        .eval_episodes(1)
        .progress(false);
    let r = generate_suite(Task::Pendulum, &p.check().unwrap(), 0, tmp.path()).unwrap();
    assert_eq!(r.snapshots.iter().map(|s| s.step).collect::<Vec<_>>(), vec![200, 400]);
    let kinds: Vec<DatasetKind> = r.files.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, DatasetKind::D4RL.to_vec());
    for (kind, path) in &r.files {
        let (d, _) = offline_rl::data::load(path).unwrap();
        let n = match kind {
            DatasetKind::MediumExpert => 500,
            DatasetKind::MediumReplay => r.snapshots[r.medium].step as usize,
            _ => 250,
        };
        assert_eq!(d.len(), n, "{kind:?}");
        assert_eq!(d.info().name, format!("pendulum-{}", kind.as_str()));
        assert_eq!(d.info().ref_min, Some(r.random_return));
        assert_eq!(d.info().ref_max, Some(r.snapshots[r.expert].eval.mean_return));
        d.check_episodic().unwrap();
    }
    assert!(tmp.path().join("pendulum-suite.json").exists());
}
