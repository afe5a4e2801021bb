//! Resuming the training loops: a run interrupted after `k` steps, checkpointed, reloaded into
//! fresh objects (built from other seeds) and continued ends with the uninterrupted run's
//! numbers bit for bit (summary, every metric record, agent and decoder weights), for LaRe's
//! decoder, the RRD baseline and IRCR (off-policy SAC/TD3) and the multi-agent PPO loop with a
//! credit decoder. `default_path_draws_the_same_numbers` compares short runs against numbers
//! recorded before the loops could resume (`tests/fixtures/train_baseline.json`; regenerate
//! with `LARE_RECORD_BASELINE=1`, only when a change of results is intended).

use std::collections::BTreeMap;

use ndarray::{array, Array1, ArrayView1};
use rand::{Rng, RngCore};
use rl_core::{Env, MemorySink, Params, Space, Step};
use rl_envs::wrappers::EpisodicReward;

use lare::train::{
    train_multi_agent_ppo, train_off_policy, MultiAgentLoopParams, MultiAgentMethod, OffPolicyLoopParams, RunSummary,
};
use lare::{
    AgentCreditDecoder, CreditParams, DecoderParams, Decomposition, DecompositionLoss, Ircr, IrcrParams, NativeEncoder,
    RawEncoder, RawFeatures, RewardRedistributor, StateSource,
};
use rl_agents::{BatchLearner, Ppo, PpoParams, Sac, SacParams};
use rl_envs::mpe::{SimpleSpread, SimpleSpreadParams};
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;

const HORIZON: usize = 20;

/// The delayed-reward "drift" task of `delayed_reward_run.rs`, with a snapshot.
#[derive(Debug)]
struct Drift {
    obs: Space,
    act: Space,
    x: f32,
    t: usize,
}

impl Drift {
    fn new() -> Self {
        Self { obs: Space::symmetric(1, 2.0).unwrap(), act: Space::symmetric(1, 1.0).unwrap(), x: 0.0, t: 0 }
    }
}

impl Env for Drift {
    fn observation_space(&self) -> &Space {
        &self.obs
    }
    fn action_space(&self) -> &Space {
        &self.act
    }
    fn reset(&mut self, rng: &mut dyn RngCore) -> rl_core::Result<Array1<f32>> {
        self.x = rng.random_range(-1.0f32..1.0);
        self.t = 0;
        Ok(array![self.x])
    }
    fn step(&mut self, action: ArrayView1<'_, f32>) -> rl_core::Result<Step> {
        let a = action[0].clamp(-1.0, 1.0);
        self.x = (self.x + 0.25 * a).clamp(-2.0, 2.0);
        self.t += 1;
        Ok(Step::new(array![self.x], -self.x.abs(), false, self.t >= HORIZON))
    }
}

impl rl_envs::Snapshot for Drift {
    type State = (f32, usize);
    fn snapshot(&self) -> (f32, usize) {
        (self.x, self.t)
    }
    fn restore(&mut self, s: &(f32, usize)) -> rl_envs::Result<()> {
        (self.x, self.t) = *s;
        Ok(())
    }
}

fn off_params(seed: u64) -> rl_core::Valid<OffPolicyLoopParams> {
    OffPolicyLoopParams {
        total_steps: 120,
        start_steps: 40,
        batch_size: 16,
        eval_every: 60,
        eval_episodes: 2,
        log_every: 20,
        seed,
        ..OffPolicyLoopParams::default()
    }
    .check()
    .unwrap()
}

fn sac(seed: u64) -> Sac {
    let (o, a) = (Space::symmetric(1, 2.0).unwrap(), Space::symmetric(1, 1.0).unwrap());
    Sac::new(SacParams::default().hidden([16]).check().unwrap(), &o, &a, tch::Device::Cpu, seed).unwrap()
}

fn lare_method(seed: u64) -> Decomposition {
    let enc = NativeEncoder::new(1, "|x'|", |_, _, next, out| out[0] = next[0].abs())
        .unwrap()
        .with_state_source(StateSource::Next);
    let dec = DecoderParams::default().hidden([8]).lr(3e-3).rrd_k(4).batch_size(8).seed(seed).check().unwrap();
    Decomposition::new("lare", Box::new(enc), dec, tch::Device::Cpu).unwrap()
}

