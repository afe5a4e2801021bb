//! LoRA adapters (Hu et al. 2021, arXiv 2106.09685) on the projections of an [`HfModel`](crate::HfModel), read
//! from and written to the layout of Hugging Face PEFT (`adapter_config.json` +
//! `adapter_model.safetensors`), so adapters trained here load in PEFT and the other way round.
//!
//! A targeted projection computes `y = x Wᵀ + b + s · (x Aᵀ) Bᵀ` with `A` `[r, in]`, `B`
//! `[out, r]` and `s = lora_alpha / r` (`lora_alpha / √r` with rsLoRA), as PEFT's `Linear`
//! does; the base weights are frozen while an adapter is attached, so an optimiser over
//! [`HfModel::trainable_var_store`](crate::HfModel::trainable_var_store) trains `A` and `B` only. The adapter matrices are held in
//! f32 whatever the base dtype (PEFT's default `autocast_adapter_dtype`): with bf16/f16 weights
//! the input is cast to f32 for the adapter path and the sum back to the model dtype.
//!
//! Checked against PEFT 0.21.2 on tiny random models (`tests/lora.rs`, fixtures from
//! `scripts/hf_lora_fixture.py`): logits, merged logits and the gradients of every adapter
//! matrix.

use std::collections::BTreeMap;
use std::path::Path;

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tch::{nn, Kind, Tensor};

use crate::error::{HfError, Result};

/// File name of an adapter's config (PEFT).
pub const ADAPTER_CONFIG_FILE: &str = "adapter_config.json";
/// File name of an adapter's weights (PEFT).
pub const ADAPTER_WEIGHTS_FILE: &str = "adapter_model.safetensors";
/// The prefix PEFT gives every adapter tensor name of a causal LM.
const PEFT_PREFIX: &str = "base_model.model.";

/// A projection an adapter can target, by the module name PEFT's `target_modules` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoraTarget {
    /// `self_attn.q_proj`.
    QProj,
    /// `self_attn.k_proj`.
    KProj,
    /// `self_attn.v_proj`.
    VProj,
    /// `self_attn.o_proj`.
    OProj,
    /// `mlp.gate_proj`.
    GateProj,
    /// `mlp.up_proj`.
    UpProj,
    /// `mlp.down_proj`.
    DownProj,
}

impl LoraTarget {
    /// Every projection (what PEFT's `"all-linear"` selects in these families: every linear
    /// layer but the LM head).
    pub const ALL: [LoraTarget; 7] = [
        LoraTarget::QProj,
        LoraTarget::KProj,
        LoraTarget::VProj,
        LoraTarget::OProj,
        LoraTarget::GateProj,
        LoraTarget::UpProj,
        LoraTarget::DownProj,
    ];

    /// The module name (`q_proj`, ...).
    #[must_use]
    pub fn module(self) -> &'static str {
        match self {
            LoraTarget::QProj => "q_proj",
            LoraTarget::KProj => "k_proj",
            LoraTarget::VProj => "v_proj",
            LoraTarget::OProj => "o_proj",
            LoraTarget::GateProj => "gate_proj",
            LoraTarget::UpProj => "up_proj",
            LoraTarget::DownProj => "down_proj",
        }
    }

    /// The path inside a decoder layer (`self_attn.q_proj`, `mlp.gate_proj`, ...).
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            LoraTarget::QProj => "self_attn.q_proj",
            LoraTarget::KProj => "self_attn.k_proj",
            LoraTarget::VProj => "self_attn.v_proj",
            LoraTarget::OProj => "self_attn.o_proj",
            LoraTarget::GateProj => "mlp.gate_proj",
            LoraTarget::UpProj => "mlp.up_proj",
            LoraTarget::DownProj => "mlp.down_proj",
        }
    }

    /// The target of a module name, if it is one.
    #[must_use]
    pub fn from_module(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.module() == name)
    }
}

