//! One prompt's group of `K` responses, stored compactly.
//!
//! A [`Group`] is the unit of replay: POPO stores and replays whole groups, never single
//! responses, so that the group baseline stays defined and every token of a group comes from
//! one behaviour policy (one `policy_version`). Token data lives in three flat arrays (token
//! ids `u32`, behaviour log-probs `f32`, mask `bool`) plus `K + 1` `u32` offsets, so a stored
//! group costs its raw data plus a few hundred bytes.

use serde::{Deserialize, Serialize};

use crate::error::{check_finite, ReplayError, Result};

/// Largest positive behaviour log-probability accepted (round-off of a `log_softmax`); larger
/// values are rejected as [`ReplayError::PositiveLogProb`] (they usually mean probabilities
/// were passed instead of log-probabilities).
pub const LOGP_TOLERANCE: f32 = 1e-4;

/// Responses of one group as flat arrays, the zero-copy way to build a [`Group`] with
/// [`Group::from_flat`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlatResponses {
    /// Token ids of all responses, concatenated (response 0 first).
    pub tokens: Vec<u32>,
    /// Per-token log-probabilities under the behaviour policy that sampled them, same layout.
    pub behaviour_logp: Vec<f32>,
    /// Per-token loss mask, same layout; empty means "every token counts".
    pub mask: Vec<bool>,
    /// Length of each response (`K` entries; they must sum to `tokens.len()`).
    pub lengths: Vec<usize>,
    /// Scalar reward of each response (`K` entries).
    pub rewards: Vec<f32>,
}

/// One response of a group, borrowed from the group's flat storage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Response<'a> {
    /// Token ids.
    pub tokens: &'a [u32],
    /// Per-token behaviour log-probabilities.
    pub behaviour_logp: &'a [f32],
    /// Per-token loss mask.
    pub mask: &'a [bool],
    /// The response's reward.
    pub reward: f32,
}

/// A prompt's group of `K` responses with everything a replayed group needs: token ids,
/// per-token behaviour log-probabilities and mask, rewards, optional binary outcomes and
/// advantages, and the version of the policy that generated every response.
///
/// Invariants (checked by every constructor and by deserialisation): `K ≥ 1`; per-token arrays
/// have one entry per token; rewards, advantages and log-probabilities are finite;
/// log-probabilities are `≤` [`LOGP_TOLERANCE`].
///
/// ```
/// use rlvr_replay::GroupBuilder;
/// let mut b = GroupBuilder::new(7, 3); // prompt 7, sampled by policy version 3
/// b.push_response(&[11, 12, 13], &[-0.1, -0.5, -0.2], None, 1.0)?;
/// b.push_response(&[11, 14], &[-0.1, -2.0], None, 0.0)?;
/// let g = b.finish()?;
/// assert_eq!((g.k(), g.num_tokens(), g.policy_version()), (2, 5, 3));
/// assert_eq!(g.response(1).map(|r| r.tokens), Some(&[11u32, 14][..]));
/// # Ok::<(), rlvr_replay::ReplayError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "GroupRepr", into = "GroupRepr")]
pub struct Group {
    prompt_id: u64,
    policy_version: u64,
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    behaviour_logp: Vec<f32>,
    /// Empty = all tokens count.
    mask: Vec<bool>,
    /// `K + 1` offsets into the token arrays.
    offsets: Vec<u32>,
    rewards: Vec<f32>,
    /// Empty or `K`.
    outcomes: Vec<bool>,
    /// Empty or `K`.
    advantages: Vec<f32>,
}

/// Serialised form of a [`Group`]; deserialisation re-checks every invariant.
#[derive(Serialize, Deserialize)]
struct GroupRepr {
    prompt_id: u64,
    policy_version: u64,
    #[serde(default)]
    prompt_tokens: Vec<u32>,
    tokens: Vec<u32>,
    behaviour_logp: Vec<f32>,
    #[serde(default)]
    mask: Vec<bool>,
    offsets: Vec<u32>,
    rewards: Vec<f32>,
    #[serde(default)]
    outcomes: Vec<bool>,
    #[serde(default)]
    advantages: Vec<f32>,
}