fn rrd_method(seed: u64) -> Decomposition {
    let enc = RawEncoder::new(1, 1, RawFeatures::StateActionDelta);
    let dec = DecoderParams::default()
        .hidden([8])
        .loss(DecompositionLoss::Rrd)
        .rrd_k(4)
        .batch_size(8)
        .seed(seed)
        .check()
        .unwrap();
    Decomposition::new("rrd", Box::new(enc), dec, tch::Device::Cpu).unwrap()
}

fn ircr_method() -> Ircr {
    Ircr::new(IrcrParams::default().heap_size(4).check().unwrap())
}

/// Every variable of `vs` as the SHA-256 of its little-endian `f32` bits (equal iff bit-equal).
fn flat(vs: &VarStore) -> BTreeMap<String, String> {
    use sha2::Digest;
    vs.variables()
        .into_iter()
        .map(|(k, t)| {
            let v = Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (k, format!("{:x}", sha2::Sha256::digest(&bytes)))
        })
        .collect()
}

fn records(sink: &MemorySink) -> Vec<(u64, BTreeMap<String, f64>)> {
    sink.records.iter().map(|(s, m)| (*s, m.0.clone())).collect()
}

/// What a run produced: the numbers compared bit for bit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Outcome {
    summary: RunSummary,
    records: Vec<(u64, BTreeMap<String, f64>)>,
    weights: BTreeMap<String, String>,
}

fn off_policy_uninterrupted(method: &mut dyn RewardRedistributor, seed: u64) -> Outcome {
    let mut env = EpisodicReward::new(Drift::new());
    let mut eval = Drift::new();
    let mut agent = sac(seed);
    let mut sink = MemorySink::default();
    let s =
        train_off_policy(&mut env, &mut eval, &mut agent, method, &off_params(seed), &mut sink, &mut |_| {}).unwrap();
    let (actor, critic, _) = agent.var_stores();
    let mut weights: BTreeMap<String, String> =
        flat(actor).into_iter().map(|(k, v)| (format!("actor/{k}"), v)).collect();
    weights.extend(flat(critic).into_iter().map(|(k, v)| (format!("critic/{k}"), v)));
    Outcome { summary: s, records: records(&sink), weights }
}

fn multi_agent_uninterrupted(seed: u64) -> Outcome {
    let spread = || SimpleSpread::new(SimpleSpreadParams::default().n_agents(2).check().unwrap()).unwrap();
    let (mut env, mut eval) = (spread(), spread());
    let (os, acts) = {
        use rl_envs::MultiAgentEnv;
        (env.observation_spaces()[0].clone(), env.action_spaces()[0].clone())
    };
    let pp = PpoParams::default().num_steps(25).num_minibatches(2).update_epochs(1).check().unwrap();
    let mut ppo = Ppo::new(pp, &os, &acts, tch::Device::Cpu, seed).unwrap();
    let cp = CreditParams::default().batch_episodes(2).seed(seed).check().unwrap();
    let mut m = MultiAgentMethod::Credit {
        name: "rd".into(),
        encoder: Box::new(RawEncoder::new(os.dim(), 1, RawFeatures::NextState)),
        decoder: Box::new(AgentCreditDecoder::new(cp, os.dim(), tch::Device::Cpu).unwrap()),
    };
    let params = MultiAgentLoopParams {
        total_steps: 100,
        decoder_every: 1,
        decoder_updates: 2,
        reward_scale: 50.0,
        eval_every: 50,
        eval_episodes: 1,
        seed,
        ..Default::default()
    }
    .check()
    .unwrap();
    let mut sink = MemorySink::default();
    let s = train_multi_agent_ppo(&mut env, &mut eval, &mut ppo, &mut m, &params, &mut sink, &mut |_| {}).unwrap();
    let mut weights: BTreeMap<String, String> =
        flat(ppo.var_store()).into_iter().map(|(k, v)| (format!("ppo/{k}"), v)).collect();
    if let MultiAgentMethod::Credit { decoder, .. } = &m {
        weights.extend(flat(decoder.var_store()).into_iter().map(|(k, v)| (format!("credit/{k}"), v)));
    }
    Outcome { summary: s, records: records(&sink), weights }
}

