//! Property tests of the replay buffer's invariants over random step sequences.
use std::collections::HashMap;

use proptest::prelude::*;
use rlvr_replay::{
    FilledBatch, FlatResponses, Group, GroupReplayBuffer, Origin, Params, Priority, ReplayParams, Sampling, Shortfall,
};

/// One input group: reward pattern (0 all-fail, 1 all-success, 2/3 mixed), token length seed.
type Spec = (u8, u8);

#[derive(Debug, Clone)]
struct Scenario {
    k: usize,
    capacity_groups: usize,
    capacity_in_groups_bytes: u64,
    max_age: u64,
    max_replays: u32,
    priority: u8,
    keep: bool,
    /// Per step: version increment and the step's groups.
    steps: Vec<(u64, Vec<Spec>)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        2usize..5,
        1usize..8,
        1u64..8,
        0u64..4,
        1u32..4,
        0u8..4,
        any::<bool>(),
        prop::collection::vec((0u64..3, prop::collection::vec((0u8..4, 0u8..6), 0..7)), 1..12),
    )
        .prop_map(|(k, capacity_groups, capacity_in_groups_bytes, max_age, max_replays, priority, keep, steps)| {
            Scenario { k, capacity_groups, capacity_in_groups_bytes, max_age, max_replays, priority, keep, steps }
        })
}

fn make_group(prompt: u64, version: u64, k: usize, (pattern, len): Spec) -> Group {
    let lengths: Vec<usize> = (0..k).map(|i| 1 + (usize::from(len) + i) % 4).collect();
    let n: usize = lengths.iter().sum();
    let rewards = (0..k)
        .map(|i| match pattern {
            0 => 0.0,
            1 => 1.0,
            2 => (i % 2) as f32,
            _ => (i == 0) as u8 as f32 * 0.5 + 0.25,
        })
        .collect();
    let flat = FlatResponses {
        tokens: (0..n as u32).map(|t| t + prompt as u32 * 1000).collect(),
        behaviour_logp: (0..n).map(|t| -0.01 * (t as f32 + version as f32 + 1.0)).collect(),
        mask: Vec::new(),
        lengths,
        rewards,
    };
    match Group::from_flat(prompt, version, flat) {
        Ok(g) => g,
        Err(e) => unreachable!("generator builds valid groups: {e}"),
    }
}

fn params(s: &Scenario) -> ReplayParams {
    let one_group_bytes = make_group(0, 0, s.k, (2, 5)).stored_bytes() as u64 + 64;
    let (priority, sampling) = match s.priority {
        0 => (Priority::Recency, Sampling::Greedy),
        1 => (Priority::AdvantageStd, Sampling::Proportional),
        2 => (Priority::QualityRecency { decay: 0.7 }, Sampling::Greedy),
        _ => (Priority::AdvantageStd, Sampling::Greedy),
    };
    ReplayParams::new(s.k)
        .capacity_groups(s.capacity_groups)
        .capacity_bytes(s.capacity_in_groups_bytes * one_group_bytes)
        .max_age(s.max_age)
        .max_replays(s.max_replays)
        .priority(priority)
        .sampling(sampling)
        .shortfall(if s.keep { Shortfall::KeepIneffective } else { Shortfall::Drop })
        .seed(7)
}

/// What a batch looked like (slot, prompt, origin, advantages), for comparing runs.
type Fingerprint = Vec<(usize, u64, String, Vec<f32>)>;

fn fingerprint(b: &FilledBatch) -> Fingerprint {
    b.iter().map(|g| (g.slot(), g.group().prompt_id(), format!("{:?}", g.origin()), g.advantages().to_vec())).collect()
}

