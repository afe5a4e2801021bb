//! Learned bidders trained on logged trajectories (feature `tch`): behaviour cloning
//! ([`BcTrainer`]), as AuctionNet's BC baseline (`strategy_train_env/bidding_train_env/baseline/bc`).
//!
//! ```text
//! minimise  E_(s,a)~D [ (π_θ(norm(s)) − a')² ],   a' = clip(a / CPA (cpa_relative) or a, 0, max_target)
//! ```
//!
//! over the valid steps of the dataset (up to each trajectory's first `done`). The trained
//! network is exported as an [`MlpPolicy`] (plain Rust), so the bidder runs without libtorch.
//!
//! The other learned baselines: IQL in [`crate::iql`] (`offline-rl`'s algorithm), the decision
//! transformer in [`crate::dt`].

use std::path::Path;

use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Device, Kind, Tensor};

use crate::bidder::STATE_DIM;
use crate::dataset::TrajectoryDataset;
use crate::error::{check_positive, AigbError, Result};
use crate::policy::{Dense, MlpPolicy, StateNorm};
use rl_core::Params;
use rl_nn::optim::{Adam, AdamParams};
use rl_nn::{Activation, Mlp, MlpConfig};

/// Checkpoint format version of [`BcTrainer`].
pub const BC_FORMAT_VERSION: u32 = 1;
const BC_KIND: &str = "aigb.bc_trainer";

/// Parameters of [`BcTrainer`] (AuctionNet's BC: 16 → 128 → 128 → 1, ReLU, Adam 1e-4,
/// batch 100, 20 000 steps).
///
/// | name | default | purpose | range |
/// |---|---|---|---|
/// | `hidden` | [128, 128] | hidden widths | each ≥ 1 |
/// | `lr` | 1e-4 | Adam step size | > 0 |
/// | `batch_size` | 100 | steps per batch | ≥ 1 |
/// | `cpa_relative` | true | regress `α / CPA` (our choice: the state has no CPA; AuctionNet regresses `α`) | |
/// | `max_target` | 10 | targets clipped to `[0, max_target]` (our choice: pacing bidders that win nothing raise α by 1.2 per tick, giving heavy-tailed logged actions) | > 0 |
/// | `seed` | 0 | initialisation and batch sampling | any |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BcParams {
    /// Hidden widths.
    pub hidden: Vec<i64>,
    /// Learning rate.
    pub lr: f64,
    /// Batch size.
    pub batch_size: usize,
    /// Regress α / CPA.
    pub cpa_relative: bool,
    /// Target clip.
    pub max_target: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for BcParams {
    fn default() -> Self {
        Self { hidden: vec![128, 128], lr: 1e-4, batch_size: 100, cpa_relative: true, max_target: 10.0, seed: 0 }
    }
}

crate::traffic::setters!(BcParams { hidden: Vec<i64>, lr: f64, batch_size: usize, cpa_relative: bool, max_target: f64, seed: u64 });