fn baseline_outcomes() -> BTreeMap<String, Outcome> {
    let mut out = BTreeMap::new();
    let mut lare = lare_method(1);
    let mut o = off_policy_uninterrupted(&mut lare, 1);
    o.weights.extend(flat(lare.decoder().var_store()).into_iter().map(|(k, v)| (format!("decoder/{k}"), v)));
    out.insert("off_policy_lare".to_string(), o);
    out.insert("off_policy_ircr".to_string(), off_policy_uninterrupted(&mut ircr_method(), 2));
    out.insert("multi_agent_credit".to_string(), multi_agent_uninterrupted(3));
    out
}

#[test]
fn default_path_draws_the_same_numbers() {
    tch::set_num_threads(1);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/train_baseline.json");
    let got = baseline_outcomes();
    if std::env::var_os("LARE_RECORD_BASELINE").is_some() {
        std::fs::write(path, serde_json::to_string(&got).unwrap()).unwrap();
        return;
    }
    let want: BTreeMap<String, Outcome> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>());
    for (k, w) in &want {
        let g = &got[k];
        assert_eq!(g.summary, w.summary, "{k}: summary");
        assert_eq!(g.records, w.records, "{k}: metric records");
        assert_eq!(g.weights, w.weights, "{k}: weights");
        assert!(!w.records.is_empty() && !w.weights.is_empty());
    }
}

// ---------------------------------------------------------------- resume equivalence

use lare::train::{run_multi_agent_ppo, run_off_policy, Checkpointing, MultiAgentRun, OffPolicyRun};
use rl_agents::{Td3, Td3Params};
use std::path::Path;

fn td3(seed: u64) -> Td3 {
    let (o, a) = (Space::symmetric(1, 2.0).unwrap(), Space::symmetric(1, 1.0).unwrap());
    Td3::new(Td3Params::default().hidden([16]).check().unwrap(), &o, &a, tch::Device::Cpu, seed).unwrap()
}

fn prefixed(prefix: &str, vs: &VarStore) -> BTreeMap<String, String> {
    flat(vs).into_iter().map(|(k, v)| (format!("{prefix}/{k}"), v)).collect()
}

/// Runs the off-policy loop of `agent`/`method` (made by `make` from a seed) to the end,
/// uninterrupted, and again interrupted after `k` steps (`OffPolicyRun::step`), saved,
/// restored into objects built from another agent seed and continued with `run_off_policy`
/// (writing checkpoints every 25 steps); returns both outcomes.
fn off_policy_pair<A: BatchLearner, M: RewardRedistributor>(
    make: &dyn Fn(u64) -> (A, M),
    weights: &dyn Fn(&A, &M) -> BTreeMap<String, String>,
    seed: u64,
    k: u64,
    dir: &Path,
) -> (Outcome, Outcome) {
    let params = off_params(seed);
    // uninterrupted
    let (mut a, mut m) = make(seed);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut sink = MemorySink::default();
    let s = train_off_policy(&mut env, &mut eval, &mut a, &mut m, &params, &mut sink, &mut |_| {}).unwrap();
    let whole = Outcome { summary: s, records: records(&sink), weights: weights(&a, &m) };
    // interrupted after k steps
    let (mut a, mut m) = make(seed);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut first = MemorySink::default();
    let mut run = OffPolicyRun::new(&mut env, &m, &params).unwrap();
    for _ in 0..k {
        run.step(&mut env, &mut eval, &mut a, &mut m, &mut first).unwrap();
    }
    assert_eq!(run.steps(), k);
    run.save(&dir.join("run"), &env, &eval, &a, &m).unwrap();
    drop((run, a, m, env, eval));
    // a fresh process: new objects (another agent seed, environments in another state)
    let (mut a, mut m) = make(seed + 1_000);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut run = OffPolicyRun::load(&dir.join("run"), &mut env, &mut eval, &mut a, &mut m, &params).unwrap();
    assert_eq!(run.steps(), k);
    let mut rest = MemorySink::default();
    let ck = Checkpointing::new(dir.join("again"), 25).unwrap();
    let s = run_off_policy(&mut run, &mut env, &mut eval, &mut a, &mut m, &mut rest, &mut |_| {}, Some(&ck)).unwrap();
    let mut recs = records(&first);
    recs.extend(records(&rest));
    (whole, Outcome { summary: s, records: recs, weights: weights(&a, &m) })
}

