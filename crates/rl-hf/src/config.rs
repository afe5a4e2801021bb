//! `config.json` of a Hugging Face decoder checkpoint, read strictly.
//!
//! Both layouts transformers writes are read: v4 (`rope_theta` and `rope_scaling` at the top
//! level, `torch_dtype`) and v5 (`rope_parameters: {rope_type, rope_theta, ...}`, `dtype`).
//! Every key of the file is either understood, checked to have a value that does not change the
//! model (`use_sliding_window: false`, `attention_dropout: 0`, ...), or refused with
//! [`HfError::UnsupportedField`]: nothing is silently ignored.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{HfError, Result};

/// File name of the config in a model directory.
pub const CONFIG_FILE: &str = "config.json";

/// The model families (`model_type`) this crate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `qwen2` (Qwen2, Qwen2.5): biases on q/k/v, none on o_proj.
    Qwen2,
    /// `qwen3`: per-head RMSNorm on q and k, explicit `head_dim`, `attention_bias` on q/k/v/o.
    Qwen3,
    /// `llama` (Llama 3.x): `attention_bias` on q/k/v/o, `mlp_bias` on the MLP.
    Llama,
}

impl Family {
    /// The `model_type` string of the family.
    #[must_use]
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Llama => "llama",
        }
    }

    /// The transformers class name (`architectures[0]`) written by `save_pretrained`.
    #[must_use]
    pub fn architecture(self) -> &'static str {
        match self {
            Family::Qwen2 => "Qwen2ForCausalLM",
            Family::Qwen3 => "Qwen3ForCausalLM",
            Family::Llama => "LlamaForCausalLM",
        }
    }
}

/// The rotary embedding variant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rope {
    /// Plain RoPE: `inv_freq[i] = theta^(-2i / head_dim)`.
    Default,
    /// Llama 3.1 frequency scaling (`rope_type: "llama3"`).
    Llama3 {
        /// `factor`: low frequencies are divided by it.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original_max_position_embeddings: f64,
    },
}

/// A parsed and checked `config.json`.
///
/// Fields are plain values; build one with [`HfConfig::from_file`] or
/// [`HfConfig::from_json_str`] (which check everything) and write one with
/// [`HfConfig::to_json`] (v5 layout).
#[derive(Debug, Clone, PartialEq)]
pub struct HfConfig {
    /// The family (`model_type`).
    pub family: Family,
    /// `vocab_size`.
    pub vocab_size: i64,
    /// `hidden_size`.
    pub hidden_size: i64,
    /// `intermediate_size` (SwiGLU width).
    pub intermediate_size: i64,
    /// `num_hidden_layers`.
    pub num_hidden_layers: i64,
    /// `num_attention_heads`.
    pub num_attention_heads: i64,
    /// `num_key_value_heads` (GQA; defaults to `num_attention_heads`).
    pub num_key_value_heads: i64,
    /// `head_dim` (defaults to `hidden_size / num_attention_heads`).
    pub head_dim: i64,
    /// `max_position_embeddings` (kept for the round trip; RoPE is computed for any position).
    pub max_position_embeddings: i64,
    /// `rms_norm_eps`.
    pub rms_norm_eps: f64,
    /// `rope_theta` (v4 top level, v5 `rope_parameters.rope_theta`).
    pub rope_theta: f64,
    /// The rotary variant.
    pub rope: Rope,
    /// `tie_word_embeddings`: the LM head is the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Biases on q/k/v projections (always for Qwen2, `attention_bias` otherwise).
    pub qkv_bias: bool,
    /// Bias on o_proj (`attention_bias` for Qwen3 and Llama, never for Qwen2).
    pub o_bias: bool,
    /// Biases on the MLP projections (`mlp_bias`, Llama only).
    pub mlp_bias: bool,
    /// Per-head RMSNorm on q and k (Qwen3).
    pub qk_norm: bool,
    /// `bos_token_id`.
    pub bos_token_id: Option<i64>,
    /// `eos_token_id` (one id or a list).
    pub eos_token_id: Vec<i64>,
    /// `pad_token_id`.
    pub pad_token_id: Option<i64>,
    /// The stored dtype named by `dtype` (v5) or `torch_dtype` (v4), if any.
    pub dtype: Option<String>,
}