impl rl_core::Params for BcParams {
    type Error = AigbError;
    fn validate(&self) -> Result<()> {
        if let Some((i, h)) = self.hidden.iter().enumerate().find(|(_, h)| **h < 1) {
            return Err(AigbError::invalid(format!("hidden[{i}]"), h, "must be >= 1"));
        }
        check_positive("lr", self.lr)?;
        check_positive("max_target", self.max_target)?;
        if self.batch_size == 0 {
            return Err(AigbError::invalid("batch_size", 0, "must be >= 1"));
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct BcStateRef<'a> {
    params: &'a BcParams,
    norm: &'a StateNorm,
    data_fingerprint: u64,
    steps: u64,
    rng: &'a rl_core::SeededRng,
}

#[derive(Deserialize)]
struct BcState {
    params: rl_core::Valid<BcParams>,
    norm: StateNorm,
    data_fingerprint: u64,
    steps: u64,
    rng: rl_core::SeededRng,
}

/// Behaviour cloning of the logged bid coefficient (CPU).
#[derive(Debug)]
pub struct BcTrainer {
    params: rl_core::Valid<BcParams>,
    vs: VarStore,
    net: Mlp,
    opt: Adam,
    norm: StateNorm,
    states: Vec<f32>,
    targets: Vec<f32>,
    fingerprint: u64,
    rng: rl_core::SeededRng,
    steps: u64,
}

impl BcTrainer {
    /// A trainer on the valid steps of `data` (state standardisation fitted on them).
    ///
    /// # Errors
    /// [`AigbError::Empty`] without valid steps; network construction errors.
    pub fn new(params: rl_core::Valid<BcParams>, data: &TrajectoryDataset) -> Result<Self> {
        let mut raw: Vec<[f32; STATE_DIM]> = Vec::new();
        let mut targets = Vec::new();
        for tr in &data.trajectories {
            for s in &tr.steps[..tr.active_len()] {
                raw.push(s.state);
                let a = if params.cpa_relative { s.action / tr.cpa } else { s.action };
                targets.push(a.clamp(0.0, params.max_target) as f32);
            }
        }
        let norm = StateNorm::fit(&raw)?;
        let states: Vec<f32> = raw.iter().flat_map(|s| norm.apply(s)).collect();
        let fingerprint = fingerprint(&states, &targets);
        let mut rng = rl_core::rng_from_seed(rl_core::derive_seed_named(params.seed, "bc"));
        let vs = VarStore::new(Device::Cpu);
        let cfg = MlpConfig::new(params.hidden.clone()).activation(Activation::Relu).check()?;
        let net = Mlp::new(&vs.root(), STATE_DIM as i64, 1, &cfg, &mut rng)?;
        let opt = Adam::for_var_store(AdamParams::default().lr(params.lr).check()?, &vs)?;
        Ok(Self { params, vs, net, opt, norm, states, targets, fingerprint, rng, steps: 0 })
    }

    /// Training examples.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// Whether there is no example (never, after `new`).
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Adam steps taken (counting those of a loaded checkpoint).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The variable store (the MLP's layers under `0.`, `1.`, ...).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// Runs `steps` Adam steps on random batches; `on_step(step, loss)` sees each loss.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn train(&mut self, steps: usize, on_step: &mut dyn FnMut(u64, f64)) -> Result<f64> {
        use rand::Rng;
        let b = self.params.batch_size;
        let n = self.targets.len();
        let mut xs = vec![0.0f32; b * STATE_DIM];
        let mut ys = vec![0.0f32; b];
        let mut last = f64::NAN;
        for _ in 0..steps {
            for j in 0..b {
                let i = self.rng.random_range(0..n);
                xs[j * STATE_DIM..(j + 1) * STATE_DIM]
                    .copy_from_slice(&self.states[i * STATE_DIM..(i + 1) * STATE_DIM]);
                ys[j] = self.targets[i];
            }
            let x = Tensor::from_slice(&xs).f_reshape([b as i64, STATE_DIM as i64])?;
            let y = Tensor::from_slice(&ys).f_reshape([b as i64, 1])?;
            let pred = self.net.f_forward(&x)?;
            let loss = (pred - y).f_square()?.f_mean(Kind::Float)?;
            self.opt.backward_step(&loss)?;
            last = loss.f_double_value(&[])?;
            self.steps += 1;
            on_step(self.steps, last);
        }
        Ok(last)
    }

    /// Mean squared error over all examples (in the regressed units).
    ///
    /// # Errors
    /// libtorch failures.
    pub fn mse(&self) -> Result<f64> {
        let n = self.targets.len() as i64;
        let x = Tensor::from_slice(&self.states).f_reshape([n, STATE_DIM as i64])?;
        let y = Tensor::from_slice(&self.targets).f_reshape([n, 1])?;
        let pred = tch::no_grad(|| self.net.f_forward(&x))?;
        Ok((pred - y).f_square()?.f_mean(Kind::Float)?.f_double_value(&[])?)
    }

    /// Exports the network as a plain-Rust policy named `name`.
    ///
    /// # Errors
    /// A missing variable; libtorch failures.
    pub fn policy(&self, name: &str) -> Result<MlpPolicy> {
        let vars = self.vs.variables();
        let mut layers = Vec::new();
        for i in 0..=self.params.hidden.len() {
            let get = |k: &str| -> Result<Tensor> {
                vars.get(&format!("{i}.{k}"))
                    .map(|t| t.shallow_clone())
                    .ok_or_else(|| AigbError::NotReady(format!("BC variable {i}.{k} missing")))
            };
            let (w, bias) = (get("weight")?, get("bias")?);
            let size = w.size();
            let (output, input) = (size[0] as usize, size[1] as usize);
            let weight: Vec<f32> = Vec::<f32>::try_from(w.f_contiguous()?.f_view([-1])?)?;
            let bias: Vec<f32> = Vec::<f32>::try_from(bias.f_contiguous()?)?;
            layers.push(Dense { input, output, weight, bias });
        }
        let p = MlpPolicy {
            norm: self.norm.clone(),
            layers,
            cpa_relative: self.params.cpa_relative,
            name: name.to_owned(),
        };
        p.validate()?;
        Ok(p)
    }

    fn parts(&self) -> rl_nn::parts::Parts<'_> {
        rl_nn::parts::Parts::new().store("model", &self.vs).optim("model", &self.opt)
    }

    /// Writes a checkpoint directory ([`rl_nn::checkpoint::save_dir`], kind `aigb.bc_trainer`,
    /// format [`BC_FORMAT_VERSION`]): parameters, state normaliser, the data's fingerprint, the
    /// step count and the batch generator in `state.json`; the weights (`model.`) and the Adam
    /// moments (`optim.model.`) in `tensors.safetensors` ([`rl_nn::parts`]). Training on from a loaded checkpoint gives
    /// the same numbers, bit for bit, as training on without stopping.
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = BcStateRef {
            params: &self.params,
            norm: &self.norm,
            data_fingerprint: self.fingerprint,
            steps: self.steps,
            rng: &self.rng,
        };
        let tensors = self.parts().collect()?;
        rl_nn::checkpoint::save_dir(dir, BC_KIND, BC_FORMAT_VERSION, &state, &tensors)?;
        Ok(())
    }