fn assert_same(whole: &Outcome, resumed: &Outcome, what: &str) {
    assert!(!whole.summary.evals.is_empty() && !whole.summary.train_returns.is_empty(), "{what}");
    assert_eq!(whole.summary, resumed.summary, "{what}: summary");
    assert_eq!(whole.records, resumed.records, "{what}: metric records");
    assert_eq!(whole.weights, resumed.weights, "{what}: weights");
}

fn sac_weights<M>(a: &Sac, _: &M) -> BTreeMap<String, String> {
    let (actor, critic, target) = a.var_stores();
    let mut w = prefixed("actor", actor);
    w.extend(prefixed("critic", critic));
    w.extend(prefixed("target", target));
    w
}

#[test]
fn lare_with_sac_resumes_bit_for_bit_mid_episode() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let (whole, resumed) = off_policy_pair(
        &|s| (sac(s), lare_method(1)),
        &|a, m: &Decomposition| {
            let mut w = sac_weights(a, m);
            w.extend(prefixed("decoder", m.decoder().var_store()));
            w
        },
        1,
        50, // after the random phase, in the middle of the third episode
        dir.path(),
    );
    assert_same(&whole, &resumed, "lare/sac");
    assert!(whole.records.iter().any(|(_, m)| m.contains_key("reward_model/loss")));
    // the continued run wrote its last checkpoint at the end; it loads
    let (mut a, mut m) = (sac(5), lare_method(1));
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let run =
        OffPolicyRun::load(&dir.path().join("again"), &mut env, &mut eval, &mut a, &mut m, &off_params(1)).unwrap();
    assert!(run.is_finished());
    assert_eq!(run.summary(), &whole.summary);
    assert!(m.decoder().updates() > 0);
}

#[test]
fn rrd_with_td3_resumes_bit_for_bit() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let (whole, resumed) = off_policy_pair(
        &|s| (td3(s), rrd_method(2)),
        &|a: &Td3, m: &Decomposition| {
            let mut w = BTreeMap::new();
            for (i, vs) in a.var_stores().iter().enumerate() {
                w.extend(prefixed(&format!("td3{i}"), vs));
            }
            w.extend(prefixed("decoder", m.decoder().var_store()));
            w
        },
        2,
        77,
        dir.path(),
    );
    assert_same(&whole, &resumed, "rrd/td3");
}

#[test]
fn ircr_resumes_bit_for_bit_during_the_random_phase() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let (whole, resumed) = off_policy_pair(&|s| (sac(s), ircr_method()), &sac_weights, 3, 30, dir.path());
    assert_same(&whole, &resumed, "ircr/sac");
}

#[test]
fn a_finished_run_extends_to_more_steps_as_if_it_had_run_on() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let long = off_params(4);
    let short = OffPolicyLoopParams { total_steps: 60, ..long.get().clone() }.check().unwrap();
    let make = |s| (sac(s), lare_method(4));
    let (mut a, mut m) = make(4);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut sink = MemorySink::default();
    let s = train_off_policy(&mut env, &mut eval, &mut a, &mut m, &long, &mut sink, &mut |_| {}).unwrap();
    let whole = Outcome { summary: s, records: records(&sink), weights: sac_weights(&a, &m) };
    // 60 steps with a checkpoint every 25 (and at the end), then extended to 120
    let (mut a, mut m) = make(4);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut first = MemorySink::default();
    let mut run = OffPolicyRun::new(&mut env, &m, &short).unwrap();
    let ck = Checkpointing::new(dir.path().join("run"), 25).unwrap();
    run_off_policy(&mut run, &mut env, &mut eval, &mut a, &mut m, &mut first, &mut |_| {}, Some(&ck)).unwrap();
    let (mut a, mut m) = make(40);
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut run = OffPolicyRun::load(&ck.dir, &mut env, &mut eval, &mut a, &mut m, &long).unwrap();
    assert_eq!(run.steps(), 60);
    let mut rest = MemorySink::default();
    let s = run_off_policy(&mut run, &mut env, &mut eval, &mut a, &mut m, &mut rest, &mut |_| {}, None).unwrap();
    let mut recs = records(&first);
    recs.extend(records(&rest));
    assert_same(&whole, &Outcome { summary: s, records: recs, weights: sac_weights(&a, &m) }, "extended");
}

