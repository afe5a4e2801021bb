//! The parameter convention (docs/conventions.md §1) for every parameter set of the crate:
//! `Default` is valid, a config file may omit any field (`{}` = defaults, one field = only that
//! field changed), a misspelt field is an error, every setter sets its field, and `check` names
//! the first bad field — including at the boundaries of each range.
use rl_core::Params;
use rlvr_select::embed::EmbedParams;
use rlvr_select::sim::{Dynamics, HmmParams, SimParams, SkillParams};
use rlvr_select::{
    DpsParams, DpsPrior, DrmParams, FilterParams, GdrmParams, HistoryResamplingParams, InitialBelief, MoppsAcquisition,
    MoppsParams, RiskFromRewards, SelectError,
};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// `check` fails and names `field`.
fn rejects<P: Params<Error = SelectError> + Debug>(p: P, field: &str) {
    match p.check() {
        Err(SelectError::InvalidParameter { name, .. }) => assert_eq!(name, field),
        other => panic!("expected `{field}` to be rejected, got {other:?}"),
    }
}

fn accepts<P: Params<Error = SelectError> + Debug>(p: P) {
    if let Err(e) = p.check() {
        panic!("expected valid parameters, got {e}");
    }
}

/// `{}` gives the defaults, `json` changes exactly what it names, a misspelt field is refused.
fn serde_defaults<P: DeserializeOwned + Default + PartialEq + Debug>(json: &str, want: P) {
    assert_eq!(serde_json::from_str::<P>("{}").unwrap(), P::default());
    assert_eq!(serde_json::from_str::<P>(json).unwrap(), want);
    assert!(serde_json::from_str::<P>(r#"{"no_such_field": 1}"#).is_err());
}

#[test]
fn dps_params() {
    let d = DpsParams::default();
    accepts(d);
    serde_defaults(r#"{"decay": 0.5}"#, d.decay(0.5));
    serde_defaults(r#"{"prior": "progress", "initial_belief": {"custom": [1.0, 2.0, 3.0]}}"#, {
        d.prior(DpsPrior::Progress).initial_belief(InitialBelief::Custom([1.0, 2.0, 3.0]))
    });
    assert_eq!(
        serde_json::from_str::<DpsParams>(r#"{"prior": {"constant": 2.0}}"#).unwrap().prior,
        DpsPrior::Constant(2.0)
    );
    let p = d.decay(0.25).prior(DpsPrior::Local).initial_belief(InitialBelief::Solved).entropy_weight(0.3);
    assert_eq!(
        (p.decay, p.prior, p.initial_belief, p.entropy_weight),
        (0.25, DpsPrior::Local, InitialBelief::Solved, 0.3)
    );
    for ok in [0.0, 1.0] {
        accepts(d.decay(ok));
    }
    rejects(d.decay(-0.01), "decay");
    rejects(d.decay(1.01), "decay");
    rejects(d.prior(DpsPrior::Constant(-1.0)), "prior");
    rejects(d.prior(DpsPrior::Constant(f32::NAN)), "prior");
    rejects(d.prior(DpsPrior::Custom([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 1.0]])), "prior");
    accepts(d.prior(DpsPrior::Custom([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])));
    rejects(d.initial_belief(InitialBelief::Custom([0.0, 0.0, 0.0])), "initial_belief");
    rejects(d.initial_belief(InitialBelief::Custom([1.0, -0.5, 1.0])), "initial_belief");
    rejects(d.initial_belief(InitialBelief::Custom([1.0, f32::INFINITY, 1.0])), "initial_belief");
    accepts(d.initial_belief(InitialBelief::Custom([0.0, 0.0, 2.0])));
    rejects(d.entropy_weight(f32::NAN), "entropy_weight");
    accepts(d.entropy_weight(-1.0));
    for (prior, m) in [
        (DpsPrior::Progress, [[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]]),
        (DpsPrior::Stability, [[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]),
        (DpsPrior::Local, [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]),
        (DpsPrior::Constant(0.5), [[0.5; 3]; 3]),
    ] {
        assert_eq!(prior.matrix(), m);
    }
    for (b, v) in [
        (InitialBelief::Uniform, [1.0 / 3.0; 3]),
        (InitialBelief::Unsolved, [1.0, 0.0, 0.0]),
        (InitialBelief::Partial, [0.0, 1.0, 0.0]),
        (InitialBelief::Solved, [0.0, 0.0, 1.0]),
    ] {
        assert_eq!(b.vector(), v);
    }
}

#[test]
fn dps_params_from_a_toml_table() {
    // the case the issue reported: a partial [selector.params] table
    #[derive(serde::Deserialize)]
    struct Run {
        selector: Sel,
    }
    #[derive(serde::Deserialize)]
    struct Sel {
        params: DpsParams,
    }
    let run: Run = toml::from_str("[selector.params]\ndecay = 0.5\n").unwrap();
    assert_eq!(run.selector.params, DpsParams::default().decay(0.5));
    assert!(toml::from_str::<Run>("[selector.params]\ndeacy = 0.5\n").is_err());
    let bad: Result<Run, _> = toml::from_str("[selector.params]\nprior = \"progres\"\n");
    assert!(bad.is_err());
}

#[test]
fn mopps_params() {
    let d = MoppsParams::default();
    accepts(d);
    serde_defaults(r#"{"decay": 0.5, "target": 0.4}"#, d.decay(0.5).target(0.4));
    serde_defaults(r#"{"acquisition": {"threshold": {"lo": 0.3, "hi": 0.7}}}"#, {
        d.acquisition(MoppsAcquisition::Threshold { lo: 0.3, hi: 0.7 })
    });
    assert_eq!(serde_json::from_str::<MoppsParams>(r#"{"acquisition": "top_k"}"#).unwrap(), d);
    let p = d.prior(2.0, 3.0);
    assert_eq!((p.prior_alpha, p.prior_beta), (2.0, 3.0));
    let p = d.prior_alpha(4.0).prior_beta(5.0);
    assert_eq!((p.prior_alpha, p.prior_beta), (4.0, 5.0));
    for ok in [0.0f32, 1.0] {
        accepts(d.decay(ok));
        accepts(d.target(f64::from(ok)));
    }
    rejects(d.prior_alpha(0.0), "prior_alpha");
    rejects(d.prior_alpha(f32::INFINITY), "prior_alpha");
    rejects(d.prior_beta(0.0), "prior_beta");
    rejects(d.prior_beta(f32::NAN), "prior_beta");
    rejects(d.decay(-0.1), "decay");
    rejects(d.decay(1.1), "decay");
    rejects(d.target(-0.1), "target");
    rejects(d.target(1.1), "target");
    accepts(d.acquisition(MoppsAcquisition::Threshold { lo: 0.0, hi: 1.0 }));
    accepts(d.acquisition(MoppsAcquisition::Threshold { lo: 0.5, hi: 0.5 }));
    for (lo, hi) in [(-0.1, 0.5), (0.2, 1.1), (0.6, 0.5)] {
        rejects(d.acquisition(MoppsAcquisition::Threshold { lo, hi }), "acquisition.threshold");
    }
}

#[test]
fn filter_params() {
    let d = FilterParams::default();
    assert_eq!(d, FilterParams::dynamic_sampling());
    accepts(d);
    accepts(FilterParams::online_difficulty());
    let odf = FilterParams::online_difficulty();
    assert_eq!((odf.p_lo, odf.p_hi, odf.strict), (0.25, 0.75, false));
    assert_eq!((odf.group_size, odf.max_gen_batches, odf.gen_batch), (8, 10, None));
    serde_defaults(r#"{"group_size": 4, "gen_batch": 16}"#, d.group_size(4).gen_batch(Some(16)));
    let p = d.max_gen_batches(3).band(0.1, 0.9, false);
    assert_eq!((p.max_gen_batches, p.p_lo, p.p_hi, p.strict), (3, 0.1, 0.9, false));
    accepts(d.group_size(2));
    rejects(d.group_size(1), "group_size");
    rejects(d.gen_batch(Some(0)), "gen_batch");
    accepts(d.gen_batch(Some(1)));
    accepts(d.max_gen_batches(0));
    rejects(d.band(-0.1, 0.5, true), "p_lo");
    rejects(d.band(0.2, 1.1, true), "p_hi");
    rejects(d.band(0.6, 0.5, true), "p_hi");
    accepts(d.band(0.5, 0.5, false));
    accepts(d.band(0.0, 1.0, false));
}

#[test]
fn history_and_robust_params() {
    let h = HistoryResamplingParams::default();
    accepts(h);
    serde_defaults(r#"{"epoch_steps": 5}"#, h.epoch_steps(Some(5)));
    rejects(h.epoch_steps(Some(0)), "epoch_steps");
    accepts(h.epoch_steps(Some(1)));

    let d = DrmParams::default();
    accepts(d);
    assert_eq!((d.group_size, d.risk_from_rewards), (1, RiskFromRewards::OneMinusSuccess));
    serde_defaults(
        r#"{"risk_from_rewards": "informativeness"}"#,
        d.risk_from_rewards(RiskFromRewards::Informativeness),
    );
    assert_eq!(d.group_size(3).group_size, 3);
    rejects(d.group_size(0), "group_size");

    let g = GdrmParams::default();
    accepts(g);
    assert_eq!(g.step_size, 1e-3);
    serde_defaults(r#"{"step_size": 0.01}"#, g.step_size(0.01));
    assert_eq!(
        g.risk_from_rewards(RiskFromRewards::Informativeness).risk_from_rewards,
        RiskFromRewards::Informativeness
    );
    accepts(g.step_size(0.0));
    rejects(g.step_size(-1e-9), "step_size");
    rejects(g.step_size(f64::INFINITY), "step_size");
    assert_eq!(RiskFromRewards::OneMinusSuccess.apply(0.25), 0.75);
    assert_eq!(RiskFromRewards::Informativeness.apply(0.25), 0.75);
    assert_eq!(RiskFromRewards::Informativeness.apply(0.5), 1.0);
}

#[test]
fn simulator_and_embedding_params() {
    let s = SimParams::default();
    accepts(s);
    serde_defaults(r#"{"n_prompts": 10, "dynamics": {"hmm": {}}}"#, {
        s.n_prompts(10).dynamics(Dynamics::Hmm(HmmParams::default()))
    });
    let p = s.group_size(4).feature_dim(3).feature_correlation(-0.5);
    assert_eq!((p.group_size, p.feature_dim, p.feature_correlation), (4, 3, -0.5));
    rejects(s.n_prompts(0), "n_prompts");
    rejects(s.group_size(1), "group_size");
    rejects(s.feature_dim(0), "feature_dim");
    accepts(s.feature_correlation(-1.0));
    accepts(s.feature_correlation(1.0));
    rejects(s.feature_correlation(1.01), "feature_correlation");
    rejects(s.feature_correlation(-1.01), "feature_correlation");
    let sk = SkillParams::default();
    serde_defaults(r#"{"forgetting": 0.1}"#, SkillParams { forgetting: 0.1, ..sk });
    let with = |k: SkillParams| s.dynamics(Dynamics::Skill(k));
    rejects(with(SkillParams { difficulty_mean: f64::NAN, ..sk }), "dynamics.skill.difficulty_mean");
    rejects(with(SkillParams { initial_skill: f64::INFINITY, ..sk }), "dynamics.skill.initial_skill");
    rejects(with(SkillParams { difficulty_std: -1.0, ..sk }), "dynamics.skill.difficulty_std");
    rejects(with(SkillParams { global_lr: -1.0, ..sk }), "dynamics.skill.global_lr");
    rejects(with(SkillParams { local_lr: -1.0, ..sk }), "dynamics.skill.local_lr");
    rejects(with(SkillParams { forgetting: 1.5, ..sk }), "dynamics.skill.forgetting");
    rejects(with(SkillParams { forgetting: -0.5, ..sk }), "dynamics.skill.forgetting");
    accepts(with(SkillParams { forgetting: 1.0, difficulty_std: 0.0, global_lr: 0.0, local_lr: 0.0, ..sk }));
    let hm = HmmParams::default();
    let hmm = |h: HmmParams| s.dynamics(Dynamics::Hmm(h));
    accepts(hmm(hm));
    rejects(hmm(HmmParams { phi_trained: [[1.0; 3]; 3], ..hm }), "dynamics.hmm.phi_trained");
    rejects(hmm(HmmParams { phi_idle: [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.1; 3]], ..hm }), "dynamics.hmm.phi_idle");
    accepts(hmm(HmmParams { phi_idle: [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.0; 3]], ..hm }));
    let neg = [[1.5, 0.0, 0.0], [-0.5, 1.0, 0.0], [0.0, 0.0, 1.0]];
    rejects(hmm(HmmParams { phi_idle: neg, ..hm }), "dynamics.hmm.phi_idle");
    rejects(hmm(HmmParams { initial: [0.5, 0.5, 0.5], ..hm }), "dynamics.hmm.initial");
    rejects(hmm(HmmParams { initial: [1.5, -0.5, 0.0], ..hm }), "dynamics.hmm.initial");

    let e = EmbedParams::default();
    accepts(e);
    serde_defaults(r#"{"dim": 8, "seed": 3}"#, e.dim(8).seed(3));
    let p = e.ngrams(1, 5).lowercase(false);
    assert_eq!((p.n_min, p.n_max, p.lowercase), (1, 5, false));
    rejects(e.dim(0), "dim");
    rejects(e.ngrams(0, 3), "n_min");
    rejects(e.ngrams(4, 3), "n_max");
    accepts(e.ngrams(3, 3));
}

#[cfg(feature = "neural")]
mod neural {
    use super::*;
    use rlvr_select::neural::{
        AllocationParams, GpsParams, MptsParams, PdtsDiversity, PdtsParams, Reduction, RiskLearnerParams,
    };

    #[test]
    fn gps_and_allocation_params() {
        let d = GpsParams::default();
        accepts(d);
        serde_defaults(r#"{"lr": 0.01, "seed": 9}"#, d.lr(0.01).seed(9));
        let p = d
            .z_dim(3)
            .h_dim(5)
            .train_steps(7)
            .train_samples(2)
            .kl_weight(0.5)
            .predict_samples(4)
            .target(0.3)
            .diversity(0.1, 0.2)
            .warmup_steps(6)
            .distance_pairs(12);
        assert_eq!((p.z_dim, p.h_dim, p.train_steps, p.train_samples, p.predict_samples), (3, 5, 7, 2, 4));
        assert_eq!((p.kl_weight, p.target, p.intra_weight, p.inter_weight), (0.5, 0.3, 0.1, 0.2));
        assert_eq!((p.warmup_steps, p.distance_pairs), (6, 12));
        rejects(d.z_dim(0), "z_dim");
        rejects(d.h_dim(0), "h_dim");
        rejects(d.train_steps(0), "train_steps");
        rejects(d.train_samples(0), "train_samples");
        rejects(d.predict_samples(0), "predict_samples");
        rejects(d.predict_samples((1 << 16) + 1), "predict_samples");
        accepts(d.predict_samples(1 << 16));
        rejects(d.lr(0.0), "lr");
        rejects(d.lr(f64::NAN), "lr");
        rejects(d.kl_weight(-1.0), "kl_weight");
        rejects(d.diversity(-0.1, 0.0), "intra_weight");
        rejects(d.diversity(0.0, f64::INFINITY), "inter_weight");
        accepts(d.diversity(0.0, 0.0).kl_weight(0.0));
        rejects(d.target(1.5), "target");
        rejects(d.target(-0.5), "target");
        accepts(d.target(0.0));
        accepts(d.target(1.0));

        let a = AllocationParams::with_budget(40);
        assert_eq!(a, AllocationParams::default().budget(40));
        accepts(a);
        serde_defaults(r#"{"budget": 40}"#, a);
        let p = a.bins(4).samples(2, 8);
        assert_eq!((p.bins, p.min_samples, p.max_samples), (4, 2, 8));
        rejects(a.bins(0), "bins");
        rejects(a.samples(9, 8), "min_samples");
        accepts(a.samples(8, 8));
    }

    #[test]
    fn learner_mpts_pdts_params() {
        let l = RiskLearnerParams::default();
        assert_eq!(l, RiskLearnerParams::sinusoid());
        accepts(l);
        accepts(RiskLearnerParams::domain_randomisation());
        accepts(RiskLearnerParams::meta_rl());
        serde_defaults(r#"{"reduction": "mean", "standardize": true}"#, {
            l.reduction(Reduction::Mean).standardize(true)
        });
        let p = l.dims(3, 4, 5).lr(0.1).train_steps(2).train_samples(3).kl_weight(0.0);
        assert_eq!((p.r_dim, p.z_dim, p.h_dim, p.lr, p.train_steps, p.train_samples), (3, 4, 5, 0.1, 2, 3));
        accepts(p);
        rejects(l.dims(0, 1, 1), "r_dim");
        rejects(l.dims(1, 0, 1), "z_dim");
        rejects(l.dims(1, 1, 0), "h_dim");
        rejects(l.train_steps(0), "train_steps");
        rejects(l.train_samples(0), "train_samples");
        rejects(l.dims(1, 1, (1 << 20) + 1), "h_dim");
        rejects(l.lr(-1.0), "lr");
        rejects(l.kl_weight(f64::NAN), "kl_weight");
        rejects(l.kl_weight(-0.1), "kl_weight");

        let m = MptsParams::default();
        accepts(m);
        accepts(MptsParams::domain_randomisation());
        accepts(MptsParams::meta_rl());
        assert_eq!(MptsParams::meta_rl().warmup_steps, 50);
        serde_defaults(r#"{"samples": 5, "learner": {"lr": 0.01}}"#, m.samples(5).learner(l.lr(0.01)));
        let p = m
            .gammas(2.0, 4.0)
            .random_ratio(0.5)
            .warmup_steps(3)
            .risk_from_rewards(RiskFromRewards::Informativeness)
            .seed(8);
        assert_eq!((p.gamma_mean, p.gamma_std, p.random_ratio, p.warmup_steps, p.seed), (2.0, 4.0, 0.5, 3, 8));
        assert_eq!(p.risk_from_rewards, RiskFromRewards::Informativeness);
        rejects(m.samples(1), "samples");
        accepts(m.samples(2));
        rejects(m.samples((1 << 16) + 1), "samples");
        rejects(m.gammas(f64::NAN, 1.0), "gamma_mean");
        rejects(m.gammas(1.0, f64::INFINITY), "gamma_std");
        accepts(m.gammas(-1.0, 0.0));
        rejects(m.random_ratio(1.5), "random_ratio");
        rejects(m.random_ratio(-0.5), "random_ratio");
        accepts(m.random_ratio(1.0));
        rejects(m.learner(l.lr(0.0)), "learner.lr");

        let p = PdtsParams::default();
        accepts(p);
        accepts(PdtsParams::domain_randomisation(0.05));
        assert_eq!(PdtsParams::domain_randomisation(0.05).diversity, PdtsDiversity::MinDistance);
        serde_defaults(r#"{"diversity": "min_distance"}"#, p.diversity(PdtsDiversity::MinDistance));
        let q = p
            .gamma_div(2.0)
            .predict_samples(7)
            .random_ratio(0.25)
            .warmup_steps(2)
            .risk_from_rewards(RiskFromRewards::Informativeness)
            .seed(4)
            .learner(l.lr(0.2));
        assert_eq!(
            (q.gamma_div, q.predict_samples, q.random_ratio, q.warmup_steps, q.seed, q.learner.lr),
            (2.0, 7, 0.25, 2, 4, 0.2)
        );
        assert_eq!(q.risk_from_rewards, RiskFromRewards::Informativeness);
        rejects(p.gamma_div(-1.0), "gamma_div");
        rejects(p.gamma_div(f64::NAN), "gamma_div");
        accepts(p.gamma_div(0.0));
        rejects(p.predict_samples(0), "predict_samples");
        rejects(p.predict_samples((1 << 16) + 1), "predict_samples");
        rejects(p.random_ratio(2.0), "random_ratio");
        rejects(p.learner(l.train_steps(0)), "learner.train_steps");
    }
}