impl TryFrom<GroupRepr> for Group {
    type Error = ReplayError;
    fn try_from(r: GroupRepr) -> Result<Self> {
        let g = Group {
            prompt_id: r.prompt_id,
            policy_version: r.policy_version,
            prompt_tokens: r.prompt_tokens,
            tokens: r.tokens,
            behaviour_logp: r.behaviour_logp,
            mask: r.mask,
            offsets: r.offsets,
            rewards: r.rewards,
            outcomes: r.outcomes,
            advantages: r.advantages,
        };
        g.validate()?;
        Ok(g.shrunk())
    }
}

impl From<Group> for GroupRepr {
    fn from(g: Group) -> Self {
        GroupRepr {
            prompt_id: g.prompt_id,
            policy_version: g.policy_version,
            prompt_tokens: g.prompt_tokens,
            tokens: g.tokens,
            behaviour_logp: g.behaviour_logp,
            mask: g.mask,
            offsets: g.offsets,
            rewards: g.rewards,
            outcomes: g.outcomes,
            advantages: g.advantages,
        }
    }
}

fn check_logp(values: &[f32]) -> Result<()> {
    check_finite("behaviour_logp", values)?;
    match values.iter().position(|&v| v > LOGP_TOLERANCE) {
        Some(index) => Err(ReplayError::PositiveLogProb { index, value: values[index] }),
        None => Ok(()),
    }
}

fn to_u32(what: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| ReplayError::TooLarge { what, value: n as u64, limit: u64::from(u32::MAX) })
}

impl Group {
    /// Builds a group from flat arrays without copying them.
    ///
    /// # Errors
    /// [`ReplayError::Empty`] when there is no response; [`ReplayError::Length`] when the
    /// arrays disagree (`lengths` vs `rewards`, the token arrays vs `Σ lengths`);
    /// [`ReplayError::NonFinite`] for a NaN/infinite reward or log-probability;
    /// [`ReplayError::PositiveLogProb`]; [`ReplayError::TooLarge`] above `u32::MAX` tokens.
    pub fn from_flat(prompt_id: u64, policy_version: u64, responses: FlatResponses) -> Result<Self> {
        let FlatResponses { tokens, behaviour_logp, mask, lengths, rewards } = responses;
        let mut offsets = Vec::with_capacity(lengths.len() + 1);
        offsets.push(0u32);
        let mut total = 0usize;
        for &len in &lengths {
            total = total.saturating_add(len);
            offsets.push(to_u32("group tokens", total)?);
        }
        let g = Group {
            prompt_id,
            policy_version,
            prompt_tokens: Vec::new(),
            tokens,
            behaviour_logp,
            mask,
            offsets,
            rewards,
            outcomes: Vec::new(),
            advantages: Vec::new(),
        };
        g.validate()?;
        Ok(g.shrunk())
    }

    /// Releases spare capacity of the flat arrays (a no-op when there is none), so the stored
    /// size equals the raw size.
    fn shrunk(mut self) -> Self {
        fn shrink<T>(v: &mut Vec<T>) {
            if v.capacity() != v.len() {
                v.shrink_to_fit();
            }
        }
        shrink(&mut self.prompt_tokens);
        shrink(&mut self.tokens);
        shrink(&mut self.behaviour_logp);
        shrink(&mut self.mask);
        shrink(&mut self.offsets);
        shrink(&mut self.rewards);
        shrink(&mut self.outcomes);
        shrink(&mut self.advantages);
        self
    }

