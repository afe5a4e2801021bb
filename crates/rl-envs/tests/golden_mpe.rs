//! The particle worlds against mpe2 1.1.1 (PettingZoo parallel API; fixtures from
//! `scripts/golden_rl_envs.py mpe`): seeded resets, every agent's observation and reward, and
//! the flags match to 1e-6, for discrete and continuous (partly out-of-range) actions, more
//! agents than the defaults, and nearest-neighbour observations.

mod common;

use common::{assert_close, max_rel_err};
use ndarray::Array1;
use rl_core::Params;
use rl_envs::mpe::{
    SimpleAdversary, SimpleAdversaryParams, SimpleSpread, SimpleSpreadParams, SimpleTag, SimpleTagParams,
};
use rl_envs::rng::NumpyRng;
use rl_envs::MultiAgentEnv;
use serde::Deserialize;

const TOL: f64 = 1e-6;

#[derive(Debug, Deserialize)]
struct MpeCase {
    env: String,
    seed: u64,
    kwargs: serde_json::Map<String, serde_json::Value>,
    agents: Vec<String>,
    reset_obs: Vec<Vec<f64>>,
    actions: Vec<Vec<Vec<f64>>>,
    obs: Vec<Vec<Vec<f64>>>,
    rewards: Vec<Vec<f64>>,
    terminated: Vec<Vec<bool>>,
    truncated: Vec<Vec<bool>>,
}

#[derive(Debug, Deserialize)]
struct MpeFixture {
    cases: Vec<MpeCase>,
}

fn uint(kw: &serde_json::Map<String, serde_json::Value>, k: &str) -> Option<usize> {
    kw.get(k).and_then(|v| v.as_u64()).map(|v| v as usize)
}

fn make(case: &MpeCase) -> Box<dyn MultiAgentEnv> {
    let kw = &case.kwargs;
    let cont = kw.get("continuous_actions").and_then(|v| v.as_bool()).unwrap_or(false);
    let an = uint(kw, "num_agent_neighbors");
    let ln = uint(kw, "num_landmark_neighbors");
    match case.env.as_str() {
        "simple_spread_v3" => {
            let mut p = SimpleSpreadParams::default()
                .continuous_actions(cont)
                .num_agent_neighbors(an)
                .num_landmark_neighbors(ln);
            if let Some(n) = uint(kw, "N") {
                p = p.n_agents(n);
            }
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            Box::new(SimpleSpread::new(p.check().unwrap()).unwrap())
        }
        "simple_tag_v3" => {
            let mut p =
                SimpleTagParams::default().continuous_actions(cont).num_agent_neighbors(an).num_landmark_neighbors(ln);
            if let Some(n) = uint(kw, "num_good") {
                p = p.num_good(n);
            }
            if let Some(n) = uint(kw, "num_adversaries") {
                p = p.num_adversaries(n);
            }
            if let Some(n) = uint(kw, "num_obstacles") {
                p = p.num_obstacles(n);
            }
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            Box::new(SimpleTag::new(p.check().unwrap()).unwrap())
        }
        "simple_adversary_v3" => {
            let mut p = SimpleAdversaryParams::default()
                .continuous_actions(cont)
                .num_agent_neighbors(an)
                .num_landmark_neighbors(ln);
            if let Some(n) = uint(kw, "N") {
                p = p.n_good(n);
            }
            Box::new(SimpleAdversary::new(p.check().unwrap()).unwrap())
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn f64s(x: &Array1<f32>) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

#[test]
fn particle_worlds_match_mpe2() {
    let path = format!("{}/tests/fixtures/mpe.json", env!("CARGO_MANIFEST_DIR"));
    let fixture: MpeFixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(fixture.cases.len() >= 8);
    let mut steps = 0;
    let mut worst = 0.0f64;
    for case in &fixture.cases {
        let name = format!("{} {:?} seed {}", case.env, case.kwargs, case.seed);
        let mut env = make(case);
        assert_eq!(env.agent_names(), case.agents.as_slice(), "{name}");
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        for (i, o) in obs.iter().enumerate() {
            assert_close(&format!("{name} reset obs of {}", case.agents[i]), &f64s(o), &case.reset_obs[i], TOL);
        }
        for (t, acts) in case.actions.iter().enumerate() {
            let actions: Vec<Array1<f32>> = acts.iter().map(|a| a.iter().map(|&v| v as f32).collect()).collect();
            let step = env.step(&actions).unwrap();
            steps += 1;
            for i in 0..case.agents.len() {
                let what = format!("{name} step {t} {}", case.agents[i]);
                assert_close(&format!("{what} obs"), &f64s(&step.obs[i]), &case.obs[t][i], TOL);
                assert_close(&format!("{what} reward"), &[f64::from(step.rewards[i])], &[case.rewards[t][i]], TOL);
                worst = worst.max(max_rel_err(&f64s(&step.obs[i]), &case.obs[t][i]));
            }
            assert_eq!(step.terminated, case.terminated[t], "{name} step {t}");
            assert_eq!(step.truncated, case.truncated[t], "{name} step {t}");
        }
        assert!(env.step(&vec![Array1::zeros(env.action_spaces()[0].dim()); env.n_agents()]).is_err(), "{name}");
    }
    eprintln!(
        "mpe: {steps} steps of {} rollouts matched to {TOL:e} (worst observation error {worst:e})",
        fixture.cases.len()
    );
}