/// An adapter's shape and scaling: what [`HfModel::add_lora`](crate::HfModel::add_lora) creates and PEFT's
/// `LoraConfig` records.
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `r` | 8 | rank of `A` `[r, in]` and `B` `[out, r]` | ≥ 1 |
/// | `alpha` | 16 | `lora_alpha`: the update is scaled by `alpha / r` | finite, > 0 |
/// | `targets` | `q_proj`, `v_proj` | projections that get an adapter (PEFT's default for Qwen2/Llama) | non-empty, no repeats |
/// | `rslora` | false | rank-stabilised scaling `alpha / √r` (Kalajdzievski 2023) | |
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoraParams {
    /// Rank.
    pub r: i64,
    /// `lora_alpha`.
    pub alpha: f64,
    /// Targeted projections (every decoder layer).
    pub targets: Vec<LoraTarget>,
    /// rsLoRA scaling.
    pub rslora: bool,
}

impl Default for LoraParams {
    fn default() -> Self {
        Self { r: 8, alpha: 16.0, targets: vec![LoraTarget::QProj, LoraTarget::VProj], rslora: false }
    }
}

impl LoraParams {
    /// Sets `r`.
    #[must_use]
    pub fn r(mut self, r: i64) -> Self {
        self.r = r;
        self
    }

    /// Sets `alpha`.
    #[must_use]
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Sets `targets`.
    #[must_use]
    pub fn targets(mut self, targets: impl Into<Vec<LoraTarget>>) -> Self {
        self.targets = targets.into();
        self
    }

    /// Sets `rslora`.
    #[must_use]
    pub fn rslora(mut self, on: bool) -> Self {
        self.rslora = on;
        self
    }

    /// The factor the adapter's output is multiplied by: `alpha / r`, or `alpha / √r` with
    /// rsLoRA.
    #[must_use]
    pub fn scale(&self) -> f64 {
        if self.rslora {
            self.alpha / (self.r as f64).sqrt()
        } else {
            self.alpha / self.r as f64
        }
    }

