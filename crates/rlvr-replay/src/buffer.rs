//! The POPO group replay buffer and its `fill` step.

use std::collections::VecDeque;
use std::sync::Arc;

use rand::Rng;
use rl_core::seed::{rng_from_seed, SeededRng};
use rl_core::{Metrics, Params, Valid};
use rlvr_core::stats::mean_std;
use rlvr_core::{
    AdvantageConfig, AdvantageInputs, AdvantageParams, Groups, IneffectiveReason, ReasonCounts, SingletonGroups,
    Verdict,
};
use serde::{Deserialize, Serialize};

use crate::effectiveness::GroupEffectiveness;
use crate::error::{ReplayError, Result};
use crate::group::Group;
use crate::params::{AdvantageMode, Priority, ReplayParams, Sampling, Shortfall};

/// Caller-supplied estimate of how far a stored group's behaviour policy is from the current
/// policy (for [`Priority::Kl`], POPO's KL ablation). Typically the mean over the group's
/// tokens of `behaviour_logp − current_logp` (a `k1` KL estimate), from one forward pass of
/// the current model. Closures `FnMut(&Group, u64) -> f64` implement it.
///
/// ```
/// use rlvr_replay::{Group, OffPolicyScorer};
/// fn takes(_: &mut dyn OffPolicyScorer) {}
/// // A stand-in that only looks at the version gap.
/// takes(&mut |g: &Group, current: u64| (current - g.policy_version()) as f64);
/// ```
pub trait OffPolicyScorer {
    /// Divergence of `group`'s behaviour policy from the policy of version
    /// `current_version`; lower is replayed first. Must be finite.
    fn divergence(&mut self, group: &Group, current_version: u64) -> f64;
}

impl<F: FnMut(&Group, u64) -> f64> OffPolicyScorer for F {
    fn divergence(&mut self, group: &Group, current_version: u64) -> f64 {
        self(group, current_version)
    }
}

/// Where a batch group came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An effective on-policy group of this step; trains with behaviour weight exactly 1.
    Fresh,
    /// A stored group replayed into the slot of an ineffective one; the loss must apply the
    /// decoupled importance-sampling correction with its stored behaviour log-probs.
    Replayed {
        /// The stored group's id (insertion number).
        id: u64,
        /// `current_version − group.policy_version`.
        age: u64,
        /// The fill step at which it was stored.
        insert_step: u64,
        /// Times replayed, this one included.
        times_replayed: u32,
    },
    /// An ineffective (or stale) group kept because the buffer ran dry and
    /// [`Shortfall::KeepIneffective`] is set; its advantages are all zero.
    Unfilled {
        /// Why the group was ineffective; `None` when its policy version was too old.
        reason: Option<IneffectiveReason>,
    },
}

/// One group of a filled batch.
#[derive(Debug, Clone)]
pub struct BatchGroup {
    slot: usize,
    origin: Origin,
    group: Arc<Group>,
    advantages: Vec<f32>,
}

impl BatchGroup {
    /// Position of the input group this one fills (input order is kept).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Where the group came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether the loss must apply the decoupled off-policy correction.
    pub fn is_replayed(&self) -> bool {
        matches!(self.origin, Origin::Replayed { .. })
    }

    /// The group (shared with the buffer, not copied).
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// The `K` advantages to train with (stored, recomputed, or zeros for unfilled slots).
    pub fn advantages(&self) -> &[f32] {
        &self.advantages
    }
}

/// What one `fill` did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FillReport {
    /// The fill step (0 for the first call).
    pub step: u64,
    /// The current policy version passed to `fill`.
    pub policy_version: u64,
    /// Input groups = the batch size to keep.
    pub target: usize,
    /// Effective on-policy groups kept.
    pub fresh: usize,
    /// Replayed groups placed into ineffective slots.
    pub replayed: usize,
    /// Ineffective groups kept under [`Shortfall::KeepIneffective`].
    pub kept_unfilled: usize,
    /// Slots dropped under [`Shortfall::Drop`].
    pub dropped: usize,
    /// Ineffective input groups by reason.
    pub ineffective: ReasonCounts,
    /// Input groups rejected because their policy version was older than `max_age`.
    pub stale_inputs: usize,
    /// Stored groups evicted because they grew older than `max_age`.
    pub stale_evicted: usize,
    /// Stored groups evicted after `max_replays` replays.
    pub exhausted_evicted: usize,
    /// Stored groups evicted to make room (oldest first).
    pub capacity_evicted: usize,
    /// Effective groups not stored because one alone exceeds `capacity_bytes`.
    pub rejected_oversize: usize,
    /// Effective groups stored.
    pub stored: usize,
    /// Mean age (policy versions) of the replayed groups (0 when none).
    pub mean_replay_age: f64,
    /// Largest age of the replayed groups (0 when none).
    pub max_replay_age: u64,
}

impl FillReport {
    /// `(fresh + replayed) / target`: the share of the batch that carries signal (1 when the
    /// input was empty).
    pub fn fill_ratio(&self) -> f64 {
        if self.target == 0 {
            1.0
        } else {
            (self.fresh + self.replayed) as f64 / self.target as f64
        }
    }

    /// Replayed groups over the groups of the returned batch (0 for an empty batch).
    pub fn replay_fraction(&self) -> f64 {
        let n = self.fresh + self.replayed + self.kept_unfilled;
        if n == 0 {
            0.0
        } else {
            self.replayed as f64 / n as f64
        }
    }

    /// Stale rejections of this step (stale inputs + stale evictions).
    pub fn stale_rejections(&self) -> usize {
        self.stale_inputs + self.stale_evicted
    }

    /// Metrics named `replay/<name>`.
    pub fn metrics(&self) -> Metrics {
        let mut m = Metrics::new()
            .with("replay/fill_ratio", self.fill_ratio())
            .with("replay/replay_fraction", self.replay_fraction())
            .with("replay/fresh", self.fresh as f64)
            .with("replay/replayed", self.replayed as f64)
            .with("replay/kept_unfilled", self.kept_unfilled as f64)
            .with("replay/dropped", self.dropped as f64)
            .with("replay/effective", self.fresh as f64)
            .with("replay/ineffective", self.ineffective.total() as f64)
            .with("replay/stale_rejections", self.stale_rejections() as f64)
            .with("replay/evicted_capacity", self.capacity_evicted as f64)
            .with("replay/evicted_exhausted", self.exhausted_evicted as f64)
            .with("replay/rejected_oversize", self.rejected_oversize as f64)
            .with("replay/batch_mean_replay_age", self.mean_replay_age)
            .with("replay/batch_max_replay_age", self.max_replay_age as f64);
        for r in IneffectiveReason::ALL {
            m.insert(format!("replay/ineffective/{}", r.name()), self.ineffective.get(r) as f64);
        }
        m
    }
}

