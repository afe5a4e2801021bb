//! Building selectors by name from JSON parameters (what the Python constructor does).

use rl_core::Valid;
use rlvr_select::{
    Dps, DpsParams, Drm, DrmParams, DynamicSampling, FilterParams, Gdrm, GdrmParams, HistoryResampling,
    HistoryResamplingParams, Mopps, MoppsParams, OnlineDifficultyFilter, SelectError, Selector, Uniform,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Every selector kind the bindings build, by its Python name.
pub const KINDS: [&str; 8] =
    ["dps", "mopps", "uniform", "history_resampling", "dynamic_sampling", "online_filter", "drm", "gdrm"];

/// A selector kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorKind {
    /// [`Dps`] (needs `n_items`).
    Dps,
    /// [`Mopps`] (needs `n_items`).
    Mopps,
    /// [`Uniform`].
    Uniform,
    /// [`HistoryResampling`].
    HistoryResampling,
    /// [`DynamicSampling`] (rollout-based: needs an oracle).
    DynamicSampling,
    /// [`OnlineDifficultyFilter`] (rollout-based: needs an oracle).
    OnlineFilter,
    /// [`Drm`] (rollout-based: needs an oracle).
    Drm,
    /// [`Gdrm`].
    Gdrm,
}

impl SelectorKind {
    /// Parses a Python name (see [`KINDS`]).
    ///
    /// # Errors
    /// [`SelectError::InvalidParameter`] naming the known kinds.
    pub fn parse(name: &str) -> Result<Self, SelectError> {
        Ok(match name {
            "dps" => Self::Dps,
            "mopps" => Self::Mopps,
            "uniform" => Self::Uniform,
            "history_resampling" => Self::HistoryResampling,
            "dynamic_sampling" => Self::DynamicSampling,
            "online_filter" => Self::OnlineFilter,
            "drm" => Self::Drm,
            "gdrm" => Self::Gdrm,
            other => {
                return Err(SelectError::InvalidParameter {
                    name: "kind".into(),
                    value: format!("{other:?}"),
                    reason: format!("unknown selector; known: {}", KINDS.join(", ")),
                })
            }
        })
    }

    /// Whether the selector keeps per-prompt state for ids `0..n_items`.
    pub fn needs_n_items(self) -> bool {
        matches!(self, Self::Dps | Self::Mopps)
    }
}

/// Overlays the user's keys on the preset's serialised parameters, then deserialises and checks
/// them (unknown keys and out-of-range values are errors).
fn merged<P>(preset: P, user: &Value) -> Result<Valid<P>, SelectError>
where
    P: Serialize + DeserializeOwned + rl_core::Params,
    P::Error: std::fmt::Display,
{
    let mut base = serde_json::to_value(preset)?;
    match (user, &mut base) {
        (Value::Null, _) => {}
        (Value::Object(u), Value::Object(b)) => {
            for (k, v) in u {
                b.insert(k.clone(), v.clone());
            }
        }
        (other, _) => {
            return Err(SelectError::InvalidParameter {
                name: "params".into(),
                value: other.to_string(),
                reason: "must be a dict (or None)".into(),
            })
        }
    }
    serde_json::from_value::<Valid<P>>(base).map_err(|e| SelectError::InvalidParameter {
        name: "params".into(),
        value: user.to_string(),
        reason: e.to_string(),
    })
}

/// The most memory a per-prompt selector may allocate: half of `MemTotal` in `/proc/meminfo`
/// (Linux), else 64 GiB. Dps/Mopps allocate their whole pool up front, and an allocation that
/// cannot be served aborts the process (a Python interpreter included), so it is checked first.
pub fn memory_budget() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
    });
    total.map_or(64 << 30, |kb| kb.saturating_mul(1024) / 2)
}

fn check_pool(n: usize, bytes_per_prompt: usize) -> Result<usize, SelectError> {
    let need = (n as u64).saturating_mul(bytes_per_prompt as u64);
    let budget = memory_budget();
    if need > budget {
        return Err(SelectError::InvalidParameter {
            name: "n_items".into(),
            value: n.to_string(),
            reason: format!(
                "needs {need} bytes ({bytes_per_prompt} per prompt), more than the budget of {budget} bytes \
                 (half of this machine's memory)"
            ),
        });
    }
    Ok(n)
}

/// Builds a selector of `kind` with `params` (a JSON object overlaid on the kind's defaults,
/// or `null`) for a pool of `n_items` prompts (required by `dps` and `mopps`).
///
/// # Errors
/// [`SelectError::InvalidParameter`] for an unknown kind, a missing `n_items`, unknown keys or
/// bad values; the selector's constructor errors.
pub fn selector_from_json(
    kind: SelectorKind,
    n_items: Option<usize>,
    params: &Value,
) -> Result<Box<dyn Selector + Send + Sync>, SelectError> {
    let need = || {
        n_items.ok_or_else(|| SelectError::InvalidParameter {
            name: "n_items".into(),
            value: "None".into(),
            reason: "dps and mopps track every prompt: pass the pool size".into(),
        })
    };
    Ok(match kind {
        SelectorKind::Dps => {
            let n = check_pool(need()?, Dps::bytes_per_prompt())?;
            Box::new(Dps::new(merged(DpsParams::default(), params)?, n)?)
        }
        SelectorKind::Mopps => {
            let n = check_pool(need()?, Mopps::bytes_per_prompt())?;
            Box::new(Mopps::new(merged(MoppsParams::default(), params)?, n)?)
        }
        SelectorKind::Uniform => {
            if !matches!(params, Value::Null) && params.as_object().is_none_or(|o| !o.is_empty()) {
                return Err(SelectError::InvalidParameter {
                    name: "params".into(),
                    value: params.to_string(),
                    reason: "uniform takes no parameters".into(),
                });
            }
            Box::new(Uniform::new())
        }
        SelectorKind::HistoryResampling => {
            Box::new(HistoryResampling::new(merged(HistoryResamplingParams::default(), params)?)?)
        }
        SelectorKind::DynamicSampling => {
            Box::new(DynamicSampling::new(merged(FilterParams::dynamic_sampling(), params)?)?)
        }
        SelectorKind::OnlineFilter => {
            Box::new(OnlineDifficultyFilter::new(merged(FilterParams::online_difficulty(), params)?)?)
        }
        SelectorKind::Drm => Box::new(Drm::new(merged(DrmParams::default(), params)?)?),
        SelectorKind::Gdrm => Box::new(Gdrm::new(merged(GdrmParams::default(), params)?)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_builds_and_bad_params_are_errors() -> anyhow::Result<()> {
        for k in KINDS {
            let kind = SelectorKind::parse(k)?;
            let s = selector_from_json(kind, Some(10), &Value::Null)?;
            assert!(!s.name().is_empty());
        }
        assert!(SelectorKind::parse("dpz").is_err());
        let bad = serde_json::json!({"decay": 2.0});
        assert!(selector_from_json(SelectorKind::Dps, Some(10), &bad).is_err());
        let typo = serde_json::json!({"decai": 0.5});
        assert!(selector_from_json(SelectorKind::Dps, Some(10), &typo).is_err());
        assert!(selector_from_json(SelectorKind::Dps, None, &Value::Null).is_err());
        assert!(selector_from_json(SelectorKind::Uniform, None, &serde_json::json!({"x": 1})).is_err());
        assert!(selector_from_json(SelectorKind::Dps, Some(usize::MAX / 2), &Value::Null).is_err());
        let ok = serde_json::json!({"decay": 0.5});
        assert!(selector_from_json(SelectorKind::Dps, Some(10), &ok).is_ok());
        Ok(())
    }
}