/// Keys that only describe the file or runtime options and do not change the model.
const INERT: &[&str] = &[
    "_name_or_path",
    "architectures",
    "transformers_version",
    "initializer_range",
    "use_cache",
    "return_dict",
    "output_attentions",
    "output_hidden_states",
    "torchscript",
    "use_bfloat16",
    "tokenizer_class",
    "max_window_layers",
];

/// Keys of mixture-of-experts variants (qwen2_moe, qwen3_moe style fields on a dense type).
const MOE: &[&str] = &[
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "norm_topk_prob",
    "output_router_logits",
    "router_aux_loss_coef",
    "num_local_experts",
];

struct Reader {
    path: String,
    map: Map<String, Value>,
}

impl Reader {
    fn unsupported(&self, field: &str, value: &Value, reason: &str) -> HfError {
        HfError::UnsupportedField {
            path: self.path.clone(),
            field: field.to_owned(),
            value: value.to_string(),
            reason: reason.to_owned(),
        }
    }

    fn invalid(&self, field: &str, value: &Value, reason: &str) -> HfError {
        HfError::InvalidField {
            path: self.path.clone(),
            field: field.to_owned(),
            value: value.to_string(),
            reason: reason.to_owned(),
        }
    }

    /// Removes `key`; JSON `null` counts as absent.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    fn int_value(&self, field: &str, v: &Value) -> Result<i64> {
        v.as_i64().ok_or_else(|| self.invalid(field, v, "expected an integer"))
    }

    fn pos_int(&mut self, key: &str, default: Option<i64>) -> Result<i64> {
        match self.take(key) {
            Some(v) => {
                let n = self.int_value(key, &v)?;
                if n < 1 {
                    return Err(self.invalid(key, &v, "must be >= 1"));
                }
                Ok(n)
            }
            None => default.ok_or_else(|| HfError::MissingField { path: self.path.clone(), field: key.to_owned() }),
        }
    }

    fn pos_float(&mut self, key: &str, default: f64) -> Result<f64> {
        match self.take(key) {
            Some(v) => {
                let x = v.as_f64().ok_or_else(|| self.invalid(key, &v, "expected a number"))?;
                if !(x.is_finite() && x > 0.0) {
                    return Err(self.invalid(key, &v, "must be finite and > 0"));
                }
                Ok(x)
            }
            None => Ok(default),
        }
    }

    fn boolean(&mut self, key: &str, default: bool) -> Result<bool> {
        match self.take(key) {
            Some(v) => v.as_bool().ok_or_else(|| self.invalid(key, &v, "expected true or false")),
            None => Ok(default),
        }
    }

    fn opt_id(&mut self, key: &str) -> Result<Option<i64>> {
        match self.take(key) {
            Some(v) => {
                let n = self.int_value(key, &v)?;
                if n < 0 {
                    return Err(self.invalid(key, &v, "must be >= 0"));
                }
                Ok(Some(n))
            }
            None => Ok(None),
        }
    }

    fn ids(&mut self, key: &str) -> Result<Vec<i64>> {
        match self.take(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => {
                let v = Value::Array(items.clone());
                items
                    .iter()
                    .map(|x| match x.as_i64() {
                        Some(n) if n >= 0 => Ok(n),
                        _ => Err(self.invalid(key, &v, "expected non-negative integer ids")),
                    })
                    .collect()
            }
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => Ok(vec![n]),
                _ => Err(self.invalid(key, &v, "expected a non-negative integer id or a list of them")),
            },
        }
    }
}

fn num(path: &str, obj: &Map<String, Value>, prefix: &str, key: &str) -> Result<f64> {
    let field = format!("{prefix}.{key}");
    let v = obj.get(key).ok_or_else(|| HfError::MissingField { path: path.to_owned(), field: field.clone() })?;
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(HfError::InvalidField {
            path: path.to_owned(),
            field,
            value: v.to_string(),
            reason: "expected a finite number > 0".into(),
        }),
    }
}