/// Counters accumulated over every `fill`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayTotals {
    /// Calls to `fill`.
    pub steps: u64,
    /// Input groups seen.
    pub groups_seen: u64,
    /// Effective input groups.
    pub effective: u64,
    /// Ineffective input groups by reason.
    pub ineffective: ReasonCounts,
    /// Groups replayed.
    pub replayed: u64,
    /// Slots dropped or kept unfilled.
    pub unfilled: u64,
    /// Stale inputs + stale evictions.
    pub stale_rejections: u64,
    /// Evictions after `max_replays`.
    pub exhausted_evicted: u64,
    /// Evictions to make room.
    pub capacity_evicted: u64,
    /// Oversize groups not stored.
    pub rejected_oversize: u64,
    /// Groups stored.
    pub stored: u64,
}

/// The result of [`GroupReplayBuffer::fill`]: the batch in input-slot order and a report.
#[derive(Debug, Clone)]
pub struct FilledBatch {
    /// The groups to train on.
    pub groups: Vec<BatchGroup>,
    /// What the fill did.
    pub report: FillReport,
}

impl FilledBatch {
    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// See [`FillReport::fill_ratio`].
    pub fn fill_ratio(&self) -> f64 {
        self.report.fill_ratio()
    }

    /// Iterates over the groups.
    pub fn iter(&self) -> std::slice::Iter<'_, BatchGroup> {
        self.groups.iter()
    }
}

/// A stored group as seen through [`GroupReplayBuffer::iter`].
#[derive(Debug, Clone, Copy)]
pub struct StoredGroup<'a> {
    /// Insertion number (unique, increasing).
    pub id: u64,
    /// The group.
    pub group: &'a Group,
    /// The fill step at which it was stored.
    pub insert_step: u64,
    /// Times it has been replayed.
    pub times_replayed: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    id: u64,
    group: Arc<Group>,
    insert_step: u64,
    times_replayed: u32,
}

/// Bytes one entry costs beyond the group's own [`Group::stored_bytes`]: the ring slot and
/// the `Arc`'s two counters.
const ENTRY_OVERHEAD: u64 = (std::mem::size_of::<Entry>() + 2 * std::mem::size_of::<usize>()) as u64;

fn entry_bytes(g: &Group) -> u64 {
    g.stored_bytes() as u64 + ENTRY_OVERHEAD
}

enum SlotKind {
    Effective,
    Ineffective(IneffectiveReason),
    Stale,
}

/// POPO's prioritized group replay: stores effective groups, replays them into the slots of
/// ineffective ones, and keeps the batch size constant.
///
/// Each [`fill`](Self::fill) takes one step's on-policy groups (all of size `K`) and the
/// current policy version, and
/// 1. classifies every group (effective, ineffective with a reason, or older than `max_age`);
/// 2. keeps the effective ones in their slots ([`Origin::Fresh`]);
/// 3. puts into each other slot a stored group ([`Origin::Replayed`]), highest
///    [`Priority`] first (newest first by default), never the same group twice in a batch,
///    never one older than `max_age` or replayed `max_replays` times already;
/// 4. drops (or keeps, see [`Shortfall`]) slots it cannot fill and reports the fill ratio;
/// 5. evicts stale and exhausted groups, then stores this step's effective groups (oldest
///    evicted first when over `capacity_groups` or `capacity_bytes`).
///
/// A call that returns an error changes nothing. Stored groups are shared with the returned
/// batches through `Arc`, so `fill` copies no token data.
///
/// ```
/// use rl_core::Params;
/// use rlvr_replay::{GroupBuilder, GroupReplayBuffer, Origin, ReplayParams};
/// fn group(prompt: u64, version: u64, rewards: [f32; 2]) -> rlvr_replay::Result<rlvr_replay::Group> {
///     let mut b = GroupBuilder::new(prompt, version);
///     for r in rewards {
///         b.push_response(&[1, 2], &[-0.1, -0.2], None, r)?;
///     }
///     b.finish()
/// }
/// let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).check()?)?;
/// // step 0: one effective group (stored), one all-fail group (nothing to replay yet)
/// let b0 = buf.fill(vec![group(0, 0, [1.0, 0.0])?, group(1, 0, [0.0, 0.0])?], 0)?;
/// assert_eq!((b0.len(), b0.fill_ratio()), (1, 0.5));
/// // step 1: every group is ineffective, the stored one fills a slot
/// let b1 = buf.fill(vec![group(2, 1, [1.0, 1.0])?], 1)?;
/// assert!(matches!(b1.groups[0].origin(), Origin::Replayed { age: 1, .. }));
/// assert_eq!(b1.groups[0].group().prompt_id(), 0);
/// # Ok::<(), rlvr_replay::ReplayError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GroupReplayBuffer {
    params: Valid<ReplayParams>,
    /// The estimator for groups whose advantages the buffer computes (no re-classification:
    /// `fill` already judged them effective).
    advantage: AdvantageConfig,
    /// Oldest first.
    entries: VecDeque<Entry>,
    bytes: u64,
    step: u64,
    last_version: Option<u64>,
    next_id: u64,
    rng: SeededRng,
    totals: ReplayTotals,
    last_report: Option<FillReport>,
}

/// Serialisable state of a [`GroupReplayBuffer`]: restoring it resumes exactly (same later
/// outputs, including proportional draws).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayCheckpoint {
    params: ReplayParams,
    entries: Vec<Entry>,
    step: u64,
    last_version: Option<u64>,
    next_id: u64,
    rng: SeededRng,
    totals: ReplayTotals,
    last_report: Option<FillReport>,
}

impl GroupReplayBuffer {
    /// An empty buffer.
    ///
    /// # Errors
    /// [`ReplayError::Rlvr`] if the estimator's parameters do not form a valid
    /// [`AdvantageParams`] (they always do for checked params).
    pub fn new(params: Valid<ReplayParams>) -> Result<Self> {
        let rng = rng_from_seed(params.seed);
        let advantage = advantage_config(&params)?;
        Ok(Self {
            params,
            advantage,
            entries: VecDeque::new(),
            bytes: 0,
            step: 0,
            last_version: None,
            next_id: 0,
            rng,
            totals: ReplayTotals::default(),
            last_report: None,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Valid<ReplayParams> {
        &self.params
    }

    /// Number of stored groups.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no group is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes charged against `capacity_bytes`.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes actually held by the stored groups (allocated capacities) plus the ring.
    pub fn heap_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.group.heap_bytes() + ENTRY_OVERHEAD as usize).sum::<usize>()
            + (self.entries.capacity() - self.entries.len()) * std::mem::size_of::<Entry>()
    }

    /// Raw size of the stored groups' data (see [`Group::raw_bytes`]).
    pub fn raw_bytes(&self) -> usize {
        self.entries.iter().map(|e| e.group.raw_bytes()).sum()
    }

    /// Number of completed `fill` calls.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The newest policy version passed to `fill`, if any.
    pub fn last_version(&self) -> Option<u64> {
        self.last_version
    }

    /// Accumulated counters.
    pub fn totals(&self) -> &ReplayTotals {
        &self.totals
    }

    /// The report of the latest `fill`.
    pub fn last_report(&self) -> Option<&FillReport> {
        self.last_report.as_ref()
    }

    /// The stored groups, newest first.
    pub fn iter(&self) -> impl Iterator<Item = StoredGroup<'_>> + '_ {
        self.entries.iter().rev().map(|e| StoredGroup {
            id: e.id,
            group: &e.group,
            insert_step: e.insert_step,
            times_replayed: e.times_replayed,
        })
    }

    /// Removes every stored group (counters and generator are kept).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    fn age(&self, g: &Group, current: u64) -> u64 {
        current.saturating_sub(g.policy_version())
    }