fn spread() -> SimpleSpread {
    SimpleSpread::new(SimpleSpreadParams::default().n_agents(2).check().unwrap()).unwrap()
}

fn ma_params(seed: u64) -> rl_core::Valid<MultiAgentLoopParams> {
    MultiAgentLoopParams {
        total_steps: 100,
        decoder_every: 1,
        decoder_updates: 2,
        reward_scale: 50.0,
        eval_every: 50,
        eval_episodes: 1,
        seed,
        ..Default::default()
    }
    .check()
    .unwrap()
}

fn ma_objects(ppo_seed: u64, credit_seed: u64, credit: bool) -> (Ppo, MultiAgentMethod) {
    use rl_envs::MultiAgentEnv;
    let env = spread();
    let (os, acts) = (env.observation_spaces()[0].clone(), env.action_spaces()[0].clone());
    let pp = PpoParams::default().num_steps(25).num_minibatches(2).update_epochs(1).check().unwrap();
    let ppo = Ppo::new(pp, &os, &acts, tch::Device::Cpu, ppo_seed).unwrap();
    let m = if credit {
        let cp = CreditParams::default().batch_episodes(2).seed(credit_seed).check().unwrap();
        MultiAgentMethod::Credit {
            name: "rd".into(),
            encoder: Box::new(RawEncoder::new(os.dim(), 1, RawFeatures::NextState)),
            decoder: Box::new(AgentCreditDecoder::new(cp, os.dim(), tch::Device::Cpu).unwrap()),
        }
    } else {
        MultiAgentMethod::Episodic
    };
    (ppo, m)
}

fn ma_weights(ppo: &Ppo, m: &MultiAgentMethod) -> BTreeMap<String, String> {
    let mut w = prefixed("ppo", ppo.var_store());
    if let MultiAgentMethod::Credit { decoder, .. } = m {
        w.extend(prefixed("credit", decoder.var_store()));
    }
    w
}

fn multi_agent_pair(credit: bool, k: u64, dir: &Path) -> (Outcome, Outcome) {
    let params = ma_params(3);
    let (mut ppo, mut m) = ma_objects(3, 3, credit);
    let (mut env, mut eval) = (spread(), spread());
    let mut sink = MemorySink::default();
    let s = train_multi_agent_ppo(&mut env, &mut eval, &mut ppo, &mut m, &params, &mut sink, &mut |_| {}).unwrap();
    let whole = Outcome { summary: s, records: records(&sink), weights: ma_weights(&ppo, &m) };
    let (mut ppo, mut m) = ma_objects(3, 3, credit);
    let (mut env, mut eval) = (spread(), spread());
    let mut first = MemorySink::default();
    let mut run = MultiAgentRun::new(&mut env, &m, &params).unwrap();
    for _ in 0..k {
        run.step(&mut env, &mut eval, &mut ppo, &mut m, &mut first).unwrap();
    }
    run.save(&dir.join("run"), &env, &eval, &ppo, &m).unwrap();
    drop((run, ppo, m, env, eval));
    let (mut ppo, mut m) = ma_objects(77, 3, credit);
    let (mut env, mut eval) = (spread(), spread());
    let mut run = MultiAgentRun::load(&dir.join("run"), &mut env, &mut eval, &mut ppo, &mut m, &params).unwrap();
    assert_eq!(run.steps(), k);
    let mut rest = MemorySink::default();
    let ck = Checkpointing::new(dir.join("again"), 30).unwrap();
    let s = run_multi_agent_ppo(&mut run, &mut env, &mut eval, &mut ppo, &mut m, &mut rest, &mut |_| {}, Some(&ck))
        .unwrap();
    assert_eq!(run.iterations(), 4);
    let mut recs = records(&first);
    recs.extend(records(&rest));
    (whole, Outcome { summary: s, records: recs, weights: ma_weights(&ppo, &m) })
}