/// Reads a rope object (v5 `rope_parameters` or v4 `rope_scaling`); returns the variant and the
/// `rope_theta` it carries (v5 only).
fn parse_rope(path: &str, prefix: &str, v: &Value) -> Result<(Rope, Option<f64>)> {
    let obj = v.as_object().ok_or_else(|| HfError::InvalidField {
        path: path.to_owned(),
        field: prefix.to_owned(),
        value: v.to_string(),
        reason: "expected an object".into(),
    })?;
    let unsupported = |key: &str, val: &Value, reason: &str| HfError::UnsupportedField {
        path: path.to_owned(),
        field: format!("{prefix}.{key}"),
        value: val.to_string(),
        reason: reason.to_owned(),
    };
    // `type` is the pre-4.45 spelling of `rope_type`.
    let ty_key = if obj.contains_key("rope_type") { "rope_type" } else { "type" };
    let ty = match obj.get(ty_key) {
        None => "default".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(unsupported(ty_key, other, "expected a string")),
    };
    let theta = match obj.get("rope_theta") {
        None => None,
        Some(_) => Some(num(path, obj, prefix, "rope_theta")?),
    };
    let allowed: &[&str] = match ty.as_str() {
        "default" => &["rope_type", "type", "rope_theta", "partial_rotary_factor"],
        "llama3" => &[
            "rope_type",
            "type",
            "rope_theta",
            "partial_rotary_factor",
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        ],
        _ => {
            let val = Value::String(ty.clone());
            return Err(unsupported(ty_key, &val, "only `default` and `llama3` rotary embeddings are implemented"));
        }
    };
    for (k, val) in obj {
        if !allowed.contains(&k.as_str()) {
            return Err(unsupported(k, val, "not a field of this rope_type"));
        }
    }
    if let Some(p) = obj.get("partial_rotary_factor") {
        if p.as_f64() != Some(1.0) {
            return Err(unsupported("partial_rotary_factor", p, "partial rotary embeddings are not implemented"));
        }
    }
    let rope = if ty == "llama3" {
        let factor = num(path, obj, prefix, "factor")?;
        let low = num(path, obj, prefix, "low_freq_factor")?;
        let high = num(path, obj, prefix, "high_freq_factor")?;
        let orig = num(path, obj, prefix, "original_max_position_embeddings")?;
        if high <= low {
            return Err(HfError::InvalidField {
                path: path.to_owned(),
                field: format!("{prefix}.high_freq_factor"),
                value: high.to_string(),
                reason: format!("must be > low_freq_factor ({low})"),
            });
        }
        Rope::Llama3 { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: orig }
    } else {
        Rope::Default
    };
    Ok((rope, theta))
}