    /// Checks every invariant (see the type's docs).
    ///
    /// # Errors
    /// The first violated invariant, as a typed error.
    pub fn validate(&self) -> Result<()> {
        let k = self.rewards.len();
        if k == 0 {
            return Err(ReplayError::Empty { what: "group responses" });
        }
        if self.offsets.len() != k + 1 {
            return Err(ReplayError::Length {
                what: "response lengths",
                expected: k,
                got: self.offsets.len().saturating_sub(1),
            });
        }
        if self.offsets.first() != Some(&0) || self.offsets.windows(2).any(|w| w[1] < w[0]) {
            return Err(ReplayError::Checkpoint("group offsets must start at 0 and not decrease".into()));
        }
        let n = self.offsets[k] as usize;
        if self.tokens.len() != n {
            return Err(ReplayError::Length { what: "tokens", expected: n, got: self.tokens.len() });
        }
        if self.behaviour_logp.len() != n {
            return Err(ReplayError::Length { what: "behaviour_logp", expected: n, got: self.behaviour_logp.len() });
        }
        if !self.mask.is_empty() && self.mask.len() != n {
            return Err(ReplayError::Length { what: "mask", expected: n, got: self.mask.len() });
        }
        if !self.outcomes.is_empty() && self.outcomes.len() != k {
            return Err(ReplayError::Length { what: "outcomes", expected: k, got: self.outcomes.len() });
        }
        if !self.advantages.is_empty() && self.advantages.len() != k {
            return Err(ReplayError::Length { what: "advantages", expected: k, got: self.advantages.len() });
        }
        check_finite("rewards", &self.rewards)?;
        check_finite("advantages", &self.advantages)?;
        check_logp(&self.behaviour_logp)
    }

    /// Attaches the prompt's token ids (optional; useful to recompute log-probs of a replayed
    /// group without a prompt lookup).
    #[must_use]
    pub fn with_prompt_tokens(mut self, prompt_tokens: Vec<u32>) -> Self {
        self.prompt_tokens = prompt_tokens;
        self.shrunk()
    }

    /// Attaches binary outcomes (one per response), used by
    /// [`EffectivenessRule::Outcome`](crate::EffectivenessRule::Outcome) when rewards are
    /// shaped.
    ///
    /// # Errors
    /// [`ReplayError::Length`] unless there are `K` outcomes.
    pub fn with_outcomes(mut self, outcomes: Vec<bool>) -> Result<Self> {
        if outcomes.len() != self.k() {
            return Err(ReplayError::Length { what: "outcomes", expected: self.k(), got: outcomes.len() });
        }
        self.outcomes = outcomes;
        Ok(self.shrunk())
    }

    /// Attaches caller-computed advantages (one per response). Without them the buffer
    /// computes them with its configured estimator.
    ///
    /// # Errors
    /// [`ReplayError::Length`] unless there are `K` values; [`ReplayError::NonFinite`].
    pub fn with_advantages(mut self, advantages: Vec<f32>) -> Result<Self> {
        if advantages.len() != self.k() {
            return Err(ReplayError::Length { what: "advantages", expected: self.k(), got: advantages.len() });
        }
        check_finite("advantages", &advantages)?;
        self.advantages = advantages;
        Ok(self.shrunk())
    }

    /// Replaces the rewards (e.g. after the verifier ran); clears advantages computed from the
    /// old rewards.
    ///
    /// # Errors
    /// [`ReplayError::Length`] unless there are `K` values; [`ReplayError::NonFinite`].
    pub fn set_rewards(&mut self, rewards: &[f32]) -> Result<()> {
        if rewards.len() != self.k() {
            return Err(ReplayError::Length { what: "rewards", expected: self.k(), got: rewards.len() });
        }
        check_finite("rewards", rewards)?;
        self.rewards.copy_from_slice(rewards);
        self.advantages = Vec::new();
        Ok(())
    }

    pub(crate) fn set_advantages_unchecked(&mut self, advantages: Vec<f32>) {
        self.advantages = advantages;
    }

    /// The prompt's id.
    pub fn prompt_id(&self) -> u64 {
        self.prompt_id
    }

    /// Version of the policy that sampled every response of the group.
    pub fn policy_version(&self) -> u64 {
        self.policy_version
    }

    /// Number of responses `K`.
    pub fn k(&self) -> usize {
        self.rewards.len()
    }

    /// Total number of response tokens.
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Length of the longest response.
    pub fn max_len(&self) -> usize {
        self.offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }

    /// Response `i`, or `None` when `i ≥ K`.
    pub fn response(&self, i: usize) -> Option<Response<'_>> {
        let (&a, &b) = (self.offsets.get(i)?, self.offsets.get(i + 1)?);
        let (a, b) = (a as usize, b as usize);
        Some(Response {
            tokens: &self.tokens[a..b],
            behaviour_logp: &self.behaviour_logp[a..b],
            mask: if self.mask.is_empty() { &[] } else { &self.mask[a..b] },
            reward: self.rewards[i],
        })
    }

    /// The `K` responses in order.
    pub fn responses(&self) -> impl ExactSizeIterator<Item = Response<'_>> + '_ {
        self.offsets.windows(2).zip(&self.rewards).map(move |(w, &reward)| {
            let (a, b) = (w[0] as usize, w[1] as usize);
            Response {
                tokens: &self.tokens[a..b],
                behaviour_logp: &self.behaviour_logp[a..b],
                mask: if self.mask.is_empty() { &[] } else { &self.mask[a..b] },
                reward,
            }
        })
    }

    /// The prompt's token ids (empty unless attached).
    pub fn prompt_tokens(&self) -> &[u32] {
        &self.prompt_tokens
    }

    /// All response tokens, concatenated.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// All behaviour log-probabilities, concatenated.
    pub fn behaviour_logp(&self) -> &[f32] {
        &self.behaviour_logp
    }

    /// The flat mask; empty when every token counts.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// `K + 1` offsets of the responses into the flat token arrays.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The `K` rewards.
    pub fn rewards(&self) -> &[f32] {
        &self.rewards
    }

    /// The `K` binary outcomes, if attached.
    pub fn outcomes(&self) -> Option<&[bool]> {
        (!self.outcomes.is_empty()).then_some(&self.outcomes[..])
    }

    /// The `K` advantages, if attached or computed by the buffer.
    pub fn advantages(&self) -> Option<&[f32]> {
        (!self.advantages.is_empty()).then_some(&self.advantages[..])
    }

    /// Size of the group's data as a caller holds it: token ids (4 B), log-probs (4 B) and
    /// mask (1 B) per token, prompt tokens (4 B), and 4 B per reward/advantage, 1 B per
    /// outcome. The "raw" baseline of the memory benchmark.
    pub fn raw_bytes(&self) -> usize {
        4 * self.tokens.len()
            + 4 * self.behaviour_logp.len()
            + self.mask.len()
            + 4 * self.prompt_tokens.len()
            + 4 * self.rewards.len()
            + 4 * self.advantages.len()
            + self.outcomes.len()
    }

    /// Bytes this group occupies: its struct plus the capacity of every heap array.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + 4 * self.tokens.capacity()
            + 4 * self.behaviour_logp.capacity()
            + self.mask.capacity()
            + 4 * self.prompt_tokens.capacity()
            + 4 * self.offsets.capacity()
            + 4 * self.rewards.capacity()
            + 4 * self.advantages.capacity()
            + self.outcomes.capacity()
    }

    /// Bytes charged against the buffer's byte capacity: like [`Group::heap_bytes`] but from
    /// lengths, so it does not depend on allocator history (checkpoints resume exactly).
    pub fn stored_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.raw_bytes() + 4 * self.offsets.len()
    }
}

/// Builds a [`Group`] one response at a time.
///
/// ```
/// use rlvr_replay::GroupBuilder;
/// let mut b = GroupBuilder::new(0, 0).with_capacity(2, 4);
/// b.push_response(&[1, 2], &[-0.3, -0.7], Some(&[true, false]), 1.0)?;
/// b.push_response(&[3, 4], &[-1.3, -0.2], Some(&[true, true]), 0.0)?;
/// let g = b.finish()?;
/// assert_eq!(g.mask(), &[true, false, true, true]);
/// # Ok::<(), rlvr_replay::ReplayError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GroupBuilder {
    prompt_id: u64,
    policy_version: u64,
    tokens: Vec<u32>,
    behaviour_logp: Vec<f32>,
    mask: Vec<bool>,
    lengths: Vec<usize>,
    rewards: Vec<f32>,
}

impl GroupBuilder {
    /// An empty group for `prompt_id`, sampled by policy `policy_version`.
    pub fn new(prompt_id: u64, policy_version: u64) -> Self {
        Self {
            prompt_id,
            policy_version,
            tokens: Vec::new(),
            behaviour_logp: Vec::new(),
            mask: Vec::new(),
            lengths: Vec::new(),
            rewards: Vec::new(),
        }
    }