    /// Mean and max age of the stored groups relative to the latest version (0, 0 when
    /// empty).
    pub fn age_stats(&self) -> (f64, u64) {
        let Some(v) = self.last_version else { return (0.0, 0) };
        if self.entries.is_empty() {
            return (0.0, 0);
        }
        let ages = self.entries.iter().map(|e| self.age(&e.group, v));
        let (sum, max) = ages.fold((0u64, 0u64), |(s, m), a| (s + a, m.max(a)));
        (sum as f64 / self.entries.len() as f64, max)
    }

    /// Buffer state and the latest fill's report as metrics named `replay/<name>`:
    /// occupancy, occupancy_frac, bytes, mean_age, max_age, the report's metrics, and totals
    /// under `replay/total/`.
    pub fn metrics(&self) -> Metrics {
        let mut m = self.last_report.as_ref().map(FillReport::metrics).unwrap_or_default();
        let (mean_age, max_age) = self.age_stats();
        m.insert("replay/occupancy", self.entries.len() as f64);
        m.insert("replay/occupancy_frac", self.entries.len() as f64 / self.params.capacity_groups as f64);
        m.insert("replay/bytes", self.bytes as f64);
        m.insert("replay/mean_age", mean_age);
        m.insert("replay/max_age", max_age as f64);
        let t = &self.totals;
        m.insert("replay/total/steps", t.steps as f64);
        m.insert("replay/total/effective", t.effective as f64);
        m.insert("replay/total/ineffective", t.ineffective.total() as f64);
        m.insert("replay/total/replayed", t.replayed as f64);
        m.insert("replay/total/unfilled", t.unfilled as f64);
        m.insert("replay/total/stale_rejections", t.stale_rejections as f64);
        let seen = t.groups_seen.max(1) as f64;
        m.insert("replay/total/fill_ratio", (t.effective + t.replayed) as f64 / seen);
        m
    }

    /// [`fill_with`](Self::fill_with) with the configured effectiveness rule and no scorer.
    ///
    /// # Errors
    /// As [`fill_with`](Self::fill_with); [`ReplayError::MissingScorer`] with
    /// [`Priority::Kl`].
    pub fn fill(&mut self, groups: Vec<Group>, policy_version: u64) -> Result<FilledBatch> {
        self.fill_with(groups, policy_version, None, None)
    }

