//! gymnasium 1.4's v5 locomotion (Hopper, Walker2d, HalfCheetah, Ant, Swimmer) and Swimmer-v4
//! on mujoco 3.17.0 (feature `mujoco`; fixture from `scripts/golden_rl_envs.py mujoco_v5`):
//! every fixture case is built from its recorded gymnasium kwargs (read straight into the
//! params structs), and checked step for step with tolerance 0: the float64 observation
//! (`Locomotion::observation_f64`), the reward rounded to float32, the flags, every info
//! value and the reset info. Plus `xml_file` (a caller's copy of a model, a missing file),
//! `main_body` and snapshots.
#![cfg(feature = "mujoco")]

mod common;

use common::{action, assert_close, assert_info, load, to_f64};
use rl_core::{Env, Params};
use rl_envs::mujoco::{
    find_asset, AntV5Params, HalfCheetahV5Params, HopperV5Params, Locomotion, MainBody, SwimmerParams, SwimmerV5Params,
    Walker2dV5Params,
};
use rl_envs::rng::NumpyRng;
use rl_envs::{EnvError, Snapshot};

fn f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn build(env: &str, kwargs: &serde_json::Value) -> Locomotion {
    let kw = kwargs.clone();
    match env {
        "Hopper-v5" => Locomotion::hopper_v5(serde_json::from_value::<HopperV5Params>(kw).unwrap().check().unwrap()),
        "Walker2d-v5" => {
            Locomotion::walker2d_v5(serde_json::from_value::<Walker2dV5Params>(kw).unwrap().check().unwrap())
        }
        "HalfCheetah-v5" => {
            Locomotion::half_cheetah_v5(serde_json::from_value::<HalfCheetahV5Params>(kw).unwrap().check().unwrap())
        }
        "Ant-v5" => Locomotion::ant_v5(serde_json::from_value::<AntV5Params>(kw).unwrap().check().unwrap()),
        "Swimmer-v5" => Locomotion::swimmer_v5(serde_json::from_value::<SwimmerV5Params>(kw).unwrap().check().unwrap()),
        "Swimmer-v4" => Locomotion::swimmer(serde_json::from_value::<SwimmerParams>(kw).unwrap().check().unwrap()),
        other => panic!("unknown env {other}"),
    }
    .unwrap()
}

#[test]
fn v5_locomotion_matches_gymnasium() {
    let fixture = load("mujoco_v5");
    let (mut steps, mut terminations, mut truncations) = (0, 0, 0);
    let mut envs = std::collections::BTreeSet::new();
    for case in &fixture.cases {
        let name = format!("{} seed {} {}", case.env, case.seed, case.extra["kwargs"]);
        let mut env = build(&case.env, &case.extra["kwargs"]);
        envs.insert(case.env.clone());
        let qpos = f64s(&case.extra["reset_qpos"]);
        let qvel = f64s(&case.extra["reset_qvel"]);
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        // uniform position noise: NumpyRng reproduces gymnasium's draws exactly
        assert_close(&format!("{name} reset qpos"), env.qpos(), &qpos, 0.0);
        let obs = if matches!(case.env.as_str(), "HalfCheetah-v5" | "Ant-v5") {
            // normal velocity noise (NumPy's ziggurat is not reproduced): gymnasium's reset state
            env.reset_to_state(&qpos, &qvel).unwrap()
        } else {
            assert_close(&format!("{name} reset qvel"), env.qvel(), &qvel, 0.0);
            obs
        };
        assert_close(&format!("{name} reset obs"), &env.observation_f64(), &case.reset_obs, 0.0);
        assert_eq!(to_f64(&obs), case.reset_obs.iter().map(|&v| f64::from(v as f32)).collect::<Vec<_>>());
        assert_eq!(env.observation_space().dim(), case.reset_obs.len(), "{name} observation space");
        assert_info(&format!("{name} reset"), &env.reset_info(), &case.extra["reset_info"], 0.0);
        for (t, a) in case.actions.iter().enumerate() {
            let step = env.step(action(a).view()).unwrap();
            let what = format!("{name} step {t}");
            assert_close(&format!("{what} obs"), &env.observation_f64(), &case.obs[t], 0.0);
            let obs32: Vec<f64> = case.obs[t].iter().map(|&v| f64::from(v as f32)).collect();
            assert_eq!(to_f64(&step.obs), obs32, "{what} float32 obs");
            // gymnasium's reward is float64; ours is its float32 rounding
            assert_eq!(step.reward, case.rewards[t] as f32, "{what} reward");
            assert_eq!(step.terminated, case.terminated[t], "{what} terminated");
            assert_eq!(step.truncated, case.truncated[t], "{what} truncated");
            assert_info(&what, &step.info, &case.extra["infos"][t], 0.0);
            terminations += usize::from(step.terminated);
            truncations += usize::from(step.truncated);
            steps += 1;
        }
    }
    assert_eq!(envs.len(), 6, "{envs:?}");
    assert!(terminations >= 3 && truncations >= 1, "{terminations} terminations, {truncations} truncations");
    eprintln!(
        "mujoco v5: {steps} steps of {} cases bit-identical (float64 obs, float32 rewards, infos, reset infos), \
         {terminations} terminations, {truncations} truncations",
        fixture.cases.len()
    );
}

