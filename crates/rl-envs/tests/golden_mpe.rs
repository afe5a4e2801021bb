//! The particle worlds against mpe2 1.1.1 (PettingZoo parallel API; fixtures from
//! `scripts/golden_rl_envs.py mpe`): seeded resets, every agent's observation and reward, and
//! the flags match to 1e-6, for discrete and continuous (partly out-of-range) actions, more
//! agents than the defaults, and nearest-neighbour observations. The scenarios added later
//! (`scripts/golden_rl_envs.py mpe_more`, fixture `mpe_more.json`) are held to bit identity:
//! observations equal as float32, rewards equal to mpe2's float64 reward rounded to float32.

mod common;

use common::{assert_close, max_rel_err};
use ndarray::Array1;
use rl_core::Params;
use rl_envs::mpe::{
    CommParams, SimpleAdversary, SimpleAdversaryParams, SimpleCrypto, SimplePush, SimplePushParams, SimpleReference,
    SimpleReferenceParams, SimpleSpeakerListener, SimpleSpread, SimpleSpreadParams, SimpleTag, SimpleTagParams,
    SimpleWorldComm, SimpleWorldCommParams,
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
        "simple_push_v3" => {
            let mut p = SimplePushParams::default().continuous_actions(cont);
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            Box::new(SimplePush::new(p.check().unwrap()).unwrap())
        }
        "simple_reference_v3" => {
            let mut p = SimpleReferenceParams::default().continuous_actions(cont);
            if let Some(r) = kw.get("local_ratio").and_then(|v| v.as_f64()) {
                p = p.local_ratio(r);
            }
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            Box::new(SimpleReference::new(p.check().unwrap()).unwrap())
        }
        "simple_world_comm_v3" => {
            let mut p = SimpleWorldCommParams::default().continuous_actions(cont);
            if let Some(n) = uint(kw, "num_good") {
                p = p.num_good(n);
            }
            if let Some(n) = uint(kw, "num_adversaries") {
                p = p.num_adversaries(n);
            }
            if let Some(n) = uint(kw, "num_obstacles") {
                p = p.num_obstacles(n);
            }
            if let Some(n) = uint(kw, "num_food") {
                p = p.num_food(n);
            }
            if let Some(n) = uint(kw, "num_forests") {
                p = p.num_forests(n);
            }
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            Box::new(SimpleWorldComm::new(p.check().unwrap()).unwrap())
        }
        "simple_speaker_listener_v4" | "simple_crypto_v3" => {
            let mut p = CommParams::default().continuous_actions(cont);
            if let Some(m) = uint(kw, "max_cycles") {
                p = p.max_cycles(m);
            }
            let p = p.check().unwrap();
            if case.env == "simple_crypto_v3" {
                Box::new(SimpleCrypto::new(p).unwrap())
            } else {
                Box::new(SimpleSpeakerListener::new(p).unwrap())
            }
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn f64s(x: &Array1<f32>) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// Replays every case of `fixture` (with `tol` as in `assert_close`; 0 for bit identity, then
/// rewards are compared after rounding mpe2's float64 to float32); returns (rollouts, steps,
/// worst relative observation error, scenarios seen).
fn replay(fixture: &str, tol: f64) -> (usize, usize, f64, Vec<String>) {
    let path = format!("{}/tests/fixtures/{fixture}.json", env!("CARGO_MANIFEST_DIR"));
    let fixture: MpeFixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut steps = 0;
    let mut worst = 0.0f64;
    let mut seen: Vec<String> = Vec::new();
    for case in &fixture.cases {
        if !seen.contains(&case.env) {
            seen.push(case.env.clone());
        }
        let name = format!("{} {:?} seed {}", case.env, case.kwargs, case.seed);
        let mut env = make(case);
        assert_eq!(env.agent_names(), case.agents.as_slice(), "{name}");
        let obs = env.reset(&mut NumpyRng::new(case.seed)).unwrap();
        for (i, o) in obs.iter().enumerate() {
            assert_close(&format!("{name} reset obs of {}", case.agents[i]), &f64s(o), &case.reset_obs[i], tol);
        }
        for (t, acts) in case.actions.iter().enumerate() {
            let actions: Vec<Array1<f32>> = acts.iter().map(|a| a.iter().map(|&v| v as f32).collect()).collect();
            let step = env.step(&actions).unwrap();
            steps += 1;
            for i in 0..case.agents.len() {
                let what = format!("{name} step {t} {}", case.agents[i]);
                assert_close(&format!("{what} obs"), &f64s(&step.obs[i]), &case.obs[t][i], tol);
                let want = if tol == 0.0 { f64::from(case.rewards[t][i] as f32) } else { case.rewards[t][i] };
                assert_close(&format!("{what} reward"), &[f64::from(step.rewards[i])], &[want], tol);
                worst = worst.max(max_rel_err(&f64s(&step.obs[i]), &case.obs[t][i]));
            }
            assert_eq!(step.terminated, case.terminated[t], "{name} step {t}");
            assert_eq!(step.truncated, case.truncated[t], "{name} step {t}");
        }
        assert!(env.step(&vec![Array1::zeros(env.action_spaces()[0].dim()); env.n_agents()]).is_err(), "{name}");
    }
    (fixture.cases.len(), steps, worst, seen)
}

#[test]
fn particle_worlds_match_mpe2() {
    let (cases, steps, worst, _) = replay("mpe", TOL);
    assert!(cases >= 8);
    eprintln!("mpe: {steps} steps of {cases} rollouts matched to {TOL:e} (worst observation error {worst:e})");
}

#[test]
fn more_particle_worlds_match_mpe2_bit_for_bit() {
    let (cases, steps, worst, seen) = replay("mpe_more", 0.0);
    assert_eq!(
        seen,
        [
            "simple_push_v3",
            "simple_reference_v3",
            "simple_speaker_listener_v4",
            "simple_crypto_v3",
            "simple_world_comm_v3"
        ]
    );
    assert!(cases >= 13 && steps >= 310, "{cases} rollouts, {steps} steps");
    assert_eq!(worst, 0.0);
    eprintln!("mpe_more: {steps} steps of {cases} rollouts of {seen:?} bit-identical to mpe2");
}
