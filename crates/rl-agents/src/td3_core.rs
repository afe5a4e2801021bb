//! The hyper-parameters every TD3-family learner shares ([`Td3Core`]), declared once and
//! embedded as the field `td3` by [`crate::Td3Params`] and by offline-rl's TD3+BC, DMG and
//! SCAS parameters; [`td3_family_params!`](crate::td3_family_params) gives such a struct its
//! flat configuration format and the core's setters.

use rl_core::check::{self, InvalidParam};
use rl_core::Params;
use rl_nn::{Activation, MlpConfig, RlNnError};
use serde::de::MapAccess;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

use crate::actor_critic::ActorCriticSpec;
use crate::error::{AgentError, Result};
use crate::nets::ActionBounds;
use crate::sac::setters;

/// The TD3 hyper-parameters (Fujimoto et al. 2018, arXiv 1802.09477; code `sfujimoto/TD3`)
/// shared by every TD3-family learner: a deterministic actor, a critic ensemble whose targets
/// take the minimum (or another aggregate), target smoothing and delayed actor updates.
/// Defaults are the authors' code (`TD3.py`/`main.py`), which CORL and CleanRL follow; a
/// learner with other defaults (SCAS: 4 critics, actor step 2e-4) sets them in its own
/// `Default`.
///
/// | name | default | purpose | range | source |
/// |---|---|---|---|---|
/// | `actor`, `critic` | `[256, 256]` ReLU | networks | [`MlpConfig`], identity output | code (paper: 400-300) |
/// | `n_critics` | 2 | critics in the fused ensemble; targets use their minimum | `>= 1` | paper (clipped double Q) |
/// | `gamma` | 0.99 | discount | `[0, 1]` | paper |
/// | `tau` | 0.005 | target smoothing | `[0, 1]` | paper |
/// | `actor_lr`, `critic_lr` | 3e-4 | Adam steps | `> 0` | code (paper: 1e-3) |
/// | `policy_noise` | 0.2 | target smoothing noise std | `>= 0` | paper |
/// | `noise_clip` | 0.5 | clip of the smoothing noise | `>= 0` | paper |
/// | `policy_delay` | 2 | critic updates per actor and target update | `>= 1` | paper |
/// | `exploration_noise` | 0.1 | Gaussian exploration std, × action scale | `>= 0` | paper |
///
/// Whether the smoothing noise is multiplied by the action scale is the learner's choice (TD3
/// and TD3+BC: yes; DMG and SCAS: no, unless `scale_target_noise`).
///
/// In a learner's parameters the core is the field `td3`, but its keys stay at the top level
/// of the configuration (`{"gamma": 0.9, "alpha": 2.5}` for TD3+BC, not `{"td3": {..}}`):
///
/// ```
/// use rl_agents::{Td3Core, Td3Params};
/// let p: Td3Params = serde_json::from_str(r#"{"gamma": 0.9, "actor_objective": "min"}"#)?;
/// assert_eq!(p.td3, Td3Core::default().gamma(0.9));
/// assert_eq!(p, Td3Params::default().gamma(0.9).actor_objective(rl_agents::ActorObjective::Min));
/// let e = serde_json::from_str::<Td3Params>(r#"{"gama": 0.9}"#).unwrap_err();
/// assert!(e.to_string().starts_with("unknown field `gama`"), "{e}");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Td3Core {
    /// Policy network.
    pub actor: MlpConfig,
    /// Each critic's network.
    pub critic: MlpConfig,
    /// Number of critics.
    pub n_critics: usize,
    /// Discount.
    pub gamma: f64,
    /// Polyak coefficient.
    pub tau: f64,
    /// Policy learning rate.
    pub actor_lr: f64,
    /// Critic learning rate.
    pub critic_lr: f64,
    /// Target smoothing noise.
    pub policy_noise: f64,
    /// Clip of the smoothing noise.
    pub noise_clip: f64,
    /// Critic updates per actor update.
    pub policy_delay: usize,
    /// Exploration noise.
    pub exploration_noise: f64,
}

impl Default for Td3Core {
    fn default() -> Self {
        Self {
            actor: MlpConfig::new([256, 256]),
            critic: MlpConfig::new([256, 256]),
            n_critics: 2,
            gamma: 0.99,
            tau: 0.005,
            actor_lr: 3e-4,
            critic_lr: 3e-4,
            policy_noise: 0.2,
            noise_clip: 0.5,
            policy_delay: 2,
            exploration_noise: 0.1,
        }
    }
}