    /// Builds this step's training batch from its on-policy `groups` (see the type's docs).
    ///
    /// `policy_version` is the version of the current (proximal) policy; ages are measured
    /// against it. `effectiveness` overrides the configured rule; `scorer` is required by
    /// [`Priority::Kl`] and ignored otherwise. Rewards need no check here: every [`Group`]
    /// holds finite rewards by construction.
    ///
    /// # Errors
    /// Nothing is changed when an error is returned.
    /// - [`ReplayError::VersionRegressed`]: `policy_version` is older than a previous one;
    /// - [`ReplayError::GroupSize`]: a group's `K` differs from `group_size`;
    /// - [`ReplayError::FutureVersion`]: a group's version is newer than `policy_version`;
    /// - [`ReplayError::NonFinite`]: a NaN/infinite divergence score;
    /// - [`ReplayError::MissingScorer`];
    /// - [`ReplayError::Rlvr`]: the advantage computation failed (not with checked params).
    pub fn fill_with(
        &mut self,
        groups: Vec<Group>,
        policy_version: u64,
        effectiveness: Option<&dyn GroupEffectiveness>,
        scorer: Option<&mut dyn OffPolicyScorer>,
    ) -> Result<FilledBatch> {
        // 1. Validate everything before changing anything.
        if let Some(last) = self.last_version {
            if policy_version < last {
                return Err(ReplayError::VersionRegressed { last, got: policy_version });
            }
        }
        let k = self.params.group_size;
        for (index, g) in groups.iter().enumerate() {
            if g.k() != k {
                return Err(ReplayError::GroupSize { index, expected: k, got: g.k() });
            }
            if g.policy_version() > policy_version {
                return Err(ReplayError::FutureVersion {
                    index,
                    group_version: g.policy_version(),
                    current: policy_version,
                });
            }
        }
        if self.params.priority == Priority::Kl && scorer.is_none() {
            return Err(ReplayError::MissingScorer);
        }

        // 2. Classify.
        let rule: &dyn GroupEffectiveness = match effectiveness {
            Some(e) => e,
            None => &self.params.effectiveness,
        };
        let kinds: Vec<SlotKind> = groups
            .iter()
            .map(|g| {
                if self.age(g, policy_version) > self.params.max_age {
                    SlotKind::Stale
                } else {
                    match rule.classify(g) {
                        Verdict::Effective => SlotKind::Effective,
                        Verdict::Ineffective(r) => SlotKind::Ineffective(r),
                    }
                }
            })
            .collect();
        let needed = kinds.iter().filter(|s| !matches!(s, SlotKind::Effective)).count();

        // 3. Choose replays on a copy of the generator (committed at the end).
        let mut rng = self.rng.clone();
        let chosen = if needed == 0 { Vec::new() } else { self.choose(needed, policy_version, scorer, &mut rng)? };

        // 4. Advantages the buffer computes: fresh effective groups that came without, and the
        //    chosen replays under `Recompute`, in one call (the last thing that can fail).
        let recompute = self.params.advantage_mode == AdvantageMode::Recompute;
        let fresh_todo: Vec<usize> = kinds
            .iter()
            .enumerate()
            .filter(|(i, s)| matches!(s, SlotKind::Effective) && groups[*i].advantages().is_none())
            .map(|(i, _)| i)
            .collect();
        let replay_todo: Vec<usize> =
            chosen.iter().copied().filter(|&idx| recompute || self.entries[idx].group.advantages().is_none()).collect();
        let todo: Vec<&Group> = fresh_todo
            .iter()
            .map(|&i| &groups[i])
            .chain(replay_todo.iter().map(|&idx| &*self.entries[idx].group))
            .collect();
        let mut computed = compute_advantages(&self.advantage, &todo)?.into_iter();
        let mut fresh_adv: Vec<Option<Vec<f32>>> = vec![None; groups.len()];
        for &i in &fresh_todo {
            fresh_adv[i] = computed.next();
        }
        let mut replay_adv: Vec<Option<Vec<f32>>> = vec![None; chosen.len()];
        for (slot, idx) in chosen.iter().enumerate() {
            if replay_todo.contains(idx) {
                replay_adv[slot] = computed.next();
            }
        }

        // ---- From here on nothing fails. ----
        self.rng = rng;
        let mut report = FillReport { step: self.step, policy_version, target: groups.len(), ..FillReport::default() };
        let mut replays = Vec::with_capacity(chosen.len());
        let mut age_sum = 0u64;
        for (&idx, recomputed) in chosen.iter().zip(replay_adv) {
            let e = &mut self.entries[idx];
            e.times_replayed += 1;
            let age = policy_version.saturating_sub(e.group.policy_version());
            age_sum += age;
            report.max_replay_age = report.max_replay_age.max(age);
            let advantages = match recomputed {
                Some(a) => a,
                None => e.group.advantages().map(<[f32]>::to_vec).unwrap_or_default(),
            };
            let origin =
                Origin::Replayed { id: e.id, age, insert_step: e.insert_step, times_replayed: e.times_replayed };
            replays.push((origin, Arc::clone(&e.group), advantages));
        }
        report.replayed = replays.len();
        if !replays.is_empty() {
            report.mean_replay_age = age_sum as f64 / replays.len() as f64;
        }

        let mut batch = Vec::with_capacity(groups.len());
        let mut to_store = Vec::new();
        let mut replays = replays.into_iter();
        for (slot, ((mut g, kind), adv)) in groups.into_iter().zip(kinds).zip(fresh_adv).enumerate() {
            match kind {
                SlotKind::Effective => {
                    if let Some(a) = adv {
                        g.set_advantages_unchecked(a);
                    }
                    let advantages = g.advantages().map(<[f32]>::to_vec).unwrap_or_default();
                    let g = Arc::new(g);
                    to_store.push(Arc::clone(&g));
                    report.fresh += 1;
                    batch.push(BatchGroup { slot, origin: Origin::Fresh, group: g, advantages });
                }
                SlotKind::Ineffective(_) | SlotKind::Stale => {
                    let reason = match kind {
                        SlotKind::Ineffective(r) => {
                            report.ineffective.add(r);
                            Some(r)
                        }
                        _ => {
                            report.stale_inputs += 1;
                            None
                        }
                    };
                    if let Some((origin, group, advantages)) = replays.next() {
                        batch.push(BatchGroup { slot, origin, group, advantages });
                    } else if self.params.shortfall == Shortfall::KeepIneffective {
                        report.kept_unfilled += 1;
                        let advantages = vec![0.0; g.k()];
                        batch.push(BatchGroup {
                            slot,
                            origin: Origin::Unfilled { reason },
                            group: Arc::new(g),
                            advantages,
                        });
                    } else {
                        report.dropped += 1;
                    }
                }
            }
        }

        // 5. Evict stale and exhausted groups, then store this step's effective ones.
        let (max_age, max_replays) = (self.params.max_age, self.params.max_replays);
        let mut freed = 0u64;
        self.entries.retain(|e| {
            let stale = policy_version.saturating_sub(e.group.policy_version()) > max_age;
            let exhausted = e.times_replayed >= max_replays;
            if stale {
                report.stale_evicted += 1;
            } else if exhausted {
                report.exhausted_evicted += 1;
            }
            if stale || exhausted {
                freed += entry_bytes(&e.group);
            }
            !(stale || exhausted)
        });
        self.bytes -= freed;
        for g in to_store {
            let b = entry_bytes(&g);
            if b > self.params.capacity_bytes {
                report.rejected_oversize += 1;
                continue;
            }
            while self.entries.len() >= self.params.capacity_groups || self.bytes + b > self.params.capacity_bytes {
                match self.entries.pop_front() {
                    Some(old) => {
                        self.bytes -= entry_bytes(&old.group);
                        report.capacity_evicted += 1;
                    }
                    None => break,
                }
            }
            self.entries.push_back(Entry { id: self.next_id, group: g, insert_step: self.step, times_replayed: 0 });
            self.next_id += 1;
            self.bytes += b;
            report.stored += 1;
        }

        // 6. Counters.
        let t = &mut self.totals;
        t.steps += 1;
        t.groups_seen += report.target as u64;
        t.effective += report.fresh as u64;
        t.ineffective.merge(&report.ineffective);
        t.replayed += report.replayed as u64;
        t.unfilled += (report.dropped + report.kept_unfilled) as u64;
        t.stale_rejections += report.stale_rejections() as u64;
        t.exhausted_evicted += report.exhausted_evicted as u64;
        t.capacity_evicted += report.capacity_evicted as u64;
        t.rejected_oversize += report.rejected_oversize as u64;
        t.stored += report.stored as u64;
        self.step += 1;
        self.last_version = Some(policy_version);
        self.last_report = Some(report.clone());
        Ok(FilledBatch { groups: batch, report })
    }

    /// Indices (into `entries`) of up to `needed` replayable groups, best first.
    fn choose(
        &self,
        needed: usize,
        current: u64,
        scorer: Option<&mut dyn OffPolicyScorer>,
        rng: &mut SeededRng,
    ) -> Result<Vec<usize>> {
        let (max_age, max_replays) = (self.params.max_age, self.params.max_replays);
        let eligible =
            |e: &Entry| current.saturating_sub(e.group.policy_version()) <= max_age && e.times_replayed < max_replays;
        if self.params.priority == Priority::Recency {
            // Newest first: walk the ring from the back.
            return Ok((0..self.entries.len()).rev().filter(|&i| eligible(&self.entries[i])).take(needed).collect());
        }
        let mut scored: Vec<(f64, usize)> = Vec::new();
        let mut scorer = scorer;
        for (i, e) in self.entries.iter().enumerate() {
            if !eligible(e) {
                continue;
            }
            let g = &e.group;
            let score = match self.params.priority {
                Priority::QualityRecency { decay } => {
                    let age = current.saturating_sub(g.policy_version());
                    let age = i32::try_from(age).unwrap_or(i32::MAX);
                    mean_std(g.rewards()).std_unbiased * decay.powi(age)
                }
                Priority::AdvantageStd => {
                    // stored groups carry the advantages `fill` gave them (a group restored
                    // without any scores 0)
                    let abs_sum: f64 = g.advantages().unwrap_or(&[]).iter().map(|&x| f64::from(x.abs())).sum();
                    abs_sum * mean_std(g.rewards()).std_unbiased
                }
                Priority::Kl => {
                    let d = match scorer.as_mut() {
                        Some(s) => s.divergence(g, current),
                        None => return Err(ReplayError::MissingScorer),
                    };
                    if !d.is_finite() {
                        return Err(ReplayError::NonFinite { what: "divergence score", index: i, value: d });
                    }
                    -d
                }
                Priority::Recency => e.id as f64,
            };
            scored.push((score, i));
        }
        if self.params.sampling == Sampling::Proportional {
            // Efraimidis–Spirakis: key = ln(u) / w, keep the largest keys.
            for s in &mut scored {
                let w = s.0.max(0.0);
                let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
                s.0 = if w > 0.0 { u.ln() / w } else { f64::NEG_INFINITY };
            }
        }
        // Higher key first; ties (and -inf) go to the newer group (higher index).
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        Ok(scored.into_iter().take(needed).map(|(_, i)| i).collect())
    }