    /// Reserves room for `responses` responses of `tokens` tokens in total.
    #[must_use]
    pub fn with_capacity(mut self, responses: usize, tokens: usize) -> Self {
        self.tokens.reserve_exact(tokens);
        self.behaviour_logp.reserve_exact(tokens);
        self.mask.reserve_exact(tokens);
        self.lengths.reserve_exact(responses);
        self.rewards.reserve_exact(responses);
        self
    }

    /// Appends one response. `mask = None` means every token counts.
    ///
    /// # Errors
    /// [`ReplayError::Length`] when `behaviour_logp` or `mask` do not match `tokens`;
    /// [`ReplayError::NonFinite`] for a NaN/infinite reward or log-probability;
    /// [`ReplayError::PositiveLogProb`]. The builder is unchanged on error.
    pub fn push_response(
        &mut self,
        tokens: &[u32],
        behaviour_logp: &[f32],
        mask: Option<&[bool]>,
        reward: f32,
    ) -> Result<&mut Self> {
        if behaviour_logp.len() != tokens.len() {
            return Err(ReplayError::Length {
                what: "behaviour_logp",
                expected: tokens.len(),
                got: behaviour_logp.len(),
            });
        }
        if let Some(m) = mask {
            if m.len() != tokens.len() {
                return Err(ReplayError::Length { what: "mask", expected: tokens.len(), got: m.len() });
            }
        }
        check_finite("reward", &[reward])?;
        check_logp(behaviour_logp)?;
        self.tokens.extend_from_slice(tokens);
        self.behaviour_logp.extend_from_slice(behaviour_logp);
        match mask {
            Some(m) => self.mask.extend_from_slice(m),
            None => self.mask.resize(self.tokens.len(), true),
        }
        self.lengths.push(tokens.len());
        self.rewards.push(reward);
        Ok(self)
    }