/// One list of the core's fields: the setters, the key list and the flat reading and writing.
macro_rules! core_fields {
    ($($field:ident : $ty:ty),* $(,)?) => {
        setters!(Td3Core { $($field: $ty),* });

        impl Td3Core {
            /// The core's keys, in the order they are written.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Reads the value of `key` from `map` into its field when `key` is one of
            /// [`Td3Core::FIELDS`] (`Ok(true)`); `Ok(false)`, with the value left unread,
            /// otherwise. Used by [`td3_family_params!`](crate::td3_family_params).
            ///
            /// # Errors
            /// Whatever the value's deserialiser rejects.
            #[doc(hidden)]
            pub fn read_field<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
                match key {
                    $(stringify!($field) => self.$field = map.next_value()?,)*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            /// Writes the core's fields into `s` as top-level keys. Used by
            /// [`td3_family_params!`](crate::td3_family_params).
            ///
            /// # Errors
            /// Whatever the serialiser rejects.
            #[doc(hidden)]
            pub fn serialize_fields<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error> {
                $(s.serialize_field(stringify!($field), &self.$field)?;)*
                Ok(())
            }
        }
    };
}

core_fields! {
    actor: MlpConfig,
    critic: MlpConfig,
    n_critics: usize,
    gamma: f64,
    tau: f64,
    actor_lr: f64,
    critic_lr: f64,
    policy_noise: f64,
    noise_clip: f64,
    policy_delay: usize,
    exploration_noise: f64,
}

impl Td3Core {
    /// Sets the hidden widths of both actor and critic.
    #[must_use]
    pub fn hidden(mut self, hidden: impl Into<Vec<i64>> + Clone) -> Self {
        self.actor.hidden = hidden.clone().into();
        self.critic.hidden = hidden.into();
        self
    }

    /// Checks every field in the order of the table, naming the first bad one (`actor.hidden[0]`,
    /// `gamma`, ...); each crate's error converts [`InvalidParam`] into its `InvalidParameter`.
    ///
    /// # Errors
    /// [`InvalidParam`] for the first field out of its range.
    pub fn check_fields(&self) -> Result<(), InvalidParam> {
        check_net("actor", &self.actor)?;
        check_net("critic", &self.critic)?;
        check::at_least("n_critics", self.n_critics, 1)?;
        check::unit_closed("gamma", self.gamma)?;
        check::unit_closed("tau", self.tau)?;
        check::positive("actor_lr", self.actor_lr)?;
        check::positive("critic_lr", self.critic_lr)?;
        check::non_negative("policy_noise", self.policy_noise)?;
        check::non_negative("noise_clip", self.noise_clip)?;
        check::at_least("policy_delay", self.policy_delay, 1)?;
        check::non_negative("exploration_noise", self.exploration_noise)?;
        Ok(())
    }

    /// The [`ActorCriticSpec`] of these networks, learning rates and ensemble size, for
    /// observations of width `obs_dim` and actions in `bounds`.
    pub fn spec(&self, obs_dim: usize, bounds: ActionBounds) -> ActorCriticSpec<'_> {
        ActorCriticSpec {
            obs_dim,
            bounds,
            actor: &self.actor,
            critic: &self.critic,
            n_critics: self.n_critics,
            actor_lr: self.actor_lr,
            critic_lr: self.critic_lr,
        }
    }
}

impl Params for Td3Core {
    type Error = AgentError;
    fn validate(&self) -> Result<()> {
        Ok(self.check_fields()?)
    }
}

/// A network configuration with an identity output, its errors named `name.field`.
fn check_net(name: &str, cfg: &MlpConfig) -> Result<(), InvalidParam> {
    cfg.validate().map_err(|e| match e {
        RlNnError::InvalidParameter { name: field, value, reason } => {
            InvalidParam { name: format!("{name}.{field}"), value, reason }
        }
        other => InvalidParam { name: name.to_owned(), value: String::new(), reason: other.to_string() },
    })?;
    if cfg.output_activation != Activation::Identity {
        return Err(InvalidParam {
            name: format!("{name}.output_activation"),
            value: format!("{:?}", cfg.output_activation),
            reason: "must be identity".into(),
        });
    }
    Ok(())
}

/// Reads a map key that must be one of `.0`, refusing any other inside the key's own
/// deserialisation (as serde's derive does), so that a path-tracking reader
/// (`serde_path_to_error`) reports the unknown key at its path. Used by
/// [`td3_family_params!`](crate::td3_family_params).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct FieldSeed(pub &'static [&'static str]);

impl<'de> serde::de::DeserializeSeed<'de> for FieldSeed {
    type Value = &'static str;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl serde::de::Visitor<'_> for FieldSeed {
    type Value = &'static str;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field identifier")
    }
    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<&'static str, E> {
        self.0.iter().find(|f| **f == key).copied().ok_or_else(|| E::unknown_field(key, self.0))
    }
    fn visit_bytes<E: serde::de::Error>(self, key: &[u8]) -> Result<&'static str, E> {
        match std::str::from_utf8(key) {
            Ok(key) => self.visit_str(key),
            Err(_) => Err(E::unknown_field(&String::from_utf8_lossy(key), self.0)),
        }
    }
}

