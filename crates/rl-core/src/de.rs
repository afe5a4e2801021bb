//! Deserialisation of config files that drops no key and names every error by its dotted
//! path (docs/conventions.md §1).
//!
//! Two gaps of serde's derives are closed here:
//!
//! - an internally tagged enum (`kind = "uniform"` next to the variant's fields) ignores every
//!   key next to the tag of a variant without fields, even with `deny_unknown_fields`;
//! - serde buffers an internally tagged or untagged value before deserialising its contents,
//!   so a path tracker (`serde_path_to_error`) stops at the enum: an unknown key inside
//!   `[loss.policy]` is reported at `loss.policy`.
//!
//! [`internally_tagged`] reads such an enum through an externally tagged twin of it (derived
//! with `#[serde(remote = "...")]`): it buffers the table into a [`Raw`] value, takes the tag
//! out, and deserialises `{ variant = rest }` with a path tracker of its own, where a variant
//! without fields refuses any key. An error keeps its path inside the value as an
//! ``at `path`: `` prefix of its message, which [`join_at`] merges into the path of the outer
//! reader; the messages read well without that step too (`at `eps`: unknown field ...`).
//!
//! ```
//! use rl_core::de::{internally_tagged, join_at};
//! use serde::{Deserialize, Deserializer};
//!
//! #[derive(Debug, PartialEq)]
//! enum Shape { Dot, Circle { r: f64 } }
//!
//! #[derive(Deserialize)]
//! #[serde(remote = "Shape", rename_all = "snake_case", deny_unknown_fields)]
//! enum ShapeDe { Dot, Circle { r: f64 } }
//!
//! #[derive(Deserialize)]
//! struct ShapeTagged(#[serde(with = "ShapeDe")] Shape);
//!
//! impl<'de> Deserialize<'de> for Shape {
//!     fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
//!         internally_tagged::<D, ShapeTagged>(d, "kind", &["dot", "circle"]).map(|s| s.0)
//!     }
//! }
//!
//! let ok: Shape = serde_json::from_str(r#"{"kind": "circle", "r": 2.0}"#)?;
//! assert_eq!(ok, Shape::Circle { r: 2.0 });
//! let stray = serde_json::from_str::<Shape>(r#"{"kind": "dot", "r": 2.0}"#).unwrap_err();
//! assert_eq!(join_at("shape", &stray.to_string()).0, "shape.r");
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::de::value::{MapDeserializer, SeqDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, Unexpected, VariantAccess,
    Visitor,
};
use serde::forward_to_deserialize_any;
use std::fmt;
use std::marker::PhantomData;

/// A buffered value of a self-describing format (TOML, JSON), floats kept exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    I64(i64),
    /// An unsigned integer (JSON integers above `i64::MAX`).
    U64(u64),
    /// A float, NaN and infinities included.
    F64(f64),
    /// A string.
    Str(String),
    /// Unit or null (JSON `null`, an absent option).
    Unit,
    /// An array.
    Seq(Vec<Raw>),
    /// A table, in the order of the input.
    Map(Vec<(String, Raw)>),
}

impl Raw {
    /// The value as serde's description of an unexpected input (for `invalid_type` errors).
    pub fn unexpected(&self) -> Unexpected<'_> {
        match self {
            Raw::Bool(b) => Unexpected::Bool(*b),
            Raw::I64(i) => Unexpected::Signed(*i),
            Raw::U64(u) => Unexpected::Unsigned(*u),
            Raw::F64(f) => Unexpected::Float(*f),
            Raw::Str(s) => Unexpected::Str(s),
            Raw::Unit => Unexpected::Unit,
            Raw::Seq(_) => Unexpected::Seq,
            Raw::Map(_) => Unexpected::Map,
        }
    }
}

impl<'de> de::Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::F64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Unit)
    }
    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Unit)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        d.deserialize_any(RawVisitor)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(Raw::Seq(v))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut v = Vec::new();
        while let Some(entry) = map.next_entry::<String, Raw>()? {
            v.push(entry);
        }
        Ok(Raw::Map(v))
    }
}