    /// Reads a PEFT `adapter_config.json`.
    ///
    /// Read strictly: `peft_type` must be `LORA`; `r`, `lora_alpha`, `target_modules` (module
    /// names such as `"q_proj"`, or `"all-linear"`) and `use_rslora` are used; a field that only
    /// describes where the adapter came from or how it was initialised
    /// (`base_model_name_or_path`, `init_lora_weights`, `peft_version`, ...) is read past; any
    /// other field must be off (`null`, `false`, `{}`, `[]`, `bias: "none"`,
    /// `lora_dropout: 0`), else it is an [`HfError::UnsupportedField`] naming it (DoRA,
    /// `rank_pattern`, `modules_to_save`, `layers_to_transform`, dropout, ...), never ignored.
    ///
    /// # Errors
    /// [`HfError::MissingFile`], [`HfError::Corrupt`] (not JSON, not an object),
    /// [`HfError::MissingField`], [`HfError::InvalidField`], [`HfError::UnsupportedField`].
    pub fn from_peft_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(HfError::MissingFile { path: shown }),
            Err(e) => return Err(e.into()),
        };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| HfError::Corrupt { path: shown.clone(), reason: format!("not valid JSON: {e}") })?;
        Self::from_peft_json(&v, &shown)
    }

    /// [`from_peft_file`](Self::from_peft_file) on parsed JSON; `path` names it in errors.
    ///
    /// # Errors
    /// As [`from_peft_file`](Self::from_peft_file).
    pub fn from_peft_json(v: &Value, path: &str) -> Result<Self> {
        let obj = v
            .as_object()
            .ok_or_else(|| HfError::Corrupt { path: path.to_owned(), reason: "not a JSON object".into() })?;
        let invalid = |field: &str, value: &Value, reason: &str| HfError::InvalidField {
            path: path.to_owned(),
            field: field.to_owned(),
            value: value.to_string(),
            reason: reason.to_owned(),
        };
        let unsupported = |field: &str, value: &Value, reason: &str| HfError::UnsupportedField {
            path: path.to_owned(),
            field: field.to_owned(),
            value: value.to_string(),
            reason: reason.to_owned(),
        };
        let need = |field: &str| -> Result<&Value> {
            obj.get(field).ok_or_else(|| HfError::MissingField { path: path.to_owned(), field: field.to_owned() })
        };
        let peft_type = need("peft_type")?;
        if peft_type.as_str() != Some("LORA") {
            return Err(unsupported("peft_type", peft_type, "only LORA adapters are implemented"));
        }
        let rv = need("r")?;
        let r = rv.as_i64().filter(|&r| r >= 1).ok_or_else(|| invalid("r", rv, "must be an integer >= 1"))?;
        let av = need("lora_alpha")?;
        let alpha = av
            .as_f64()
            .filter(|a| a.is_finite() && *a > 0.0)
            .ok_or_else(|| invalid("lora_alpha", av, "must be a finite number > 0"))?;
        let tv = need("target_modules")?;
        let targets = match tv {
            Value::String(s) if s == "all-linear" => LoraTarget::ALL.to_vec(),
            Value::String(_) => {
                return Err(unsupported(
                    "target_modules",
                    tv,
                    "a regular expression over module names is not implemented (use a list of module names or \"all-linear\")",
                ))
            }
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let t = item.as_str().and_then(LoraTarget::from_module).ok_or_else(|| {
                        unsupported(
                            "target_modules",
                            item,
                            "only q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj can be adapted",
                        )
                    })?;
                    out.push(t);
                }
                out
            }
            _ => return Err(invalid("target_modules", tv, "must be a list of module names")),
        };
        let rslora = match obj.get("use_rslora") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(invalid("use_rslora", other, "must be a boolean")),
        };
        /// Fields that say where an adapter came from or how it was initialised: they do not
        /// change what a loaded adapter computes.
        const METADATA: [&str; 14] = [
            "base_model_name_or_path",
            "revision",
            "peft_version",
            "inference_mode",
            "init_lora_weights",
            "auto_mapping",
            "task_type",
            "megatron_core",
            "qalora_group_size",
            "loftq_config",
            "eva_config",
            "corda_config",
            "lora_ga_config",
            "ensure_weight_tying",
        ];
        const USED: [&str; 5] = ["peft_type", "r", "lora_alpha", "target_modules", "use_rslora"];
        for (key, value) in obj {
            if USED.contains(&key.as_str()) || METADATA.contains(&key.as_str()) {
                continue;
            }
            let off = match (key.as_str(), value) {
                (_, Value::Null | Value::Bool(false)) => true,
                (_, Value::Object(m)) => m.is_empty(),
                (_, Value::Array(a)) => a.is_empty(),
                ("bias", Value::String(s)) => s == "none",
                ("lora_dropout", Value::Number(n)) => n.as_f64() == Some(0.0),
                _ => false,
            };
            if !off {
                return Err(unsupported(key, value, "changes what the adapter computes and is not implemented"));
            }
        }
        if let Some(Value::String(task)) = obj.get("task_type") {
            if task != "CAUSAL_LM" {
                return Err(unsupported("task_type", &Value::from(task.as_str()), "only CAUSAL_LM adapters"));
            }
        }
        let params = Self { r, alpha, targets, rslora };
        rl_core::Params::validate(&params).map_err(|e| invalid("target_modules", tv, &e.to_string()))?;
        Ok(params)
    }

    /// The `adapter_config.json` PEFT writes for these parameters (`base_model_name_or_path`
    /// when given).
    #[must_use]
    pub fn to_peft_json(&self, base_model: Option<&str>) -> Value {
        let targets: Vec<&str> = self.targets.iter().map(|t| t.module()).collect();
        serde_json::json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "r": self.r,
            "lora_alpha": self.alpha,
            "target_modules": targets,
            "use_rslora": self.rslora,
            "lora_dropout": 0.0,
            "bias": "none",
            "fan_in_fan_out": false,
            "use_dora": false,
            "modules_to_save": null,
            "layers_to_transform": null,
            "rank_pattern": {},
            "alpha_pattern": {},
            "init_lora_weights": true,
            "inference_mode": false,
            "base_model_name_or_path": base_model,
        })
    }
}

