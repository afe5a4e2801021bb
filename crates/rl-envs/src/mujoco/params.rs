//! The parameter sets of the MuJoCo environments: one macro writes each struct (gymnasium's
//! kwargs with their defaults, `serde(default, deny_unknown_fields)`), its `Default`, its
//! builder setters and its [`rl_core::Params`] impl from a field list, and the checks it names.

/// `f64` that serialises infinities as the strings `"inf"` / `"-inf"` (JSON has no infinity).
pub(crate) mod f64_inf {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64; 2], s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(2)?;
        for x in v {
            if x.is_finite() {
                t.serialize_element(x)?;
            } else {
                t.serialize_element(if *x > 0.0 { "inf" } else { "-inf" })?;
            }
        }
        t.end()
    }

    /// One bound: a number or `"inf"` / `"-inf"` (a visitor, not an untagged enum, so that a
    /// bad value gets a message saying what is expected rather than serde's "did not match any
    /// variant of untagged enum").
    struct Num(f64);

    impl<'de> Deserialize<'de> for Num {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl serde::de::Visitor<'_> for V {
                type Value = Num;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a number, \"inf\" or \"-inf\"")
                }
                fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Num, E> {
                    Ok(Num(v))
                }
                fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Num, E> {
                    Ok(Num(v as f64))
                }
                fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Num, E> {
                    Ok(Num(v as f64))
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Num, E> {
                    match s {
                        "inf" => Ok(Num(f64::INFINITY)),
                        "-inf" => Ok(Num(f64::NEG_INFINITY)),
                        _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
                    }
                }
            }
            d.deserialize_any(V)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
        let [lo, hi]: [Num; 2] = Deserialize::deserialize(d)?;
        Ok([lo.0, hi.0])
    }

    #[cfg(test)]
    mod tests {
        #[derive(Debug, serde::Deserialize)]
        struct R(#[serde(with = "super")] [f64; 2]);

        #[test]
        fn bounds_read_numbers_and_infinities_and_name_a_bad_value() {
            let r: R = serde_json::from_str(r#"[-1, "inf"]"#).unwrap_or(R([0.0; 2]));
            assert_eq!(r.0, [-1.0, f64::INFINITY]);
            let r: R = serde_json::from_str(r#"["-inf", 0.5]"#).unwrap_or(R([0.0; 2]));
            assert_eq!(r.0, [f64::NEG_INFINITY, 0.5]);
            let e = serde_json::from_str::<R>(r#"[0, "big"]"#).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains("\"big\"") && e.contains("\"inf\"") && !e.contains("untagged"), "{e}");
            assert!(serde_json::from_str::<R>(r#"[0, true]"#).is_err());
        }
    }
}

/// The checks a field of [`gym_params!`] names after `=>`: each gets the field's name and value
/// and names the field in its error.
pub(crate) mod check {
    use std::path::Path;

    use crate::error::{EnvError, Result};
    use crate::mujoco::MainBody;

    /// Finite.
    pub(crate) fn finite(name: &str, v: &f64) -> Result<()> {
        if !v.is_finite() {
            return Err(EnvError::invalid(name, v, "must be finite"));
        }
        Ok(())
    }

    /// Finite and `>= 0`.
    pub(crate) fn non_negative(name: &str, v: &f64) -> Result<()> {
        Ok(crate::common::non_negative(name, *v)?)
    }

    /// A range `[min, max]` with `min < max` (no NaN).
    pub(crate) fn range(name: &str, r: &[f64; 2]) -> Result<()> {
        if r[0].is_nan() || r[1].is_nan() || r[0] >= r[1] {
            return Err(EnvError::invalid(name, format!("{r:?}"), "need min < max"));
        }
        Ok(())
    }

    /// `>= 1` (a frame skip).
    pub(crate) fn at_least_one(name: &str, v: &usize) -> Result<()> {
        if *v == 0 {
            return Err(EnvError::invalid(name, v, "must be >= 1"));
        }
        Ok(())
    }

    /// A non-empty path (v5 locomotion's `xml_file`).
    pub(crate) fn model_file(name: &str, p: &Path) -> Result<()> {
        if p.as_os_str().is_empty() {
            return Err(EnvError::invalid(name, "\"\"", "must name a model file"));
        }
        Ok(())
    }

    /// A body id, or a non-empty name without NUL (Ant-v5's `main_body`).
    pub(crate) fn body(name: &str, b: &MainBody) -> Result<()> {
        if let MainBody::Name(n) = b {
            if n.is_empty() || n.contains('\0') {
                return Err(EnvError::invalid(name, format!("{n:?}"), "must name a body (non-empty, no NUL)"));
            }
        }
        Ok(())
    }
}

/// A parameter set: `Name { field: Type = default => check, ... } then extra`, each field with
/// its docs and attributes (`#[serde(with = "f64_inf")]` for ranges that may be infinite).
/// Writes `pub struct Name` (`Debug, Clone, PartialEq, Serialize, Deserialize`,
/// `serde(default, deny_unknown_fields)`), `Default` from the defaults, one `#[must_use]`
/// setter a field, and `Params::validate`: each field's [`check`] in field order (fields
/// without `=> check` have none), then `extra(&self)` when given (cross-field rules).
macro_rules! gym_params {
    (
        $(#[$doc:meta])*
        $name:ident {
            $($(#[$attr:meta])* $field:ident: $ty:ty = $default:expr $(=> $check:ident)?),* $(,)?
        }
        $(then $extra:expr)?
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $($(#[$attr])* pub $field: $ty,)*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        impl $name {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, v: $ty) -> Self {
                    self.$field = v;
                    self
                }
            )*
        }

        impl ::rl_core::Params for $name {
            type Error = $crate::EnvError;
            fn validate(&self) -> $crate::Result<()> {
                $($($crate::mujoco::params::check::$check(stringify!($field), &self.$field)?;)?)*
                $(($extra)(self)?;)?
                Ok(())
            }
        }
    };
}
pub(crate) use gym_params;