/// A [`Raw`] as a deserializer with the error type `E` of the enclosing format. An enum is
/// read externally tagged: a string (a variant without fields) or a table with one key.
#[derive(Debug)]
pub struct RawDeserializer<E> {
    raw: Raw,
    err: PhantomData<E>,
}

impl<E> RawDeserializer<E> {
    /// A deserializer of `raw`.
    pub fn new(raw: Raw) -> Self {
        Self { raw, err: PhantomData }
    }
}

impl<E: de::Error> IntoDeserializer<'_, E> for Raw {
    type Deserializer = RawDeserializer<E>;
    fn into_deserializer(self) -> RawDeserializer<E> {
        RawDeserializer::new(self)
    }
}

impl<'de, E: de::Error> Deserializer<'de> for RawDeserializer<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.raw {
            Raw::Bool(b) => visitor.visit_bool(b),
            Raw::I64(i) => visitor.visit_i64(i),
            Raw::U64(u) => visitor.visit_u64(u),
            Raw::F64(f) => visitor.visit_f64(f),
            Raw::Str(s) => visitor.visit_string(s),
            Raw::Unit => visitor.visit_unit(),
            Raw::Seq(v) => {
                let mut seq = SeqDeserializer::new(v.into_iter());
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Raw::Map(v) => {
                let mut map = MapDeserializer::new(v.into_iter());
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        match self.raw {
            Raw::Unit => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, E> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.raw {
            Raw::Str(s) => visitor.visit_enum(IntoDeserializer::<E>::into_deserializer(s)),
            Raw::Map(mut v) if v.len() == 1 => {
                let (variant, value) = v.remove(0);
                visitor.visit_enum(RawEnum { variant, value, err: PhantomData })
            }
            other => Err(E::invalid_type(other.unexpected(), &"a variant name or a table with one key")),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// An externally tagged enum value: `{ variant = value }`.
struct RawEnum<E> {
    variant: String,
    value: Raw,
    err: PhantomData<E>,
}

impl<'de, E: de::Error> EnumAccess<'de> for RawEnum<E> {
    type Error = E;
    type Variant = RawVariant<E>;
    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, RawVariant<E>), E> {
        let v = seed.deserialize(StringDeserializer::<E>::new(self.variant))?;
        Ok((v, RawVariant { value: self.value, err: PhantomData }))
    }
}

struct RawVariant<E> {
    value: Raw,
    err: PhantomData<E>,
}

impl<'de, E: de::Error> VariantAccess<'de> for RawVariant<E> {
    type Error = E;

    /// A variant without fields accepts no key (serde's internally tagged enums drop them).
    fn unit_variant(self) -> Result<(), E> {
        match self.value {
            Raw::Unit => Ok(()),
            Raw::Map(m) => match m.first() {
                None => Ok(()),
                Some((key, _)) => Err(at(key, format!("unknown field `{key}`: this kind takes no fields"))),
            },
            other => Err(E::invalid_type(other.unexpected(), &"a variant without fields")),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, E> {
        seed.deserialize(RawDeserializer::new(self.value))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, E> {
        RawDeserializer::<E>::new(self.value).deserialize_seq(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> Result<V::Value, E> {
        RawDeserializer::<E>::new(self.value).deserialize_map(visitor)
    }
}

/// An error at `path` (relative to the value being read): the message `at `path`: message`.
pub fn at<E: de::Error>(path: &str, message: impl fmt::Display) -> E {
    E::custom(format_args!("at `{path}`: {message}"))
}

/// The dotted form of a tracked path (`a.b[2].c`), without its first `skip` segments.
pub fn dotted(path: &serde_path_to_error::Path, skip: usize) -> String {
    let mut out = String::new();
    for seg in path.iter().skip(skip) {
        let key = match seg {
            serde_path_to_error::Segment::Seq { index } => {
                out.push_str(&format!("[{index}]"));
                continue;
            }
            serde_path_to_error::Segment::Map { key } | serde_path_to_error::Segment::Enum { variant: key } => {
                key.as_str()
            }
            serde_path_to_error::Segment::Unknown => "?",
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    }
    out
}

/// `prefix` extended by the paths of every leading ``at `…`: `` of `message`, and the rest of
/// the message: `join_at("loss", "at `policy.eps`: bad")` is `("loss.policy.eps", "bad")`.
pub fn join_at(prefix: &str, message: &str) -> (String, String) {
    let mut path = prefix.to_owned();
    let mut rest = message;
    while let Some((inner, tail)) = rest.strip_prefix("at `").and_then(|r| r.split_once("`: ")) {
        if !inner.is_empty() {
            if !path.is_empty() && !inner.starts_with('[') {
                path.push('.');
            }
            path.push_str(inner);
        }
        rest = tail;
    }
    (path, rest.to_owned())
}

/// Deserialises `raw` as a `T` with a path tracker, skipping the first `skip` segments of
/// the path an error is reported at (an error at an empty path keeps its message as is).
///
/// # Errors
/// Whatever `T`'s deserializer rejects, as `E`, with its path prefixed (see [`at`]).
pub fn nested<T: DeserializeOwned, E: de::Error>(raw: Raw, skip: usize) -> Result<T, E> {
    serde_path_to_error::deserialize(RawDeserializer::<E>::new(raw)).map_err(|e| {
        let path = dotted(e.path(), skip);
        let (path, msg) = join_at(&path, e.into_inner().to_string().trim_end());
        if path.is_empty() {
            E::custom(msg)
        } else {
            at(&path, msg)
        }
    })
}

/// Reads an internally tagged enum (`tag` next to the variant's fields) through `T`, its
/// externally tagged twin: the tag must be one of `kinds` (else an error at `tag`), and every
/// other key goes to the variant, which refuses any key it does not have.
///
/// # Errors
/// A value that is not a table, a missing or unknown tag, and whatever `T` rejects, each at
/// its path.
pub fn internally_tagged<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
    tag: &str,
    kinds: &[&str],
) -> Result<T, D::Error> {
    use serde::de::{Deserialize, Error};
    let raw = Raw::deserialize(d)?;
    let Raw::Map(entries) = raw else {
        return Err(D::Error::invalid_type(raw.unexpected(), &format!("a table with `{tag}` and its fields").as_str()));
    };
    let mut kind = None;
    let mut rest = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        if k == tag {
            kind = Some(v);
        } else {
            rest.push((k, v));
        }
    }
    let list = kinds.join(", ");
    let kind = match kind {
        Some(Raw::Str(s)) => s,
        Some(other) => return Err(at(tag, format!("invalid type: {}, expected one of {list}", other.unexpected()))),
        None => return Err(at(tag, format!("missing field `{tag}` (one of {list})"))),
    };
    if !kinds.contains(&kind.as_str()) {
        return Err(at(tag, format!("unknown variant `{kind}`, expected one of {list}")));
    }
    nested(Raw::Map(vec![(kind, Raw::Map(rest))]), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_at_merges_nested_paths() {
        assert_eq!(join_at("a", "at `b.c`: at `[2]`: at `d`: bad"), ("a.b.c[2].d".into(), "bad".into()));
        assert_eq!(join_at("", "at `x`: bad"), ("x".into(), "bad".into()));
        assert_eq!(join_at("a", "plain"), ("a".into(), "plain".into()));
    }

    #[test]
    fn raw_round_trips_every_json_value() {
        let v: serde_json::Value = serde_json::json!({"a": [1, -2, 3.5, "s", true, null], "b": {"c": u64::MAX}});
        let raw: Raw = serde_json::from_value(v.clone()).unwrap_or(Raw::Unit);
        let back: serde_json::Value = nested::<_, serde_json::Error>(raw, 0).unwrap_or_default();
        assert_eq!(back, v);
    }
}