fn rollout(env: &mut Locomotion, seed: u64, steps: usize) -> Vec<(Vec<f64>, f32)> {
    env.reset(&mut NumpyRng::new(seed)).unwrap();
    let mut prng = NumpyRng::new(seed + 100);
    let n = env.action_space().dim();
    (0..steps)
        .map(|_| {
            let a: ndarray::Array1<f32> = (0..n).map(|_| rl_envs::rng::uniform(&mut prng, -1.0, 1.0) as f32).collect();
            let s = env.step(a.view()).unwrap();
            (env.observation_f64(), s.reward)
        })
        .collect()
}

#[test]
fn xml_file_takes_a_callers_model_and_names_a_missing_one() {
    let dir = std::env::temp_dir().join(format!("rl-envs-v5-xml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // a copy of hopper.xml, and of half_cheetah.xml (whose settotalmass goes through a VFS)
    for (file, seed) in [("hopper.xml", 3), ("half_cheetah.xml", 4)] {
        let copy = dir.join(file);
        std::fs::copy(find_asset(file, None).unwrap(), &copy).unwrap();
        let (mut default, mut custom) = if file == "hopper.xml" {
            let p = HopperV5Params::default();
            (
                Locomotion::hopper_v5(p.clone().check().unwrap()).unwrap(),
                Locomotion::hopper_v5(p.xml_file(copy.clone()).check().unwrap()).unwrap(),
            )
        } else {
            let p = HalfCheetahV5Params::default();
            (
                Locomotion::half_cheetah_v5(p.clone().check().unwrap()).unwrap(),
                Locomotion::half_cheetah_v5(p.xml_file(copy.clone()).check().unwrap()).unwrap(),
            )
        };
        assert_eq!(rollout(&mut default, seed, 10), rollout(&mut custom, seed, 10), "{file}");
    }
    let missing = dir.join("nope.xml");
    let e = Locomotion::swimmer_v5(SwimmerV5Params::default().xml_file(missing.clone()).check().unwrap()).unwrap_err();
    assert!(matches!(e, EnvError::Missing { .. }) && e.to_string().contains("nope.xml"), "{e}");
    let bad = dir.join("bad.xml");
    std::fs::write(&bad, "<mujoco><worldbody><geom type=\"nonsense\"/></worldbody></mujoco>").unwrap();
    let e = Locomotion::swimmer_v5(SwimmerV5Params::default().xml_file(bad).check().unwrap()).unwrap_err();
    assert!(matches!(e, EnvError::Mujoco(_)), "{e}");
    let e = Locomotion::swimmer_v5(SwimmerV5Params::default().xml_file(dir.clone()).check().unwrap()).unwrap_err();
    assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
    // unreadable as text (not UTF-8)
    let binary = dir.join("binary.xml");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x01]).unwrap();
    let e = Locomotion::swimmer_v5(SwimmerV5Params::default().xml_file(binary).check().unwrap()).unwrap_err();
    assert!(matches!(e, EnvError::InvalidParameter { ref name, .. } if name == "xml_file"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ant_main_body_by_id_or_name_and_unknown_bodies_are_errors() {
    let by_id = AntV5Params::default().max_episode_steps(5);
    let by_name = by_id.clone().main_body(MainBody::Name("torso".into()));
    let mut a = Locomotion::ant_v5(by_id.clone().check().unwrap()).unwrap();
    let mut b = Locomotion::ant_v5(by_name.check().unwrap()).unwrap();
    assert_eq!(a.observation_space().dim(), 105);
    assert_eq!(rollout(&mut a, 5, 5), rollout(&mut b, 5, 5));
    for body in [MainBody::Name("no_such_body".into()), MainBody::Id(99)] {
        let e = Locomotion::ant_v5(by_id.clone().main_body(body).check().unwrap()).unwrap_err();
        assert!(matches!(e, EnvError::InvalidParameter { ref name, .. } if name == "main_body"), "{e}");
    }
}

#[test]
fn v5_snapshots_resume_bit_identically() {
    let mut env = Locomotion::ant_v5(AntV5Params::default().check().unwrap()).unwrap();
    rollout(&mut env, 6, 4);
    let snap = env.snapshot();
    let a: ndarray::Array1<f32> = ndarray::Array1::from_elem(8, 0.3);
    let first: Vec<_> = (0..3).map(|_| env.step(a.view()).unwrap()).collect();
    env.restore(&snap).unwrap();
    for want in first {
        let got = env.step(a.view()).unwrap();
        assert_eq!((got.obs, got.reward), (want.obs, want.reward));
        assert_eq!(format!("{:?}", got.info), format!("{:?}", want.info));
    }
}
