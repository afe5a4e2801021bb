//! Config files as untrusted input: every key a file writes is used or refused by name (also
//! next to a `kind` without fields), every error names its key by its full dotted path, and
//! defaults that must equal another value follow it.

use rlvr_train::{RunConfig, SelectorConfig, TrainError};

/// Parses `text`, which must be refused, and returns the error.
fn refused(text: &str) -> TrainError {
    match RunConfig::from_toml_str(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// The dotted key an error names: `ConfigParse::key`, `InvalidConfig::field` or an upstream
/// crate's `InvalidParameter::name`.
fn key_of(e: &TrainError) -> String {
    match e {
        TrainError::ConfigParse { key, .. } => key.clone(),
        TrainError::InvalidConfig { field, .. } => field.clone(),
        TrainError::Select(rlvr_select::SelectError::InvalidParameter { name, .. })
        | TrainError::Task(rlvr_tasks::TaskError::InvalidParameter { name, .. })
        | TrainError::Lm(rl_lm::LmError::InvalidConfig { name, .. })
        | TrainError::Loss(rlvr_core::RlvrCoreError::InvalidParameter { name, .. })
        | TrainError::Replay(rlvr_replay::ReplayError::InvalidParameter { name, .. })
        | TrainError::Replay(rlvr_replay::ReplayError::Rlvr(rlvr_core::RlvrCoreError::InvalidParameter {
            name, ..
        })) => name.clone(),
        other => panic!("no key in {other:?}"),
    }
}

/// `text` is refused with an error naming `key`, in the variant and in the message.
fn refused_at(text: &str, key: &str) -> TrainError {
    let e = refused(text);
    assert_eq!(key_of(&e), key, "{text}\n=> {e}");
    assert!(e.to_string().contains(&format!("`{key}`")), "{text}\n=> {e}");
    e
}

#[test]
fn a_stray_key_next_to_a_kind_without_fields_is_refused() {
    assert_eq!(
        RunConfig::from_toml_str("[selector]\nkind = \"uniform\"\n").map(|c| c.selector).ok(),
        Some(SelectorConfig::Uniform)
    );
    let e = refused_at("[selector]\nkind = \"uniform\"\nfoo = 1\n", "selector.foo");
    assert!(matches!(e, TrainError::ConfigParse { .. }), "{e:?}");
    // Every selector kind refuses a stray key, with or without fields of its own.
    for kind in ["uniform", "history_resampling", "dynamic_sampling", "dps", "gps", "drm", "gdrm"] {
        refused_at(&format!("[selector]\nkind = \"{kind}\"\nstray = 1\n"), "selector.stray");
    }
    // The same for the tagged enums of rlvr-core inside the loss and the replay buffer.
    refused_at("[loss.policy]\nkind = \"reinforce\"\neps_high = 0.2\n", "loss.policy.eps_high");
    refused_at("[loss.aggregation]\nmode = \"token-mean\"\nscale = 3.0\n", "loss.aggregation.scale");
    refused_at("[replay.estimator]\nkind = \"rloo\"\neps = 1e-6\n", "replay.estimator.eps");
}

#[test]
fn replay_group_size_follows_rl_group_size_unless_set() -> anyhow::Result<()> {
    // Only `[rl] group_size` changed: the replay buffer follows it.
    let c = RunConfig::from_toml_str("[rl]\ngroup_size = 4\n")?;
    anyhow::ensure!(c.replay.as_ref().map(|r| r.group_size) == Some(4), "{:?}", c.replay);
    anyhow::ensure!(c.replay_params().group_size == 4);
    for text in ["replay = true\n[rl]\ngroup_size = 4\n", "[rl]\ngroup_size = 4\n[replay]\nmax_age = 2\n"] {
        let c = RunConfig::from_toml_str(text)?;
        anyhow::ensure!(c.replay.as_ref().map(|r| r.group_size) == Some(4), "{text}");
    }
    // Set explicitly: it must agree, and the error names both keys.
    let c = RunConfig::from_toml_str("[rl]\ngroup_size = 4\n[replay]\ngroup_size = 4\n")?;
    anyhow::ensure!(c.replay.as_ref().map(|r| r.group_size) == Some(4));
    let e = refused_at("[rl]\ngroup_size = 4\n[replay]\ngroup_size = 8\n", "replay.group_size");
    anyhow::ensure!(e.to_string().contains("rl.group_size = 4"), "{e}");
    refused_at("[replay]\ngroup_size = 4\n", "replay.group_size");
    // What a run writes reads back as the same config.
    let back = RunConfig::from_toml_str(&c.to_toml()?)?;
    anyhow::ensure!(back == c);
    Ok(())
}

#[test]
fn replay_errors_name_the_key_not_an_untagged_enum() {
    for (text, key) in [
        ("[replay]\nfoo = 1\n", "replay.foo"),
        ("[replay]\nmax_age = \"x\"\n", "replay.max_age"),
        ("replay = 3\n", "replay"),
        ("replay = \"on\"\n", "replay"),
        ("[replay]\ncapacity_groups = 0\n", "replay.capacity_groups"),
    ] {
        let e = refused_at(text, key);
        assert!(!e.to_string().contains("untagged"), "{e}");
    }
    let e = refused("[replay]\nfoo = 1\n");
    assert!(e.to_string().contains("unknown field `foo`"), "{e}");
}

#[test]
fn parse_errors_carry_their_full_dotted_path() {
    for (text, key) in [
        ("[rl]\nstepz = 3\n", "rl.stepz"),
        ("[model]\nd_model = \"x\"\n", "model.d_model"),
        ("[selector]\nkind = \"dps\"\n[selector.params]\ndecy = 0.5\n", "selector.params.decy"),
        ("[selector]\nkind = \"dps\"\n[selector.params]\ndecay = \"x\"\n", "selector.params.decay"),
        ("[selector]\nkind = \"oracle\"\n", "selector.kind"),
        ("[selector]\nkind = 3\n", "selector.kind"),
        ("[selector]\nmax_gen_batches = 3\n", "selector.kind"),
        ("[selector]\nkind = \"drm\"\nrisk_from_rewards = \"x\"\n", "selector.risk_from_rewards"),
        ("[[task.mix]]\ntrain_prompts = 1\n[task.mix.pool]\nfamiy = 1\n", "task.mix[0].pool.famiy"),
        ("tpyo = 1\n", "tpyo"),
        ("[loss.policy]\nkind = \"ppo\"\nclip_hgh = 0.2\n", "loss.policy.clip_hgh"),
        ("[loss.policy]\nkind = \"lpo\"\nprojection = 3\n", "loss.policy.projection"),
        ("[loss.policy]\nkind = \"ppo\"\n[loss.policy.lpo]\nprojection = \"forward\"\n", "loss.policy.lpo"),
    ] {
        let e = refused_at(text, key);
        assert!(matches!(e, TrainError::ConfigParse { .. }), "{e:?}");
    }
    // A syntax error is still a ConfigParse error with its line.
    let e = refused("seed = 1\n[selector\n");
    assert!(matches!(&e, TrainError::ConfigParse { message, .. } if message.contains("line 2")), "{e}");
}

#[test]
fn validation_errors_carry_their_full_dotted_path() {
    for (text, key) in [
        ("[selector]\nkind = \"dps\"\n[selector.params]\ndecay = 2.0\n", "selector.params.decay"),
        ("[selector]\nkind = \"mopps\"\n[selector.params]\ndecay = 2.0\n", "selector.params.decay"),
        ("[selector]\nkind = \"online_difficulty\"\nmax_gen_batches = 0\n", "selector.max_gen_batches"),
        ("[selector]\nkind = \"online_difficulty\"\np_lo = 0.9\np_hi = 0.1\n", "selector.p_hi"),
        ("[selector]\nkind = \"gps\"\nembed_dim = 0\n", "selector.embed_dim"),
        ("[model]\nd_model = 0\n", "model.d_model"),
        ("[task.pool]\nmax_draws = 0\n", "task.pool.max_draws"),
        ("[[task.mix]]\ntrain_prompts = 1\n[task.mix.pool]\nmax_draws = 0\n", "task.mix[0].pool.max_draws"),
        ("[loss]\nentropy_coef = nan\n", "loss.entropy_coef"),
        ("[rl]\ntop_p = 0.0\n", "rl.top_p"),
        ("device = \"tpu\"\n", "device"),
    ] {
        refused_at(text, key);
    }
}