/// Runs the scenario, checking the invariants after every fill; returns per-step fingerprints.
fn run(s: &Scenario, resume_at: Option<usize>) -> Result<Vec<Fingerprint>, TestCaseError> {
    let p = params(s);
    let mut buf = GroupReplayBuffer::new(p.clone().check().map_err(|e| TestCaseError::fail(e.to_string()))?)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut originals: HashMap<u64, Group> = HashMap::new();
    let mut version = 0u64;
    let mut prompt = 0u64;
    let mut out = Vec::new();
    for (step, (dv, specs)) in s.steps.iter().enumerate() {
        if resume_at == Some(step) {
            let json = serde_json::to_string(&buf.checkpoint()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let ck = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
            buf = GroupReplayBuffer::restore(ck).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        version += dv;
        let groups: Vec<Group> = specs
            .iter()
            .map(|&spec| {
                prompt += 1;
                make_group(prompt, version, s.k, spec)
            })
            .collect();
        for g in &groups {
            originals.insert(g.prompt_id(), g.clone());
        }
        // Replayable before the fill: age <= max_age, replays left.
        let eligible: Vec<u64> = buf
            .iter()
            .filter(|e| version - e.group.policy_version() <= p.max_age && e.times_replayed < p.max_replays)
            .map(|e| e.id)
            .collect();
        let target = groups.len();
        let batch = buf.fill(groups, version).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let r = &batch.report;

        // Capacity never exceeded.
        prop_assert!(buf.len() <= p.capacity_groups);
        prop_assert!(buf.bytes() <= p.capacity_bytes);
        // Batch size kept (up to the reported shortfall).
        prop_assert_eq!(batch.len() + r.dropped, target);
        if s.keep {
            prop_assert_eq!(batch.len(), target);
        }
        let needed = target - r.fresh;
        if eligible.len() >= needed {
            prop_assert_eq!(r.fill_ratio(), 1.0);
        }
        let mut replay_ids = Vec::new();
        for g in batch.iter() {
            let orig = &originals[&g.group().prompt_id()];
            // Whole groups from one policy version: the batch group is exactly the group that
            // was generated (same version, tokens, log-probs, rewards).
            prop_assert_eq!(g.group().policy_version(), orig.policy_version());
            prop_assert_eq!(g.group().tokens(), orig.tokens());
            prop_assert_eq!(g.group().behaviour_logp(), orig.behaviour_logp());
            prop_assert_eq!(g.group().rewards(), orig.rewards());
            prop_assert_eq!(g.advantages().len(), s.k);
            // Nothing older than max_age is returned for training.
            if !matches!(g.origin(), Origin::Unfilled { .. }) {
                prop_assert!(version - g.group().policy_version() <= p.max_age);
            }
            match g.origin() {
                Origin::Replayed { id, age, times_replayed, .. } => {
                    prop_assert!(age <= p.max_age);
                    prop_assert!(times_replayed <= p.max_replays);
                    prop_assert!(eligible.contains(&id));
                    replay_ids.push(id);
                }
                Origin::Fresh => prop_assert_eq!(g.group().policy_version(), version),
                Origin::Unfilled { .. } => prop_assert!(g.advantages().iter().all(|&a| a == 0.0)),
            }
        }
        // Never the same stored group twice in one batch.
        let mut dedup = replay_ids.clone();
        dedup.sort_unstable();
        dedup.dedup();
        prop_assert_eq!(dedup.len(), replay_ids.len());
        // Newest first: ids strictly decreasing in slot order, and no skipped newer group.
        if p.priority == Priority::Recency {
            prop_assert!(replay_ids.windows(2).all(|w| w[0] > w[1]));
            if let Some(&oldest) = replay_ids.last() {
                let newer_unused = eligible.iter().filter(|&&id| id > oldest && !replay_ids.contains(&id)).count();
                prop_assert_eq!(newer_unused, 0);
            }
        }
        out.push(fingerprint(&batch));
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn invariants_hold(s in scenario()) {
        run(&s, None)?;
    }

    #[test]
    fn resume_gives_identical_later_outputs(s in scenario(), at in 0usize..12) {
        let at = at % s.steps.len();
        let straight = run(&s, None)?;
        let resumed = run(&s, Some(at))?;
        prop_assert_eq!(straight, resumed);
    }
}