#[test]
fn multi_agent_credit_resumes_bit_for_bit_mid_rollout_and_mid_episode() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    // 40 steps: the second 25-step episode and PPO rollout are half collected, one decoder round done
    let (whole, resumed) = multi_agent_pair(true, 40, dir.path());
    assert_same(&whole, &resumed, "multi-agent credit");
    assert!(whole.records.iter().any(|(_, m)| m.contains_key("reward_model/loss")));
}

#[test]
fn multi_agent_episodic_resumes_bit_for_bit() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let (whole, resumed) = multi_agent_pair(false, 63, dir.path());
    assert_same(&whole, &resumed, "multi-agent episodic");
}

// ---------------------------------------------------------------- bad checkpoints

fn saved_lare_run(dir: &Path) {
    let (mut a, mut m) = (sac(0), lare_method(0));
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let mut run = OffPolicyRun::new(&mut env, &m, &off_params(0)).unwrap();
    let mut sink = MemorySink::default();
    for _ in 0..45 {
        run.step(&mut env, &mut eval, &mut a, &mut m, &mut sink).unwrap();
    }
    run.save(dir, &env, &eval, &a, &m).unwrap();
}

fn load_lare(dir: &Path, params: &rl_core::Valid<OffPolicyLoopParams>) -> lare::Result<OffPolicyRun> {
    let (mut a, mut m) = (sac(0), lare_method(0));
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    OffPolicyRun::load(dir, &mut env, &mut eval, &mut a, &mut m, params)
}

#[test]
fn mismatched_and_corrupt_checkpoints_are_typed_errors() {
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    saved_lare_run(&dir);
    assert!(load_lare(&dir, &off_params(0)).is_ok());
    // other loop parameters (the seed, the batch size): refused
    let e = load_lare(&dir, &off_params(9)).unwrap_err();
    assert!(matches!(e, lare::LareError::Corrupt { .. }) && e.to_string().contains("loop parameters"), "{e}");
    let other = OffPolicyLoopParams { batch_size: 8, ..off_params(0).get().clone() }.check().unwrap();
    assert!(matches!(load_lare(&dir, &other).unwrap_err(), lare::LareError::Corrupt { .. }));
    // another method
    let (mut a, mut m) = (sac(0), rrd_method(0));
    let (mut env, mut eval) = (EpisodicReward::new(Drift::new()), Drift::new());
    let e = OffPolicyRun::load(&dir, &mut env, &mut eval, &mut a, &mut m, &off_params(0)).unwrap_err();
    assert!(e.to_string().contains("method `lare`"), "{e}");
    // a multi-agent loop cannot read it (another kind)
    let (mut ppo, mut mm) = ma_objects(0, 0, true);
    let (mut env, mut eval) = (spread(), spread());
    let e = MultiAgentRun::load(&dir, &mut env, &mut eval, &mut ppo, &mut mm, &ma_params(0)).unwrap_err();
    assert!(matches!(e, lare::LareError::Nn(_)), "{e}");
    // no checkpoint at all
    assert!(matches!(load_lare(&tmp.path().join("none"), &off_params(0)).unwrap_err(), lare::LareError::Nn(_)));
    // a changed byte in a part: the unit's hashes catch it
    let data = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let state = data.join("loop").join("state.json");
    let text = std::fs::read_to_string(&state).unwrap().replacen("\"steps\": 45", "\"steps\": 46", 1);
    std::fs::write(&state, text).unwrap();
    assert!(matches!(load_lare(&dir, &off_params(0)).unwrap_err(), lare::LareError::Nn(_)));
}