    /// The finished group (spare capacity released; an all-true mask is dropped).
    ///
    /// # Errors
    /// [`ReplayError::Empty`] without responses; [`ReplayError::TooLarge`] above `u32::MAX`
    /// tokens.
    pub fn finish(self) -> Result<Group> {
        let mask = if self.mask.iter().all(|&m| m) { Vec::new() } else { self.mask };
        Group::from_flat(
            self.prompt_id,
            self.policy_version,
            FlatResponses {
                tokens: self.tokens,
                behaviour_logp: self.behaviour_logp,
                mask,
                lengths: self.lengths,
                rewards: self.rewards,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(k: usize, len: usize) -> FlatResponses {
        FlatResponses {
            tokens: (0..(k * len) as u32).collect(),
            behaviour_logp: vec![-0.5; k * len],
            mask: Vec::new(),
            lengths: vec![len; k],
            rewards: (0..k).map(|i| (i % 2) as f32).collect(),
        }
    }

    #[test]
    fn from_flat_slices_responses() -> Result<()> {
        let g = Group::from_flat(1, 2, flat(3, 4))?;
        assert_eq!(g.k(), 3);
        let r = g.response(2).ok_or(ReplayError::Empty { what: "r" })?;
        assert_eq!(r.tokens, &[8, 9, 10, 11]);
        assert!(r.mask.is_empty());
        assert!(g.response(3).is_none());
        assert_eq!(g.responses().count(), 3);
        assert_eq!(g.max_len(), 4);
        Ok(())
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let mut f = flat(2, 3);
        f.rewards[1] = f32::NAN;
        assert!(matches!(Group::from_flat(0, 0, f), Err(ReplayError::NonFinite { what: "rewards", index: 1, .. })));
        let mut f = flat(2, 3);
        f.lengths = vec![3, 2];
        assert!(matches!(Group::from_flat(0, 0, f), Err(ReplayError::Length { what: "tokens", .. })));
        let mut f = flat(2, 3);
        f.behaviour_logp[4] = 0.5;
        assert!(matches!(Group::from_flat(0, 0, f), Err(ReplayError::PositiveLogProb { index: 4, .. })));
        let f = FlatResponses::default();
        assert!(matches!(Group::from_flat(0, 0, f), Err(ReplayError::Empty { .. })));
        let mut b = GroupBuilder::new(0, 0);
        assert!(b.push_response(&[1], &[-0.1, -0.2], None, 0.0).is_err());
        assert!(b.push_response(&[1], &[-0.1], None, f32::INFINITY).is_err());
        assert!(b.clone().finish().is_err());
    }

    #[test]
    fn serde_round_trip_revalidates() -> anyhow::Result<()> {
        let g = Group::from_flat(1, 2, flat(2, 3))?.with_advantages(vec![1.0, -1.0])?;
        let s = serde_json::to_string(&g)?;
        let back: Group = serde_json::from_str(&s)?;
        assert_eq!(back, g);
        let bad = s.replace("\"rewards\":[0.0,1.0]", "\"rewards\":[0.0]");
        assert!(serde_json::from_str::<Group>(&bad).is_err());
        Ok(())
    }

    #[test]
    fn accessors_return_the_stored_arrays() -> Result<()> {
        let mut f = flat(2, 2);
        f.mask = vec![true, false, true, true];
        let g = Group::from_flat(1, 2, f)?.with_prompt_tokens(vec![5, 6, 7]);
        assert_eq!(g.prompt_tokens(), &[5, 6, 7]);
        assert_eq!(g.mask(), &[true, false, true, true]);
        assert_eq!(g.offsets(), &[0, 2, 4]);
        assert_eq!(g.response(0).map(|r| r.mask), Some(&[true, false][..]));
        Ok(())
    }

    #[test]
    fn offsets_may_repeat_but_not_decrease() -> anyhow::Result<()> {
        // an empty response (equal offsets) is legal; decreasing offsets are not
        let mut f = flat(3, 2);
        f.lengths = vec![2, 0, 4];
        let g = Group::from_flat(1, 2, f)?;
        assert_eq!(g.offsets(), &[0, 2, 2, 6]);
        let s = serde_json::to_string(&g)?;
        assert_eq!(serde_json::from_str::<Group>(&s)?, g);
        let bad = s.replace("\"offsets\":[0,2,2,6]", "\"offsets\":[0,3,2,6]");
        assert_ne!(bad, s);
        assert!(serde_json::from_str::<Group>(&bad).is_err());
        Ok(())
    }

    #[test]
    fn spare_capacity_is_released() -> Result<()> {
        let mut f = flat(2, 3);
        f.tokens.reserve(1000);
        f.behaviour_logp.reserve(1000);
        let g = Group::from_flat(1, 2, f)?;
        assert!(g.tokens.capacity() < 100 && g.behaviour_logp.capacity() < 100);
        Ok(())
    }

    #[test]
    fn byte_counts_add_every_array() -> Result<()> {
        // 6 tokens, 3 prompt tokens, K = 2 rewards, advantages and outcomes, a flat mask
        let mut f = flat(2, 3);
        f.mask = vec![true; 6];
        let g = Group::from_flat(1, 2, f)?
            .with_prompt_tokens(vec![5, 6, 7])
            .with_advantages(vec![1.0, -1.0])?
            .with_outcomes(vec![true, false])?;
        let raw = 4 * 6 + 4 * 6 + 6 + 4 * 3 + 4 * 2 + 4 * 2 + 2;
        assert_eq!(g.raw_bytes(), raw);
        assert_eq!(g.stored_bytes(), std::mem::size_of::<Group>() + raw + 4 * 3);
        // arrays at exact capacity: the struct, the raw bytes and the 3 offsets
        assert_eq!(g.heap_bytes(), std::mem::size_of::<Group>() + raw + 4 * 3);
        Ok(())
    }

    #[test]
    fn memory_is_close_to_raw() -> Result<()> {
        let g = Group::from_flat(1, 2, flat(8, 1024))?;
        let raw = g.raw_bytes() as f64;
        assert!((g.heap_bytes() as f64) < 1.01 * raw);
        assert!((g.stored_bytes() as f64) < 1.01 * raw);
        Ok(())
    }
}