impl HfConfig {
    /// Reads and checks `path` (a `config.json`).
    ///
    /// # Errors
    /// [`HfError::MissingFile`], [`HfError::Corrupt`] (not JSON), and everything
    /// [`from_json_str`](Self::from_json_str) returns.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(HfError::MissingFile { path: shown }),
            Err(e) => return Err(e.into()),
        };
        Self::parse(&text, &shown)
    }

    /// Parses and checks a `config.json` text; `path` is only used in errors.
    ///
    /// ```
    /// let cfg = rl_hf::HfConfig::from_json_str(r#"{"model_type": "qwen2", "vocab_size": 64,
    ///     "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
    ///     "num_attention_heads": 2, "num_key_value_heads": 1,
    ///     "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}"#, "config.json")?;
    /// assert_eq!(cfg.head_dim, 8);
    /// assert!(cfg.qkv_bias && !cfg.o_bias);
    /// // Sliding-window attention is refused, naming the field.
    /// let err = rl_hf::HfConfig::from_json_str(r#"{"model_type": "qwen2", "vocab_size": 64,
    ///     "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
    ///     "num_attention_heads": 2, "use_sliding_window": true}"#, "config.json").unwrap_err();
    /// assert!(err.to_string().contains("use_sliding_window"));
    /// # Ok::<(), rl_hf::HfError>(())
    /// ```
    ///
    /// # Errors
    /// [`HfError::Corrupt`] (not a JSON object), [`HfError::UnknownModelType`],
    /// [`HfError::MissingField`], [`HfError::InvalidField`], [`HfError::UnsupportedField`].
    pub fn from_json_str(text: &str, path: &str) -> Result<Self> {
        Self::parse(text, path)
    }

    fn parse(text: &str, path: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| HfError::Corrupt { path: path.to_owned(), reason: format!("not valid JSON: {e}") })?;
        let Value::Object(map) = value else {
            return Err(HfError::Corrupt { path: path.to_owned(), reason: "not a JSON object".into() });
        };
        let mut r = Reader { path: path.to_owned(), map };
        let family = match r.take("model_type") {
            None => return Err(HfError::MissingField { path: path.to_owned(), field: "model_type".into() }),
            Some(Value::String(s)) => match s.as_str() {
                "qwen2" => Family::Qwen2,
                "qwen3" => Family::Qwen3,
                "llama" => Family::Llama,
                _ => return Err(HfError::UnknownModelType { path: path.to_owned(), model_type: s }),
            },
            Some(other) => {
                return Err(HfError::UnknownModelType { path: path.to_owned(), model_type: other.to_string() })
            }
        };
        let vocab_size = r.pos_int("vocab_size", None)?;
        let hidden_size = r.pos_int("hidden_size", None)?;
        let intermediate_size = r.pos_int("intermediate_size", None)?;
        let num_hidden_layers = r.pos_int("num_hidden_layers", None)?;
        let num_attention_heads = r.pos_int("num_attention_heads", None)?;
        let num_key_value_heads = r.pos_int("num_key_value_heads", Some(num_attention_heads))?;
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(r.invalid(
                "num_key_value_heads",
                &Value::from(num_key_value_heads),
                &format!("must divide num_attention_heads ({num_attention_heads})"),
            ));
        }
        let head_dim = match r.take("head_dim") {
            Some(v) => {
                let n = r.int_value("head_dim", &v)?;
                if n < 2 || n % 2 != 0 {
                    return Err(r.invalid("head_dim", &v, "must be even and >= 2 (rotary pairs)"));
                }
                n
            }
            None => {
                if hidden_size % num_attention_heads != 0 {
                    return Err(r.invalid(
                        "hidden_size",
                        &Value::from(hidden_size),
                        "must be a multiple of num_attention_heads when head_dim is absent",
                    ));
                }
                let d = hidden_size / num_attention_heads;
                if d % 2 != 0 {
                    return Err(r.invalid("hidden_size", &Value::from(hidden_size), "head_dim must be even"));
                }
                d
            }
        };
        let default_max = if family == Family::Llama { 2048 } else { 32768 };
        let max_position_embeddings = r.pos_int("max_position_embeddings", Some(default_max))?;
        let rms_norm_eps = r.pos_float("rms_norm_eps", 1e-6)?;
        let tie_word_embeddings = r.boolean("tie_word_embeddings", false)?;

        // Activation: SwiGLU with SiLU only.
        if let Some(v) = r.take("hidden_act") {
            if v.as_str() != Some("silu") {
                return Err(r.unsupported("hidden_act", &v, "only `silu` (SwiGLU) is implemented"));
            }
        }
        // Dropout would make the forward random.
        if let Some(v) = r.take("attention_dropout") {
            if v.as_f64() != Some(0.0) {
                return Err(r.unsupported("attention_dropout", &v, "dropout is not implemented (must be 0)"));
            }
        }
        // Sliding-window attention.
        let sliding = r.boolean("use_sliding_window", false)?;
        if sliding {
            return Err(r.unsupported(
                "use_sliding_window",
                &Value::Bool(true),
                "sliding-window attention is not implemented",
            ));
        }
        if let Some(v) = r.take("sliding_window") {
            // Qwen configs carry a window size that only applies with use_sliding_window.
            if family == Family::Llama {
                return Err(r.unsupported("sliding_window", &v, "sliding-window attention is not implemented"));
            }
        }
        if let Some(v) = r.take("layer_types") {
            let all_full = v.as_array().is_some_and(|a| a.iter().all(|x| x.as_str() == Some("full_attention")));
            let right_len = v.as_array().is_some_and(|a| a.len() as i64 == num_hidden_layers);
            if !all_full {
                return Err(r.unsupported("layer_types", &v, "only `full_attention` layers are implemented"));
            }
            if !right_len {
                return Err(r.invalid("layer_types", &v, "needs one entry per layer"));
            }
        }
        if let Some(v) = r.take("pretraining_tp") {
            // Only splits the matmuls in transformers; the result is the same model.
            if family != Family::Llama || v.as_i64().is_none_or(|n| n < 1) {
                return Err(r.unsupported("pretraining_tp", &v, "only an integer >= 1 on llama"));
            }
        }
        // Biases.
        let (qkv_bias, o_bias, mlp_bias, qk_norm) = match family {
            Family::Qwen2 => (true, false, false, false),
            Family::Qwen3 => {
                let b = r.boolean("attention_bias", false)?;
                (b, b, false, true)
            }
            Family::Llama => {
                let b = r.boolean("attention_bias", false)?;
                let m = r.boolean("mlp_bias", false)?;
                (b, b, m, false)
            }
        };
        // Rotary embeddings: v5 `rope_parameters`, or v4 `rope_theta` + `rope_scaling`.
        let rope_parameters = r.take("rope_parameters");
        let top_theta = match r.take("rope_theta") {
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x > 0.0 => Some(x),
                _ => return Err(r.invalid("rope_theta", &v, "must be finite and > 0")),
            },
            None => None,
        };
        let rope_scaling = r.take("rope_scaling");
        let (rope, rope_theta) = match (rope_parameters, rope_scaling) {
            (Some(_), Some(s)) => {
                return Err(r.unsupported(
                    "rope_scaling",
                    &s,
                    "both rope_parameters (v5) and rope_scaling (v4) are set",
                ))
            }
            (Some(p), None) => {
                let (rope, theta) = parse_rope(path, "rope_parameters", &p)?;
                let theta = match (theta, top_theta) {
                    (Some(a), Some(b)) if a != b => {
                        return Err(r.invalid(
                            "rope_theta",
                            &Value::from(b),
                            &format!("differs from rope_parameters.rope_theta ({a})"),
                        ))
                    }
                    (Some(a), _) => a,
                    (None, Some(b)) => b,
                    (None, None) => 10000.0,
                };
                (rope, theta)
            }
            (None, Some(s)) => {
                let (rope, theta) = parse_rope(path, "rope_scaling", &s)?;
                (rope, theta.or(top_theta).unwrap_or(10000.0))
            }
            (None, None) => (Rope::Default, top_theta.unwrap_or(10000.0)),
        };
        let bos_token_id = r.opt_id("bos_token_id")?;
        let eos_token_id = r.ids("eos_token_id")?;
        let pad_token_id = r.opt_id("pad_token_id")?;
        let dtype = match (r.take("dtype"), r.take("torch_dtype")) {
            (Some(v), _) | (None, Some(v)) => match v.as_str() {
                Some(s @ ("float32" | "bfloat16" | "float16")) => Some(s.to_owned()),
                _ => return Err(r.unsupported("dtype", &v, "stored dtype must be float32, bfloat16 or float16")),
            },
            (None, None) => None,
        };
        for key in INERT {
            r.map.remove(*key);
        }
        if let Some((k, v)) = r.map.iter().next() {
            let reason = if MOE.contains(&k.as_str()) {
                "mixture-of-experts is not implemented"
            } else if k == "quantization_config" {
                "quantised checkpoints are not implemented"
            } else {
                "not a field rl-hf knows for this model_type; refused rather than ignored"
            };
            return Err(r.unsupported(k, v, reason));
        }
        for (name, id) in [("bos_token_id", bos_token_id), ("pad_token_id", pad_token_id)] {
            if let Some(id) = id.filter(|&i| i >= vocab_size) {
                return Err(r.invalid(name, &Value::from(id), &format!("outside the vocabulary [0, {vocab_size})")));
            }
        }
        Ok(Self {
            family,
            vocab_size,
            hidden_size,
            intermediate_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            max_position_embeddings,
            rms_norm_eps,
            rope_theta,
            rope,
            tie_word_embeddings,
            qkv_bias,
            o_bias,
            mlp_bias,
            qk_norm,
            bos_token_id,
            eos_token_id,
            pad_token_id,
            dtype,
        })
    }

    /// The config as transformers v5 writes it (`rope_parameters`, `dtype`), with `dtype`
    /// set to `stored` (the dtype of the weights written next to it).
    #[must_use]
    pub fn to_json(&self, stored: &str) -> Value {
        let mut m = Map::new();
        let fam = self.family;
        m.insert("architectures".into(), Value::from(vec![fam.architecture()]));
        m.insert("model_type".into(), Value::from(fam.model_type()));
        m.insert("vocab_size".into(), Value::from(self.vocab_size));
        m.insert("hidden_size".into(), Value::from(self.hidden_size));
        m.insert("intermediate_size".into(), Value::from(self.intermediate_size));
        m.insert("num_hidden_layers".into(), Value::from(self.num_hidden_layers));
        m.insert("num_attention_heads".into(), Value::from(self.num_attention_heads));
        m.insert("num_key_value_heads".into(), Value::from(self.num_key_value_heads));
        m.insert("head_dim".into(), Value::from(self.head_dim));
        m.insert("max_position_embeddings".into(), Value::from(self.max_position_embeddings));
        m.insert("rms_norm_eps".into(), Value::from(self.rms_norm_eps));
        m.insert("hidden_act".into(), Value::from("silu"));
        m.insert("tie_word_embeddings".into(), Value::from(self.tie_word_embeddings));
        m.insert("use_sliding_window".into(), Value::from(false));
        if fam != Family::Qwen2 {
            m.insert("attention_bias".into(), Value::from(self.qkv_bias));
        }
        if fam == Family::Llama {
            m.insert("mlp_bias".into(), Value::from(self.mlp_bias));
            m.remove("use_sliding_window");
        }
        let mut rope = Map::new();
        rope.insert("rope_theta".into(), Value::from(self.rope_theta));
        match self.rope {
            Rope::Default => {
                rope.insert("rope_type".into(), Value::from("default"));
            }
            Rope::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                rope.insert("rope_type".into(), Value::from("llama3"));
                rope.insert("factor".into(), Value::from(factor));
                rope.insert("low_freq_factor".into(), Value::from(low_freq_factor));
                rope.insert("high_freq_factor".into(), Value::from(high_freq_factor));
                // transformers checks this one is an integer.
                let orig = if original_max_position_embeddings.fract() == 0.0 {
                    Value::from(original_max_position_embeddings as i64)
                } else {
                    Value::from(original_max_position_embeddings)
                };
                rope.insert("original_max_position_embeddings".into(), orig);
            }
        }
        m.insert("rope_parameters".into(), Value::Object(rope));
        m.insert("bos_token_id".into(), self.bos_token_id.map_or(Value::Null, Value::from));
        m.insert(
            "eos_token_id".into(),
            match self.eos_token_id.as_slice() {
                [] => Value::Null,
                [one] => Value::from(*one),
                many => Value::from(many.to_vec()),
            },
        );
        m.insert("pad_token_id".into(), self.pad_token_id.map_or(Value::Null, Value::from));
        m.insert("dtype".into(), Value::from(stored));
        Value::Object(m)
    }

    /// `(name, shape)` of every tensor the checkpoint must hold, in transformers' names.
    #[must_use]
    pub fn expected_tensors(&self) -> Vec<(String, Vec<i64>)> {
        let (h, i, v, d) = (self.hidden_size, self.intermediate_size, self.vocab_size, self.head_dim);
        let (nq, nkv) = (self.num_attention_heads * d, self.num_key_value_heads * d);
        let mut out =
            vec![("model.embed_tokens.weight".to_owned(), vec![v, h]), ("model.norm.weight".to_owned(), vec![h])];
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".to_owned(), vec![v, h]));
        }
        for l in 0..self.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let mut add = |n: &str, s: Vec<i64>| out.push((format!("{p}.{n}"), s));
            add("input_layernorm.weight", vec![h]);
            add("post_attention_layernorm.weight", vec![h]);
            add("self_attn.q_proj.weight", vec![nq, h]);
            add("self_attn.k_proj.weight", vec![nkv, h]);
            add("self_attn.v_proj.weight", vec![nkv, h]);
            add("self_attn.o_proj.weight", vec![h, nq]);
            if self.qkv_bias {
                add("self_attn.q_proj.bias", vec![nq]);
                add("self_attn.k_proj.bias", vec![nkv]);
                add("self_attn.v_proj.bias", vec![nkv]);
            }
            if self.o_bias {
                add("self_attn.o_proj.bias", vec![h]);
            }
            if self.qk_norm {
                add("self_attn.q_norm.weight", vec![d]);
                add("self_attn.k_norm.weight", vec![d]);
            }
            add("mlp.gate_proj.weight", vec![i, h]);
            add("mlp.up_proj.weight", vec![i, h]);
            add("mlp.down_proj.weight", vec![h, i]);
            if self.mlp_bias {
                add("mlp.gate_proj.bias", vec![i]);
                add("mlp.up_proj.bias", vec![i]);
                add("mlp.down_proj.bias", vec![h]);
            }
        }
        out
    }

    /// Number of parameters (tied embeddings counted once).
    #[must_use]
    pub fn num_parameters(&self) -> i64 {
        self.expected_tensors().iter().map(|(_, s)| s.iter().product::<i64>()).sum()
    }
}