/// Gives a parameter struct that embeds a [`Td3Core`] as its field `td3` the flat
/// configuration format and the core's setters:
///
/// - `Serialize`: the core's keys ([`Td3Core::FIELDS`]) and then the listed fields, all at the
///   top level;
/// - `Deserialize`: starts from the struct's `Default` (so a key left out keeps the learner's
///   default, not [`Td3Core::default`]), reads each key into the core or the listed field, and
///   refuses an unknown or repeated key with serde's own message naming it (`unknown field
///   `gama`, expected one of ...`), as `#[serde(default, deny_unknown_fields)]` does; values are
///   read straight from the input, so key paths (`serde_path_to_error`) and numbers behave as
///   with the derive;
/// - one `#[must_use]` setter per core field (`.gamma(0.9)` sets `td3.gamma`).
///
/// The struct derives neither `Serialize` nor `Deserialize` itself; the other fields still
/// need their own setters.
///
/// ```
/// use rl_agents::Td3Core;
/// #[derive(Debug, Clone, PartialEq)]
/// pub struct FooParams {
///     /// The shared TD3 hyper-parameters.
///     pub td3: Td3Core,
///     /// Weight of Foo's extra term.
///     pub alpha: f64,
/// }
/// impl Default for FooParams {
///     fn default() -> Self {
///         Self { td3: Td3Core { n_critics: 4, ..Td3Core::default() }, alpha: 2.5 }
///     }
/// }
/// rl_agents::td3_family_params!(FooParams { alpha });
///
/// let p: FooParams = serde_json::from_str(r#"{"gamma": 0.9}"#)?;
/// assert_eq!(p, FooParams::default().gamma(0.9));
/// assert_eq!(p.td3.n_critics, 4);
/// let json = serde_json::to_value(&p)?;
/// assert_eq!((json["gamma"].as_f64(), json["alpha"].as_f64()), (Some(0.9), Some(2.5)));
/// assert!(serde_json::from_str::<FooParams>(r#"{"td3": {}}"#).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[macro_export]
macro_rules! td3_family_params {
    ($t:ident { $($field:ident),* $(,)? }) => {
        impl $t {
            /// Every key of the flat configuration: the TD3 core's, then this struct's own.
            const ALL_FIELDS: &'static [&'static str] = &{
                const OWN: &[&str] = &[$(stringify!($field)),*];
                const CORE: &[&str] = $crate::Td3Core::FIELDS;
                let mut all = [""; CORE.len() + OWN.len()];
                let mut i = 0;
                while i < CORE.len() {
                    all[i] = CORE[i];
                    i += 1;
                }
                let mut j = 0;
                while j < OWN.len() {
                    all[CORE.len() + j] = OWN[j];
                    j += 1;
                }
                all
            };

            $crate::td3_family_params!(@setters
                actor: $crate::__private::MlpConfig,
                critic: $crate::__private::MlpConfig,
                n_critics: usize,
                gamma: f64,
                tau: f64,
                actor_lr: f64,
                critic_lr: f64,
                policy_noise: f64,
                noise_clip: f64,
                policy_delay: usize,
                exploration_noise: f64,
            );
        }

        impl $crate::__private::serde::Serialize for $t {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                use $crate::__private::serde::ser::SerializeStruct;
                let mut s = serializer.serialize_struct(stringify!($t), Self::ALL_FIELDS.len())?;
                self.td3.serialize_fields(&mut s)?;
                $(s.serialize_field(stringify!($field), &self.$field)?;)*
                s.end()
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $t {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::std::result::Result<Self, D::Error> {
                use $crate::__private::serde::de::{Error, MapAccess, Visitor};
                struct Flat;
                impl<'de> Visitor<'de> for Flat {
                    type Value = $t;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("struct ", stringify!($t)))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> ::std::result::Result<$t, A::Error> {
                        let mut out = <$t as ::std::default::Default>::default();
                        let mut seen: ::std::vec::Vec<&'static str> = ::std::vec::Vec::new();
                        while let Some(name) = map.next_key_seed($crate::td3_core::FieldSeed(<$t>::ALL_FIELDS))? {
                            if seen.contains(&name) {
                                return Err(A::Error::duplicate_field(name));
                            }
                            seen.push(name);
                            if out.td3.read_field(name, &mut map)? {
                                continue;
                            }
                            match name {
                                $(stringify!($field) => out.$field = map.next_value()?,)*
                                _ => return Err(A::Error::unknown_field(name, <$t>::ALL_FIELDS)),
                            }
                        }
                        Ok(out)
                    }
                }
                deserializer.deserialize_struct(stringify!($t), Self::ALL_FIELDS, Flat)
            }
        }
    };
    (@setters $($field:ident : $ty:ty),* $(,)?) => {
        $(
            #[doc = concat!("Sets `td3.", stringify!($field), "` (the TD3 core's field).")]
            #[must_use]
            pub fn $field(mut self, v: $ty) -> Self {
                self.td3.$field = v;
                self
            }
        )*
    };
}