    /// Restores a checkpoint written by [`BcTrainer::save`] for the same parameters and data;
    /// everything is checked before anything changes (on an error the trainer is as it was).
    ///
    /// # Errors
    /// [`AigbError::Nn`] for a missing, truncated or altered file, another kind or format
    /// version, tensors of other names or shapes, or non-finite values;
    /// [`AigbError::Corrupt`] for other parameters, another dataset or another normaliser.
    pub fn load(&mut self, dir: &Path) -> Result<()> {
        let ck = rl_nn::checkpoint::load_dir::<BcState>(dir, BC_KIND, BC_FORMAT_VERSION)?;
        let corrupt = |reason: String| AigbError::Corrupt { path: dir.to_owned(), reason };
        if *ck.state.params != *self.params {
            return Err(corrupt("the checkpoint's parameters differ from this trainer's".into()));
        }
        if ck.state.data_fingerprint != self.fingerprint {
            return Err(corrupt("the checkpoint was trained on another dataset".into()));
        }
        if ck.state.norm != self.norm {
            return Err(corrupt("the checkpoint's state normaliser differs from this data's".into()));
        }
        self.parts().check(&ck.tensors, &ck.path)?;
        rl_nn::parts::restore(&[("model", &self.vs)], &mut [("model", &mut self.opt)], &mut [], &ck.tensors, &ck.path)?;
        self.steps = ck.state.steps;
        self.rng = ck.state.rng;
        Ok(())
    }
}