    /// The buffer's full state, for [`GroupReplayBuffer::restore`]. Cheap: token data is
    /// shared, not copied, until serialised.
    pub fn checkpoint(&self) -> ReplayCheckpoint {
        ReplayCheckpoint {
            params: ReplayParams::clone(&self.params),
            entries: self.entries.iter().cloned().collect(),
            step: self.step,
            last_version: self.last_version,
            next_id: self.next_id,
            rng: self.rng.clone(),
            totals: self.totals.clone(),
            last_report: self.last_report.clone(),
        }
    }

    /// Rebuilds a buffer from a checkpoint, checking its consistency.
    ///
    /// # Errors
    /// [`ReplayError::InvalidParameter`] for bad parameters; [`ReplayError::Checkpoint`]
    /// when groups, ids, versions or sizes contradict each other or the capacities.
    pub fn restore(checkpoint: ReplayCheckpoint) -> Result<Self> {
        let ReplayCheckpoint { params, entries, step, last_version, next_id, rng, totals, last_report } = checkpoint;
        let params = params.check()?;
        let advantage = advantage_config(&params)?;
        let bad = |msg: String| Err(ReplayError::Checkpoint(msg));
        if entries.len() > params.capacity_groups {
            return bad(format!("{} groups > capacity_groups {}", entries.len(), params.capacity_groups));
        }
        let mut bytes = 0u64;
        let mut prev_id = None;
        for e in &entries {
            if e.group.k() != params.group_size {
                return bad(format!("group {} has K = {}, expected {}", e.id, e.group.k(), params.group_size));
            }
            if prev_id.is_some_and(|p| e.id <= p) || e.id >= next_id {
                return bad(format!("group id {} out of order (next_id {next_id})", e.id));
            }
            prev_id = Some(e.id);
            if last_version.is_none_or(|v| e.group.policy_version() > v) {
                return bad(format!("group {} has a version newer than the buffer's", e.id));
            }
            if e.times_replayed >= params.max_replays || e.insert_step >= step {
                return bad(format!("group {} has inconsistent replay count or insert step", e.id));
            }
            bytes += entry_bytes(&e.group);
        }
        if bytes > params.capacity_bytes {
            return bad(format!("{bytes} bytes > capacity_bytes {}", params.capacity_bytes));
        }
        Ok(Self {
            params,
            advantage,
            entries: entries.into(),
            bytes,
            step,
            last_version,
            next_id,
            rng,
            totals,
            last_report,
        })
    }
}

/// The buffer's estimator: the configured one, without re-classification (every group it
/// computes was judged effective by `fill`) and with `A = 0` for groups of one.
fn advantage_config(p: &ReplayParams) -> Result<AdvantageConfig> {
    let params = AdvantageParams::new(p.estimator).zero_ineffective(false).singleton(SingletonGroups::Zero).check()?;
    Ok(AdvantageConfig::new(params))
}

