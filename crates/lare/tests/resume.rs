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
use rl_agents::{Ppo, PpoParams, Sac, SacParams};
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