/// A hash of the training arrays (normalised states and targets), so a checkpoint resumes only
/// on the data it was trained on.
fn fingerprint(states: &[f32], targets: &[f32]) -> u64 {
    let mut h = rl_core::seed::splitmix64(targets.len() as u64);
    for x in states.iter().chain(targets) {
        h = rl_core::seed::splitmix64(h ^ u64::from(x.to_bits()));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{toy_dataset, ToyStep};

    /// A dataset whose action is a known function of the state: α / CPA = 0.5 + budget_left.
    fn toy() -> TrajectoryDataset {
        toy_dataset(40, 48, 80.0, |k, t| {
            let mut state = [0.0f32; STATE_DIM];
            state[0] = (48 - t) as f32 / 48.0;
            state[1] = ((k * 7 + t * 3) % 48) as f32 / 48.0;
            ToyStep::new(state, 80.0 * (0.5 + f64::from(state[1])))
        })
    }

    #[test]
    fn bc_fits_a_known_policy_and_exports_it() {
        tch::set_num_threads(1); // a tiny network: thread hand-offs cost more than they save
        let ds = toy();
        let mut bc = BcTrainer::new(BcParams::default().lr(3e-3).hidden(vec![32, 32]).check().unwrap(), &ds).unwrap();
        let before = bc.mse().unwrap();
        bc.train(300, &mut |_, _| {}).unwrap();
        let after = bc.mse().unwrap();
        assert!(after < 0.05 * before && after < 2e-3, "{before} -> {after}");
        let pol = bc.policy("bc").unwrap();
        let s = ds.trajectories[3].steps[5].state;
        let a = pol.alpha(&s, 80.0);
        assert!((a - ds.trajectories[3].steps[5].action).abs() < 4.0, "{a}");
        // same seed, same weights
        let mut bc2 = BcTrainer::new(BcParams::default().lr(3e-3).hidden(vec![32, 32]).check().unwrap(), &ds).unwrap();
        bc2.train(300, &mut |_, _| {}).unwrap();
        assert_eq!(bc2.policy("bc").unwrap(), pol);
        assert!(BcParams::default().batch_size(0).check().is_err());
        assert!(BcTrainer::new(BcParams::default().check().unwrap(), &TrajectoryDataset::default()).is_err());
    }

    #[test]
    fn bc_resumes_bit_for_bit_and_refuses_foreign_checkpoints() {
        tch::set_num_threads(1);
        let ds = toy();
        let params = || BcParams::default().lr(3e-3).hidden(vec![16]).batch_size(16).check().unwrap();
        let weights = |bc: &BcTrainer| -> Vec<(String, Vec<f32>)> {
            let mut v: Vec<(String, Vec<f32>)> = bc
                .var_store()
                .variables()
                .into_iter()
                .map(|(k, t)| (k, Vec::<f32>::try_from(t.flatten(0, -1)).unwrap()))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        // uninterrupted: 30 steps
        let mut straight = BcTrainer::new(params(), &ds).unwrap();
        let mut losses_a = Vec::new();
        straight.train(30, &mut |_, l| losses_a.push(l)).unwrap();
        // interrupted after 12, saved, loaded into a fresh trainer, 18 more
        let dir = tempfile::tempdir().unwrap();
        let mut first = BcTrainer::new(params(), &ds).unwrap();
        let mut losses_b = Vec::new();
        first.train(12, &mut |_, l| losses_b.push(l)).unwrap();
        first.save(dir.path()).unwrap();
        let mut resumed = BcTrainer::new(params(), &ds).unwrap();
        resumed.load(dir.path()).unwrap();
        assert_eq!(resumed.steps(), 12);
        resumed.train(18, &mut |_, l| losses_b.push(l)).unwrap();
        assert_eq!(losses_a, losses_b, "every loss equal");
        assert_eq!(weights(&straight), weights(&resumed), "weights equal");
        assert_eq!(straight.policy("bc").unwrap(), resumed.policy("bc").unwrap());
        // the comparison has teeth: a trainer that skipped the load ends elsewhere
        let mut fresh = BcTrainer::new(params(), &ds).unwrap();
        fresh.train(18, &mut |_, _| {}).unwrap();
        assert_ne!(weights(&fresh), weights(&straight));
        // other parameters, other data, a corrupted file: typed errors, the trainer unchanged
        let mut other =
            BcTrainer::new(BcParams::default().lr(1e-3).hidden(vec![16]).batch_size(16).check().unwrap(), &ds).unwrap();
        assert!(matches!(other.load(dir.path()), Err(AigbError::Corrupt { .. })));
        let ds2 = toy_dataset(20, 48, 80.0, |_, t| ToyStep::new([t as f32 / 48.0; STATE_DIM], 40.0));
        let mut other_data = BcTrainer::new(params(), &ds2).unwrap();
        assert!(matches!(other_data.load(dir.path()), Err(AigbError::Corrupt { .. })));
        assert_eq!(other_data.steps(), 0);
        let t = dir.path().join("tensors.safetensors");
        let mut bytes = std::fs::read(&t).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x5a;
        std::fs::write(&t, bytes).unwrap();
        let mut again = BcTrainer::new(params(), &ds).unwrap();
        assert!(matches!(again.load(dir.path()), Err(AigbError::Nn(_))));
        assert_eq!(again.steps(), 0);
        assert!(matches!(again.load(&dir.path().join("missing")), Err(AigbError::Nn(_))));
    }
}