/// Advantages of `groups` (all of one size `K`) in one estimator call, one `Vec` per group.
fn compute_advantages(cfg: &AdvantageConfig, groups: &[&Group]) -> Result<Vec<Vec<f32>>> {
    let Some(first) = groups.first() else { return Ok(Vec::new()) };
    let k = first.k();
    let rewards: Vec<f64> = groups.iter().flat_map(|g| g.rewards().iter().map(|&r| f64::from(r))).collect();
    let lengths: Vec<usize> =
        groups.iter().flat_map(|g| g.offsets().windows(2).map(|w| (w[1] - w[0]) as usize)).collect();
    let layout = Groups::uniform(groups.len(), k)?;
    let adv = cfg.compute_inputs(&AdvantageInputs::new(&rewards, &layout).lengths(&lengths))?;
    Ok(adv.values.chunks(k).map(|c| c.iter().map(|&a| a as f32).collect()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::FlatResponses;
    use crate::EffectivenessRule;

    fn group(prompt: u64, version: u64, rewards: &[f32]) -> Result<Group> {
        let k = rewards.len();
        Group::from_flat(
            prompt,
            version,
            FlatResponses {
                tokens: vec![prompt as u32; 2 * k],
                behaviour_logp: vec![-0.5; 2 * k],
                mask: Vec::new(),
                lengths: vec![2; k],
                rewards: rewards.to_vec(),
            },
        )
    }

    const EFF: [f32; 2] = [1.0, 0.0];
    const FAIL: [f32; 2] = [0.0, 0.0];
    const WIN: [f32; 2] = [1.0, 1.0];

    fn prompts(b: &FilledBatch) -> Vec<u64> {
        b.iter().map(|g| g.group().prompt_id()).collect()
    }

    const AF: IneffectiveReason = IneffectiveReason::AllFailure;
    const AS: IneffectiveReason = IneffectiveReason::AllSuccess;

    #[test]
    fn replaces_ineffective_newest_first() -> Result<()> {
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).capacity_groups(8).check()?)?;
        let b = buf.fill(vec![group(0, 0, &EFF)?, group(1, 0, &EFF)?, group(2, 0, &EFF)?], 0)?;
        assert_eq!((b.len(), b.fill_ratio(), b.report.stored), (3, 1.0, 3));
        let b = buf.fill(vec![group(10, 1, &FAIL)?, group(11, 1, &EFF)?, group(12, 1, &WIN)?], 1)?;
        assert_eq!(prompts(&b), vec![2, 11, 1]);
        assert_eq!(b.iter().map(BatchGroup::slot).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(b.groups[0].is_replayed() && !b.groups[1].is_replayed());
        assert_eq!(b.groups[0].origin(), Origin::Replayed { id: 2, age: 1, insert_step: 0, times_replayed: 1 });
        assert_eq!(b.groups[2].origin(), Origin::Replayed { id: 1, age: 1, insert_step: 0, times_replayed: 1 });
        assert_eq!(
            (b.report.ineffective.get(AF), b.report.ineffective.get(AS), b.report.ineffective.total()),
            (1, 1, 2)
        );
        assert_eq!((b.report.fresh, b.report.replayed, b.report.target), (1, 2, 3));
        assert_eq!(b.report.replay_fraction(), 2.0 / 3.0);
        assert_eq!((b.report.mean_replay_age, b.report.max_replay_age), (1.0, 1));
        // replayed once (max_replays = 1): evicted; 0 and 11 remain
        assert_eq!(buf.iter().map(|s| s.group.prompt_id()).collect::<Vec<_>>(), vec![11, 0]);
        assert_eq!(b.report.exhausted_evicted, 2);
        let t = buf.totals();
        assert_eq!((t.steps, t.groups_seen, t.effective, t.replayed, t.stored), (2, 6, 4, 2, 4));
        assert_eq!((t.ineffective.get(AF), t.ineffective.total(), t.exhausted_evicted), (1, 2, 2));
        // a slot whose input group was dropped keeps the input order of the others
        let b =
            buf.fill(vec![group(20, 2, &FAIL)?, group(21, 2, &FAIL)?, group(22, 2, &EFF)?, group(23, 2, &FAIL)?], 2)?;
        assert_eq!(b.iter().map(BatchGroup::slot).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(prompts(&b), vec![11, 0, 22]);
        assert_eq!((b.report.dropped, buf.totals().unfilled, buf.totals().ineffective.get(AF)), (1, 1, 4));
        Ok(())
    }

    #[test]
    fn partial_batch_when_buffer_runs_dry() -> Result<()> {
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).check()?)?;
        let b = buf.fill(vec![group(0, 0, &FAIL)?, group(1, 0, &EFF)?], 0)?;
        assert_eq!((b.len(), b.fill_ratio(), b.report.dropped), (1, 0.5, 1));
        assert_eq!(b.groups[0].slot(), 1);
        let mut keep = GroupReplayBuffer::new(ReplayParams::new(2).shortfall(Shortfall::KeepIneffective).check()?)?;
        let b = keep.fill(vec![group(0, 0, &FAIL)?, group(1, 0, &EFF)?], 0)?;
        assert_eq!((b.len(), b.fill_ratio(), b.report.kept_unfilled), (2, 0.5, 1));
        assert_eq!(b.groups[0].origin(), Origin::Unfilled { reason: Some(AF) });
        assert!(b.groups[0].advantages().iter().all(|&a| a == 0.0));
        assert_eq!(b.report.replay_fraction(), 0.0);
        // one stored group, two ineffective inputs: replayed 1 of 3 batch groups
        let b = keep.fill(vec![group(2, 1, &WIN)?, group(3, 1, &FAIL)?, group(4, 1, &EFF)?], 1)?;
        assert_eq!((b.report.replayed, b.report.kept_unfilled, b.report.fresh), (1, 1, 1));
        assert_eq!(b.report.replay_fraction(), 1.0 / 3.0);
        assert_eq!(b.fill_ratio(), 2.0 / 3.0);
        assert_eq!(b.groups[1].origin(), Origin::Unfilled { reason: Some(AF) });
        assert_eq!(keep.totals().unfilled, 2);
        Ok(())
    }

    #[test]
    fn stale_groups_are_rejected_and_evicted() -> Result<()> {
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).max_age(1).capacity_groups(4).check()?)?;
        buf.fill(vec![group(0, 0, &EFF)?, group(1, 0, &EFF)?], 0)?;
        // version 2: both stored groups are 2 versions old -> stale; the input of version 0 too
        let b = buf.fill(vec![group(2, 2, &FAIL)?, group(3, 0, &EFF)?], 2)?;
        assert!(b.is_empty());
        assert_eq!((b.report.stale_evicted, b.report.stale_inputs, b.report.stale_rejections()), (2, 1, 3));
        assert!(buf.is_empty());
        assert_eq!(buf.totals().stale_rejections, 3);
        let m = b.report.metrics();
        assert_eq!(m.get("replay/stale_rejections"), Some(3.0));
        // exactly max_age old is still fresh enough: as an input and as a stored group
        let mut edge = GroupReplayBuffer::new(ReplayParams::new(2).max_age(1).check()?)?;
        edge.fill(vec![group(0, 0, &EFF)?], 0)?;
        let b = edge.fill(vec![group(1, 0, &EFF)?, group(2, 1, &FAIL)?], 1)?;
        assert_eq!((b.report.stale_inputs, b.report.stale_evicted, b.report.fresh, b.report.replayed), (0, 0, 1, 1));
        assert!(matches!(b.groups[1].origin(), Origin::Replayed { age: 1, .. }));
        assert_eq!(edge.len(), 1); // the replayed group was used up; the input of version 0 stored
                                   // a kept stale input is Unfilled without a reason
        let mut keep =
            GroupReplayBuffer::new(ReplayParams::new(2).max_age(0).shortfall(Shortfall::KeepIneffective).check()?)?;
        let b = keep.fill(vec![group(4, 0, &EFF)?], 1)?;
        assert_eq!(b.groups[0].origin(), Origin::Unfilled { reason: None });
        Ok(())
    }

    #[test]
    fn bad_input_changes_nothing() -> Result<()> {
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).check()?)?;
        buf.fill(vec![group(0, 3, &EFF)?], 3)?;
        let before = buf.checkpoint();
        let e = buf.fill(vec![group(1, 3, &FAIL)?, group(2, 3, &[1.0, 0.0, 1.0])?], 3);
        assert!(matches!(e, Err(ReplayError::GroupSize { index: 1, expected: 2, got: 3 })));
        assert!(matches!(
            buf.fill(vec![group(1, 2, &FAIL)?], 2),
            Err(ReplayError::VersionRegressed { last: 3, got: 2 })
        ));
        assert!(matches!(
            buf.fill(vec![group(1, 3, &FAIL)?, group(1, 5, &FAIL)?], 4),
            Err(ReplayError::FutureVersion { index: 1, group_version: 5, current: 4 })
        ));
        assert_eq!(buf.checkpoint(), before);
        let mut kl = GroupReplayBuffer::new(ReplayParams::new(2).priority(Priority::Kl).check()?)?;
        assert!(matches!(kl.fill(vec![group(1, 3, &FAIL)?], 3), Err(ReplayError::MissingScorer)));
        assert_eq!(kl.step(), 0);
        Ok(())
    }

    #[test]
    fn priorities_order_replays() -> Result<()> {
        // strong: σ = 4.24, |A| sum 1.41 (GRPO); weak: σ = 0.07
        let strong = [3.0, -3.0];
        let weak = [1.0, 0.9];
        let fill3 = |p: ReplayParams| -> Result<Vec<u64>> {
            let mut buf = GroupReplayBuffer::new(p.capacity_groups(8).max_replays(3).check()?)?;
            buf.fill(vec![group(0, 0, &strong)?], 0)?;
            buf.fill(vec![group(1, 1, &weak)?], 1)?;
            Ok(prompts(&buf.fill(vec![group(9, 2, &FAIL)?, group(9, 2, &FAIL)?], 2)?))
        };
        assert_eq!(fill3(ReplayParams::new(2))?, vec![1, 0]);
        assert_eq!(fill3(ReplayParams::new(2).priority(Priority::AdvantageStd))?, vec![0, 1]);
        assert_eq!(fill3(ReplayParams::new(2).priority(Priority::QualityRecency { decay: 0.5 }))?, vec![0, 1]);
        // a steep decay favours the newer weak group: 4.24 · 0.01² < 0.07 · 0.01
        assert_eq!(fill3(ReplayParams::new(2).priority(Priority::QualityRecency { decay: 0.01 }))?, vec![1, 0]);
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).priority(Priority::Kl).check()?)?;
        let mut kl = |g: &Group, _: u64| if g.prompt_id() == 0 { 0.01 } else { 1.0 };
        buf.fill_with(vec![group(0, 0, &EFF)?, group(1, 0, &EFF)?], 0, None, Some(&mut kl))?;
        let b = buf.fill_with(vec![group(9, 1, &FAIL)?], 1, None, Some(&mut kl))?;
        assert_eq!(prompts(&b), vec![0]);
        let mut nan = |_: &Group, _: u64| f64::NAN;
        let before = buf.checkpoint();
        assert!(matches!(
            buf.fill_with(vec![group(9, 1, &FAIL)?], 1, None, Some(&mut nan)),
            Err(ReplayError::NonFinite { what: "divergence score", .. })
        ));
        assert_eq!(buf.checkpoint(), before);
        Ok(())
    }

    #[test]
    fn recompute_reuse_and_custom_effectiveness() -> Result<()> {
        let p =
            ReplayParams::new(2).advantage_mode(AdvantageMode::Recompute).estimator(crate::AdvantageEstimator::DrGrpo);
        let mut buf = GroupReplayBuffer::new(p.check()?)?;
        let fresh = buf.fill(vec![group(0, 0, &[2.0, 0.0])?.with_advantages(vec![5.0, -5.0])?], 0)?;
        assert_eq!(fresh.groups[0].advantages(), &[5.0, -5.0]);
        let b = buf.fill(vec![group(1, 1, &FAIL)?], 1)?;
        assert_eq!(b.groups[0].advantages(), &[1.0, -1.0]);
        let rule = EffectivenessRule::Outcome { success_threshold: 0.5 };
        let b = buf.fill_with(vec![group(2, 1, &[0.1, 0.2])?], 1, Some(&rule), None)?;
        assert_eq!(b.report.ineffective.get(AF), 1);
        // Reuse (default): the stored advantages come back unchanged
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).check()?)?;
        buf.fill(vec![group(0, 0, &[2.0, 0.0])?.with_advantages(vec![5.0, -5.0])?], 0)?;
        assert_eq!(buf.fill(vec![group(1, 1, &FAIL)?], 1)?.groups[0].advantages(), &[5.0, -5.0]);
        Ok(())
    }

    #[test]
    fn computed_advantages_are_rlvr_cores_over_the_groups_of_the_call() -> Result<()> {
        // GPG's α and REINFORCE++-baseline's whitening are batch statistics: they are taken
        // over the groups whose advantages this fill computes (here all three, the middle one
        // with shaped rewards judged effective by a σ rule)
        for est in [crate::AdvantageEstimator::gpg(), crate::AdvantageEstimator::reinforce_pp_baseline()] {
            let p = ReplayParams::new(2).estimator(est).effectiveness(EffectivenessRule::reward_std());
            let mut buf = GroupReplayBuffer::new(p.check()?)?;
            let rewards = [[1.0f32, 0.0], [0.5, 0.0], [1.0, 0.25]];
            let b =
                buf.fill(rewards.iter().enumerate().map(|(i, r)| group(i as u64, 0, r)).collect::<Result<_>>()?, 0)?;
            let flat: Vec<f64> = rewards.iter().flatten().map(|&r| f64::from(r)).collect();
            let want = AdvantageConfig::new(AdvantageParams::new(est).zero_ineffective(false).check()?)
                .compute(&flat, &Groups::uniform(3, 2)?, Some(&[2; 6]))?
                .values;
            let got: Vec<f64> = b.iter().flat_map(|g| g.advantages().iter().map(|&a| f64::from(a))).collect();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-6, "{est:?}: {got:?} vs {want:?}");
            }
            assert!(b.iter().all(|g| g.group().advantages().is_some()));
        }
        Ok(())
    }

    #[test]
    fn byte_capacity_and_oversize() -> Result<()> {
        // stored groups carry their K advantages
        let one = entry_bytes(&group(0, 0, &EFF)?.with_advantages(vec![0.7, -0.7])?);
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).capacity_bytes(2 * one).check()?)?;
        let b = buf.fill((0..3).map(|p| group(p, 0, &EFF)).collect::<Result<_>>()?, 0)?;
        assert_eq!((buf.len(), buf.bytes(), b.report.capacity_evicted), (2, 2 * one, 1));
        assert_eq!(buf.iter().map(|s| s.group.prompt_id()).collect::<Vec<_>>(), vec![2, 1]);
        // the totals add the evictions of every step: 1, then 2 more
        buf.fill((3..5).map(|p| group(p, 1, &EFF)).collect::<Result<_>>()?, 1)?;
        assert_eq!((buf.totals().capacity_evicted, buf.totals().stored), (3, 5));
        let mut tiny = GroupReplayBuffer::new(ReplayParams::new(2).capacity_bytes(one - 1).check()?)?;
        let b = tiny.fill(vec![group(0, 0, &EFF)?], 0)?;
        assert_eq!((b.report.rejected_oversize, b.report.stored, tiny.totals().rejected_oversize), (1, 0, 1));
        assert!(tiny.is_empty());
        let mut exact = GroupReplayBuffer::new(ReplayParams::new(2).capacity_bytes(one).check()?)?;
        assert_eq!(exact.fill(vec![group(0, 0, &EFF)?], 0)?.report.stored, 1);
        assert_eq!(exact.totals().capacity_evicted, 0);
        Ok(())
    }

    #[test]
    fn fill_report_figures() {
        let r = FillReport {
            target: 5,
            fresh: 2,
            replayed: 1,
            kept_unfilled: 1,
            dropped: 1,
            stale_inputs: 2,
            stale_evicted: 3,
            ..FillReport::default()
        };
        assert_eq!(r.fill_ratio(), 3.0 / 5.0);
        assert_eq!(r.replay_fraction(), 1.0 / 4.0);
        assert_eq!(r.stale_rejections(), 5);
        let m = r.metrics();
        assert_eq!(m.get("replay/fill_ratio"), Some(0.6));
        assert_eq!(m.get("replay/replay_fraction"), Some(0.25));
        assert_eq!(m.get("replay/stale_rejections"), Some(5.0));
        assert_eq!(m.get("replay/dropped"), Some(1.0));
        assert_eq!(FillReport::default().fill_ratio(), 1.0);
        assert_eq!(FillReport::default().replay_fraction(), 0.0);
        let mut r = FillReport::default();
        r.ineffective.add(AF);
        r.ineffective.add(IneffectiveReason::Singleton);
        let m = r.metrics();
        assert_eq!((m.get("replay/ineffective"), m.get("replay/ineffective/all_failure")), (Some(2.0), Some(1.0)));
        assert_eq!(m.get("replay/ineffective/singleton"), Some(1.0));
    }

    #[test]
    fn accessors_sizes_and_ages() -> Result<()> {
        let mut buf = GroupReplayBuffer::new(ReplayParams::new(2).capacity_groups(8).max_age(5).check()?)?;
        assert!(buf.is_empty() && buf.last_version().is_none() && buf.last_report().is_none());
        assert_eq!((buf.step(), buf.bytes(), buf.raw_bytes(), buf.age_stats()), (0, 0, 0, (0.0, 0)));
        let b = buf.fill(vec![], 0)?;
        assert!(b.is_empty() && b.groups.is_empty() && b.fill_ratio() == 1.0);
        assert_eq!(b.len(), 0);
        let g0 = group(0, 0, &EFF)?;
        let g1 = group(1, 1, &[1.0, 0.5])?;
        let b = buf.fill(vec![g0, g1], 1)?;
        assert!(!b.is_empty() && b.len() == 2);
        assert!(!buf.is_empty());
        assert_eq!((buf.len(), buf.step(), buf.last_version()), (2, 2, Some(1)));
        assert_eq!(buf.last_report().map(|r| (r.step, r.policy_version, r.stored)), Some((1, 1, 2)));
        // sizes: stored bytes plus the per-entry overhead; raw and heap bytes of the groups
        let overhead = (std::mem::size_of::<Entry>() + 2 * std::mem::size_of::<usize>()) as u64;
        let stored: u64 = buf.iter().map(|s| s.group.stored_bytes() as u64 + overhead).sum();
        assert_eq!(buf.bytes(), stored);
        assert_eq!(buf.raw_bytes(), buf.iter().map(|s| s.group.raw_bytes()).sum::<usize>());
        assert!(buf.raw_bytes() > 0);
        let heap: usize = buf.iter().map(|s| s.group.heap_bytes() + overhead as usize).sum::<usize>()
            + (buf.entries.capacity() - buf.entries.len()) * std::mem::size_of::<Entry>();
        assert_eq!(buf.heap_bytes(), heap);
        assert!(buf.heap_bytes() > buf.raw_bytes());
        assert_eq!(buf.age_stats(), (0.5, 1)); // ages 1 and 0 at version 1
                                               // a new effective group at version 4: ages 4, 3, 0 → mean 7/3, max 4
        buf.fill(vec![group(9, 4, &EFF)?], 4)?;
        assert_eq!(buf.age_stats(), (7.0 / 3.0, 4));
        let ids: Vec<(u64, u64, u32)> = buf.iter().map(|s| (s.id, s.insert_step, s.times_replayed)).collect();
        assert_eq!(ids, vec![(2, 2, 0), (1, 1, 0), (0, 1, 0)]);
        buf.clear();
        assert!(buf.is_empty());
        assert_eq!((buf.bytes(), buf.raw_bytes(), buf.age_stats()), (0, 0, (0.0, 0)));
        assert_eq!(buf.step(), 3); // counters survive clear
        Ok(())
    }

    #[test]
    fn proportional_sampling_favours_the_heavier_group() -> Result<()> {
        // AdvantageStd weights: equal |advantage| sums, reward std 70.7 vs 0.707, so the first
        // group should be drawn with probability 100/101 (Efraimidis–Spirakis, one draw)
        let p = ReplayParams::new(2).priority(Priority::AdvantageStd).sampling(Sampling::Proportional);
        let mut buf = GroupReplayBuffer::new(p.check()?)?;
        buf.fill(vec![group(0, 0, &[100.0, 0.0])?, group(1, 0, &[1.0, 0.0])?], 0)?;
        assert_eq!(buf.len(), 2);
        let heavy = (0..200u64)
            .filter(|&s| {
                let chosen = buf.choose(1, 0, None, &mut rng_from_seed(s)).unwrap_or_default();
                chosen.first().map(|&i| buf.entries[i].group.prompt_id()) == Some(0)
            })
            .count();
        assert!(heavy >= 185, "heavy group drawn {heavy} times of 200");
        Ok(())
    }

    #[test]
    fn checkpoint_round_trip_and_metrics() -> anyhow::Result<()> {
        let p = ReplayParams::new(2).priority(Priority::AdvantageStd).sampling(Sampling::Proportional).max_replays(2);
        let mut buf = GroupReplayBuffer::new(p.check()?)?;
        buf.fill((0..6).map(|p| group(p, 0, &[p as f32, 0.0])).collect::<Result<_>>()?, 0)?;
        let json = serde_json::to_string(&buf.checkpoint())?;
        let mut resumed = GroupReplayBuffer::restore(serde_json::from_str(&json)?)?;
        for v in 1..4 {
            let input = || (0..3).map(|p| group(100 + p, v, &FAIL)).collect::<Result<Vec<_>>>();
            assert_eq!(prompts(&buf.fill(input()?, v)?), prompts(&resumed.fill(input()?, v)?));
        }
        assert_eq!(buf.checkpoint(), resumed.checkpoint());
        let m = buf.metrics();
        let t = buf.totals();
        assert_eq!(m.get("replay/total/ineffective"), Some(t.ineffective.total() as f64));
        assert_eq!(m.get("replay/total/ineffective"), Some(10.0)); // [0, 0] at step 0 + 3 per later step
        assert_eq!(m.get("replay/ineffective/all_failure"), Some(3.0));
        assert_eq!(m.get("replay/occupancy"), Some(buf.len() as f64));
        assert_eq!(m.get("replay/total/steps"), Some(4.0));
        assert_eq!(m.get("replay/occupancy_frac"), Some(buf.len() as f64 / 64.0));
        // 15 inputs over 4 steps, 5 of them effective (step 0); the replays fill some of the rest
        let want = (t.effective + t.replayed) as f64 / t.groups_seen as f64;
        assert_eq!(m.get("replay/total/fill_ratio"), Some(want));
        assert_eq!((t.groups_seen, t.effective), (15, 5));
        assert!(want > 0.0 && want < 1.0);
        assert_eq!(m.get("replay/total/replayed"), Some(t.replayed as f64));
        assert_eq!(m.get("replay/total/unfilled"), Some(t.unfilled as f64));
        let (mean_age, max_age) = buf.age_stats();
        assert_eq!((m.get("replay/mean_age"), m.get("replay/max_age")), (Some(mean_age), Some(max_age as f64)));
        assert!(max_age >= 1);
        let mut bad: serde_json::Value = serde_json::from_str(&json)?;
        bad["next_id"] = 0.into();
        assert!(GroupReplayBuffer::restore(serde_json::from_value(bad)?).is_err());
        Ok(())
    }
}