impl rl_core::Params for LoraParams {
    type Error = HfError;
    fn validate(&self) -> Result<()> {
        let bad = |name: &str, value: String, reason: &str| HfError::InvalidParameter {
            name: name.to_owned(),
            value,
            reason: reason.to_owned(),
        };
        if self.r < 1 {
            return Err(bad("r", self.r.to_string(), "must be >= 1"));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(bad("alpha", self.alpha.to_string(), "must be finite and > 0"));
        }
        if self.targets.is_empty() {
            return Err(bad("targets", "[]".into(), "at least one projection"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.targets {
            if !seen.insert(*t) {
                return Err(bad(
                    "targets",
                    format!("{:?}", self.targets),
                    &format!("`{}` is listed twice", t.module()),
                ));
            }
        }
        Ok(())
    }
}

/// An attached adapter: its parameters and the variables `A`, `B` of every targeted
/// projection (names as in the base model, `model.layers.0.self_attn.q_proj.lora_A.weight`).
#[derive(Debug)]
pub(crate) struct LoraState {
    pub(crate) params: LoraParams,
    pub(crate) vs: nn::VarStore,
}

/// The adapter of one projection, as the forward pass uses it.
#[derive(Debug)]
pub(crate) struct LoraPair {
    pub(crate) a: Tensor,
    pub(crate) b: Tensor,
    pub(crate) scale: f64,
}

impl LoraPair {
    /// `y + s · (x Aᵀ) Bᵀ`, in f32 for the adapter path (PEFT's order of operations).
    pub(crate) fn add_to(&self, x: &Tensor, y: Tensor) -> Result<Tensor> {
        let kind = y.kind();
        let xa = if x.kind() == self.a.kind() { x.shallow_clone() } else { x.f_to_kind(self.a.kind())? };
        let delta =
            xa.f_linear::<Tensor>(&self.a, None)?.f_linear::<Tensor>(&self.b, None)?.f_mul_scalar(self.scale)?;
        Ok(y.f_add(&delta)?.f_to_kind(kind)?)
    }

    /// `s · B A` in the kind of `w` (what merging adds to the base weight).
    pub(crate) fn delta(&self, kind: Kind) -> Result<Tensor> {
        Ok(self.b.f_matmul(&self.a)?.f_mul_scalar(self.scale)?.f_to_kind(kind)?)
    }
}

/// Fresh adapter matrices as PEFT initialises them by default: `A` uniform in
/// `±1/√in` (kaiming-uniform with `a = √5`), `B` zero, so the adapted model starts equal to the
/// base. Drawn from a ChaCha8 stream of `seed`, in name order (not PEFT's torch stream).
pub(crate) fn init(shapes: &BTreeMap<String, Vec<i64>>, seed: u64) -> Result<BTreeMap<String, Tensor>> {
    let mut rng = rl_core::rng_from_seed(seed);
    let mut out = BTreeMap::new();
    for (name, shape) in shapes {
        let t = if name.ends_with("lora_A.weight") {
            let fan_in = shape.get(1).copied().unwrap_or(1).max(1);
            let bound = 1.0 / (fan_in as f64).sqrt();
            let n: i64 = shape.iter().product();
            let values: Vec<f32> = (0..n).map(|_| rng.random_range(-bound..bound) as f32).collect();
            Tensor::f_from_slice(&values)?.f_view(shape.as_slice())?
        } else {
            Tensor::f_zeros(shape.as_slice(), (Kind::Float, tch::Device::Cpu))?
        };
        out.insert(name.clone(), t);
    }
    Ok(out)
}

/// A PEFT file name from a base-model name and back.
pub(crate) fn to_peft_name(name: &str) -> String {
    format!("{PEFT_PREFIX}{name}")
}

pub(crate) fn from_peft_name(name: &str) -> Option<&str> {
    name.strip_prefix(PEFT_PREFIX)
}
