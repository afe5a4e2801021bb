//! The decoder: embedding, `L` pre-norm blocks (RMSNorm, GQA attention with RoPE and a KV
//! cache, RMSNorm, SwiGLU MLP), final RMSNorm, LM head.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{nn, Device, Kind, Tensor};

use crate::config::{HfConfig, Rope, CONFIG_FILE};
use crate::error::{input_err, HfError, Result};
use crate::lora::{self, LoraPair, LoraParams, LoraState, LoraTarget, ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE};
use crate::weights;

/// The dtype the weights are held (and the forward computed) in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HfDtype {
    /// float32.
    #[default]
    F32,
    /// bfloat16.
    Bf16,
    /// float16.
    F16,
}

impl HfDtype {
    /// The libtorch kind.
    #[must_use]
    pub fn kind(self) -> Kind {
        match self {
            HfDtype::F32 => Kind::Float,
            HfDtype::Bf16 => Kind::BFloat16,
            HfDtype::F16 => Kind::Half,
        }
    }

    /// The name transformers writes in `config.json` (`dtype`).
    #[must_use]
    pub fn hf_name(self) -> &'static str {
        match self {
            HfDtype::F32 => "float32",
            HfDtype::Bf16 => "bfloat16",
            HfDtype::F16 => "float16",
        }
    }
}

/// Options of [`HfModel::save_pretrained`].
///
/// | field | default | meaning | range |
/// |---|---|---|---|
/// | `max_shard_bytes` | 5 000 000 000 | weights above this total are split into shards of at most this size (+ index) | ≥ 1 |
/// | `dtype` | `None` | stored dtype; `None` = the model's | F32, BF16, F16 |
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaveParams {
    /// Shard size limit in bytes.
    pub max_shard_bytes: u64,
    /// Stored dtype (`None`: the model's own).
    pub dtype: Option<HfDtype>,
}

impl Default for SaveParams {
    fn default() -> Self {
        Self { max_shard_bytes: 5_000_000_000, dtype: None }
    }
}

impl SaveParams {
    /// Sets `max_shard_bytes`.
    #[must_use]
    pub fn max_shard_bytes(mut self, n: u64) -> Self {
        self.max_shard_bytes = n;
        self
    }

    /// Sets `dtype`.
    #[must_use]
    pub fn dtype(mut self, d: Option<HfDtype>) -> Self {
        self.dtype = d;
        self
    }
}

impl rl_core::Params for SaveParams {
    type Error = HfError;
    fn validate(&self) -> Result<()> {
        if self.max_shard_bytes == 0 {
            return Err(HfError::InvalidParameter {
                name: "max_shard_bytes".into(),
                value: "0".into(),
                reason: "must be >= 1".into(),
            });
        }
        Ok(())
    }
}

/// The keys and values of every layer seen so far, for incremental decoding.
///
/// Start with [`KvCache::new`] and pass it to each [`HfModel::forward`] call; the attention
/// mask passed must then cover the cached positions followed by the new ones.
#[derive(Debug, Default)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: i64,
    batch: i64,
}

impl KvCache {
    /// An empty cache.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of cached positions.
    #[must_use]
    pub fn len(&self) -> i64 {
        self.len
    }

    /// Whether nothing is cached.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Debug)]
struct Linear {
    w: Tensor,
    b: Option<Tensor>,
    /// The LoRA adapter of this projection, when one is attached.
    lora: Option<LoraPair>,
}

impl Linear {
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.f_linear(&self.w, self.b.as_ref())?;
        match &self.lora {
            None => Ok(y),
            Some(l) => l.add_to(x, y),
        }
    }
}

impl Layer {
    fn linear(&self, t: LoraTarget) -> &Linear {
        match t {
            LoraTarget::QProj => &self.q,
            LoraTarget::KProj => &self.k,
            LoraTarget::VProj => &self.v,
            LoraTarget::OProj => &self.o,
            LoraTarget::GateProj => &self.gate,
            LoraTarget::UpProj => &self.up,
            LoraTarget::DownProj => &self.down,
        }
    }

    fn linear_mut(&mut self, t: LoraTarget) -> &mut Linear {
        match t {
            LoraTarget::QProj => &mut self.q,
            LoraTarget::KProj => &mut self.k,
            LoraTarget::VProj => &mut self.v,
            LoraTarget::OProj => &mut self.o,
            LoraTarget::GateProj => &mut self.gate,
            LoraTarget::UpProj => &mut self.up,
            LoraTarget::DownProj => &mut self.down,
        }
    }
}

#[derive(Debug)]
struct Layer {
    input_norm: Tensor,
    post_norm: Tensor,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// A Hugging Face decoder-only causal LM (Qwen2/Qwen2.5, Qwen3, Llama 3.x) on libtorch.
///
/// The parameters live in a [`tch::nn::VarStore`] under transformers' names
/// (`model.layers.0.self_attn.q_proj.weight`, ...), so
/// [`var_store`](Self::var_store) hands them to an optimiser and
/// [`save_pretrained`](Self::save_pretrained) writes them back in the same layout.
#[derive(Debug)]
pub struct HfModel {
    config: HfConfig,
    vs: nn::VarStore,
    dtype: HfDtype,
    embed: Tensor,
    lm_head: Option<Tensor>,
    norm: Tensor,
    layers: Vec<Layer>,
    inv_freq: Tensor,
    lora: Option<LoraState>,
}

fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let kind = x.kind();
    let xf = x.f_to_kind(Kind::Float)?;
    let var = xf.f_pow_tensor_scalar(2)?.f_mean_dim(-1, true, Kind::Float)?;
    let normed = xf.f_mul(&var.f_add_scalar(eps)?.f_rsqrt()?)?.f_to_kind(kind)?;
    Ok(w.f_mul(&normed)?)
}

fn rotate_half(x: &Tensor) -> Result<Tensor> {
    let half = x.size().last().copied().unwrap_or(0) / 2;
    let x1 = x.f_narrow(-1, 0, half)?;
    let x2 = x.f_narrow(-1, half, half)?;
    Ok(Tensor::f_cat(&[x2.f_neg()?, x1], -1)?)
}

/// `inv_freq` as transformers computes it (f32), with Llama 3 scaling applied when configured.
fn inv_freq(cfg: &HfConfig) -> Vec<f32> {
    let d = cfg.head_dim;
    let base = cfg.rope_theta as f32;
    (0..d / 2)
        .map(|i| {
            let f = 1.0f32 / base.powf((2 * i) as f32 / d as f32);
            match cfg.rope {
                Rope::Default => f,
                Rope::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position_embeddings } => {
                    let (factor, low, high, old) = (
                        factor as f32,
                        low_freq_factor as f32,
                        high_freq_factor as f32,
                        original_max_position_embeddings as f32,
                    );
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    let (low_wl, high_wl) = (old / low, old / high);
                    if wavelen < high_wl {
                        f
                    } else if wavelen > low_wl {
                        f / factor
                    } else {
                        let smooth = (old / wavelen - low) / (high - low);
                        (1.0 - smooth) * f / factor + smooth * f
                    }
                }
            }
        })
        .collect()
}

impl HfModel {
    /// Loads a model directory (`config.json` + `model.safetensors` or shards with
    /// `model.safetensors.index.json`) onto `device`, holding the weights in `dtype` (they are
    /// converted from the stored F32/BF16/F16).
    ///
    /// Everything is checked before a model is built: the config
    /// ([`HfConfig::from_file`]), each file's header, and every tensor's name, dtype and
    /// shape against the config.
    ///
    /// # Errors
    /// [`HfError::MissingFile`], [`HfError::Corrupt`], [`HfError::MissingTensor`],
    /// [`HfError::UnexpectedTensors`], [`HfError::TensorShape`], [`HfError::TensorDtype`],
    /// the config errors, and [`HfError::Nn`] (`DeviceUnavailable`) for a device this machine
    /// does not have.
    pub fn from_pretrained(dir: impl AsRef<Path>, device: Device, dtype: HfDtype) -> Result<Self> {
        let dir = dir.as_ref();
        rl_nn::check::available(device)?;
        let config = HfConfig::from_file(dir.join(CONFIG_FILE))?;
        let expected: BTreeMap<String, Vec<i64>> = config.expected_tensors().into_iter().collect();
        let tensors = weights::read_checked(dir, &expected)?;
        Self::from_tensors(config, &tensors, device, dtype)
    }

    /// Builds a model from a config and tensors named and shaped as
    /// [`HfConfig::expected_tensors`] lists (any float kind, any device).
    ///
    /// # Errors
    /// [`HfError::MissingTensor`], [`HfError::UnexpectedTensors`], [`HfError::TensorShape`]
    /// (path `<tensors>`), libtorch failures.
    pub fn from_tensors(
        config: HfConfig,
        tensors: &BTreeMap<String, Tensor>,
        device: Device,
        dtype: HfDtype,
    ) -> Result<Self> {
        rl_nn::check::available(device)?;
        let expected = config.expected_tensors();
        let path = "<tensors>".to_owned();
        for (name, shape) in &expected {
            let t =
                tensors.get(name).ok_or_else(|| HfError::MissingTensor { path: path.clone(), name: name.clone() })?;
            if &t.size() != shape {
                return Err(HfError::TensorShape { path, name: name.clone(), expected: shape.clone(), got: t.size() });
            }
            if !rl_nn::check::is_float(t.kind()) {
                return Err(HfError::TensorDtype { path, name: name.clone(), dtype: format!("{:?}", t.kind()) });
            }
        }
        let names: std::collections::BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
        let extra: Vec<String> = tensors.keys().filter(|k| !names.contains(k.as_str())).cloned().collect();
        if !extra.is_empty() {
            return Err(HfError::UnexpectedTensors { path, names: extra });
        }
        let mut vs = nn::VarStore::new(device);
        vs.set_kind(dtype.kind());
        {
            let root = vs.root();
            for (name, _) in &expected {
                let src = tensors
                    .get(name)
                    .ok_or_else(|| HfError::MissingTensor { path: "<tensors>".into(), name: name.clone() })?;
                var_copy_dotted(&root, name, src)?;
            }
        }
        let vars = vs.variables();
        let get = |name: &str| -> Result<Tensor> {
            vars.get(name)
                .map(Tensor::shallow_clone)
                .ok_or_else(|| HfError::MissingTensor { path: "<var store>".into(), name: name.to_owned() })
        };
        let opt = |name: String, on: bool| -> Result<Option<Tensor>> {
            if on {
                get(&name).map(Some)
            } else {
                Ok(None)
            }
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers as usize);
        for l in 0..config.num_hidden_layers {
            let p = format!("model.layers.{l}");
            let lin = |n: &str, bias: bool| -> Result<Linear> {
                Ok(Linear { w: get(&format!("{p}.{n}.weight"))?, b: opt(format!("{p}.{n}.bias"), bias)?, lora: None })
            };
            layers.push(Layer {
                input_norm: get(&format!("{p}.input_layernorm.weight"))?,
                post_norm: get(&format!("{p}.post_attention_layernorm.weight"))?,
                q: lin("self_attn.q_proj", config.qkv_bias)?,
                k: lin("self_attn.k_proj", config.qkv_bias)?,
                v: lin("self_attn.v_proj", config.qkv_bias)?,
                o: lin("self_attn.o_proj", config.o_bias)?,
                q_norm: opt(format!("{p}.self_attn.q_norm.weight"), config.qk_norm)?,
                k_norm: opt(format!("{p}.self_attn.k_norm.weight"), config.qk_norm)?,
                gate: lin("mlp.gate_proj", config.mlp_bias)?,
                up: lin("mlp.up_proj", config.mlp_bias)?,
                down: lin("mlp.down_proj", config.mlp_bias)?,
            });
        }
        let inv_freq = Tensor::f_from_slice(&inv_freq(&config))?.f_to_device(device)?;
        Ok(Self {
            embed: get("model.embed_tokens.weight")?,
            lm_head: opt("lm_head.weight".into(), !config.tie_word_embeddings)?,
            norm: get("model.norm.weight")?,
            layers,
            inv_freq,
            dtype,
            vs,
            config,
            lora: None,
        })
    }

    /// A frozen copy (own storage, no gradient) on the same device and dtype: the reference
    /// policy of a KL term. Later updates of `self` do not reach it.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn frozen_copy(&self) -> Result<Self> {
        // With an adapter attached: the merged weights (what the model computes now).
        let tensors = self.merged_tensors()?; // from_tensors copies into new variables
        let mut copy = Self::from_tensors(self.config.clone(), &tensors, self.device(), self.dtype)?;
        copy.vs.freeze();
        Ok(copy)
    }

    /// The config.
    #[must_use]
    pub fn config(&self) -> &HfConfig {
        &self.config
    }

    /// The parameters (transformers' names), for an optimiser or a checkpoint.
    #[must_use]
    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// The device the weights are on.
    #[must_use]
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// The dtype the weights are held in.
    #[must_use]
    pub fn dtype(&self) -> HfDtype {
        self.dtype
    }

    /// Writes `config.json` and the weights (`model.safetensors`, or shards + index above
    /// `params.max_shard_bytes`) to `dir`, in the layout transformers' `from_pretrained`
    /// reads. A tied head is not written (as transformers does). Returns the weight files.
    /// With a LoRA adapter attached, the weights written are the merged ones (`W + s·BA`, what
    /// the model computes and what an inference engine reloads); the adapter itself is written
    /// by [`save_adapter`](Self::save_adapter).
    ///
    /// # Errors
    /// I/O and libtorch failures.
    pub fn save_pretrained(&self, dir: impl AsRef<Path>, params: &rl_core::Valid<SaveParams>) -> Result<Vec<PathBuf>> {
        let dir = dir.as_ref();
        let stored = params.dtype.unwrap_or(self.dtype);
        let tensors = self.merged_tensors()?;
        let files = weights::write(dir, &tensors, stored.kind(), params.max_shard_bytes)?;
        let cfg = serde_json::to_string_pretty(&self.config.to_json(stored.hf_name()))?;
        let path = dir.join(CONFIG_FILE);
        let tmp = path.with_extension("tmp-rl-hf");
        std::fs::write(&tmp, cfg)?;
        std::fs::rename(&tmp, &path)?;
        Ok(files)
    }

    fn check_ids(&self, input_ids: &Tensor) -> Result<(i64, i64)> {
        let size = input_ids.size();
        let [b, t] = size[..] else { return Err(input_err("input_ids", "[B, T]", format!("{size:?}"))) };
        if b < 1 || t < 1 {
            return Err(input_err("input_ids", "B >= 1 and T >= 1", format!("{size:?}")));
        }
        if input_ids.kind() != Kind::Int64 {
            return Err(input_err("input_ids", "kind Int64", format!("{:?}", input_ids.kind())));
        }
        if input_ids.device() != self.device() {
            return Err(input_err(
                "input_ids",
                format!("device {:?}", self.device()),
                format!("{:?}", input_ids.device()),
            ));
        }
        let v = self.config.vocab_size;
        let bad = input_ids.f_lt(0)?.f_logical_or(&input_ids.f_ge(v)?)?;
        if bad.f_any()?.f_int64_value(&[])? != 0 {
            let idx = bad.f_flatten(0, -1)?.f_to_kind(Kind::Int64)?.f_argmax(0, false)?.f_int64_value(&[])?;
            let id = input_ids.f_flatten(0, -1)?.f_int64_value(&[idx])?;
            return Err(HfError::TokenOutOfRange { row: idx / t, position: idx % t, id, vocab_size: v });
        }
        Ok((b, t))
    }

    /// Position ids for a left-padded batch as transformers' `generate` computes them:
    /// `cumsum(mask) - 1`, with pad positions set to 1. `mask` is `[B, S]`, 0/1, Int64.
    ///
    /// # Errors
    /// [`HfError::Input`] for a mask that is not `[B, S]` Int64 of zeros and ones.
    pub fn position_ids(mask: &Tensor) -> Result<Tensor> {
        let size = mask.size();
        if size.len() != 2 {
            return Err(input_err("attention_mask", "[B, S]", format!("{size:?}")));
        }
        if mask.kind() != Kind::Int64 {
            return Err(input_err("attention_mask", "kind Int64", format!("{:?}", mask.kind())));
        }
        let bad = mask.f_ne(0)?.f_logical_and(&mask.f_ne(1)?)?;
        if bad.f_any()?.f_int64_value(&[])? != 0 {
            return Err(input_err("attention_mask", "values 0 or 1", "other values"));
        }
        let pos = mask.f_cumsum(-1, Kind::Int64)?.f_sub_scalar(1)?;
        Ok(pos.f_masked_fill(&mask.f_eq(0)?, 1)?)
    }

    /// Logits `[B, T, V]` (in the model's dtype) of `input_ids` `[B, T]` (Int64).
    ///
    /// `attention_mask` is `[B, past + T]` Int64 (1 = token, 0 = padding) over the cached and
    /// the new positions; `None` means no padding. Positions follow
    /// [`position_ids`](Self::position_ids), so a row's logits do not depend on how much left
    /// padding it has. With `cache`, keys and values are appended to it and attention covers
    /// the cached positions too. Logits at padding positions are finite but meaningless.
    ///
    /// Gradients flow to the parameters unless called under [`tch::no_grad`].
    ///
    /// # Errors
    /// [`HfError::Input`] (rank, kind, device, mask length or values, a cache of another
    /// batch size), [`HfError::TokenOutOfRange`], libtorch failures.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let x = self.hidden_states(input_ids, attention_mask, cache)?;
        Ok(x.f_linear::<Tensor>(self.lm_head_weight(), None)?)
    }

    /// Logits `[B, V]` of the last position only (the LM head is applied to one position per
    /// row, as transformers' `generate` does with `logits_to_keep = 1`).
    pub(crate) fn last_logits(&self, ids: &Tensor, mask: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let h = self.hidden_states(ids, Some(mask), Some(cache))?.f_select(1, -1)?;
        Ok(h.f_linear::<Tensor>(self.lm_head_weight(), None)?)
    }

    /// The LM head matrix `[V, H]` (the embedding matrix when tied).
    pub fn lm_head_weight(&self) -> &Tensor {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// The final hidden states `[B, T, H]` (after the last RMSNorm, before the LM head):
    /// [`forward`](Self::forward) without the head, same arguments and errors.
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn hidden_states(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        mut cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = self.check_ids(input_ids)?;
        let past = cache.as_ref().map_or(0, |c| c.len);
        if let Some(c) = cache.as_ref() {
            if !c.is_empty() && c.batch != b {
                return Err(input_err("cache", format!("batch size {b}"), c.batch));
            }
        }
        let dev = self.device();
        let s = past + t;
        let mask = match attention_mask {
            Some(m) => {
                if m.size() != [b, s] {
                    return Err(input_err(
                        "attention_mask",
                        format!("[{b}, {s}] (cached + new positions)"),
                        format!("{:?}", m.size()),
                    ));
                }
                m.f_to_device(dev)?
            }
            None => Tensor::f_ones([b, s], (Kind::Int64, dev))?,
        };
        let pos = Self::position_ids(&mask)?.f_narrow(1, past, t)?;
        let kind = self.dtype.kind();
        // RoPE tables [B, 1, T, D], computed in f32 and cast to the model dtype.
        let freqs = pos.f_to_kind(Kind::Float)?.f_unsqueeze(-1)?.f_mul(&self.inv_freq.f_view([1, 1, -1])?)?;
        let emb = Tensor::f_cat(&[&freqs, &freqs], -1)?;
        let cos = emb.f_cos()?.f_to_kind(kind)?.f_unsqueeze(1)?;
        let sin = emb.f_sin()?.f_to_kind(kind)?.f_unsqueeze(1)?;
        // Allowed keys [B, 1, T, S]: not padding and not in the future.
        let q_idx = Tensor::f_arange_start(past, s, (Kind::Int64, dev))?.f_view([t, 1])?;
        let k_idx = Tensor::f_arange(s, (Kind::Int64, dev))?.f_view([1, s])?;
        let causal = k_idx.f_le_tensor(&q_idx)?;
        let keep = mask.f_ne(0)?.f_view([b, 1, 1, s])?.f_logical_and(&causal.f_view([1, 1, t, s])?)?;
        let blocked = keep.f_logical_not()?;

        let cfg = &self.config;
        let (nh, nkv, d) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
        let rep = nh / nkv;
        let scale = 1.0 / (d as f64).sqrt();
        let mut x = Tensor::f_embedding(&self.embed, input_ids, -1, false, false)?;
        let mut new_cache = Vec::with_capacity(self.layers.len());
        for (li, layer) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.input_norm, cfg.rms_norm_eps)?;
            let mut q = layer.q.apply(&h)?.f_view([b, t, nh, d])?;
            let mut k = layer.k.apply(&h)?.f_view([b, t, nkv, d])?;
            let v = layer.v.apply(&h)?.f_view([b, t, nkv, d])?.f_transpose(1, 2)?;
            if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
                q = rms_norm(&q, qn, cfg.rms_norm_eps)?;
                k = rms_norm(&k, kn, cfg.rms_norm_eps)?;
            }
            let q = q.f_transpose(1, 2)?;
            let k = k.f_transpose(1, 2)?;
            let q = q.f_mul(&cos)?.f_add(&rotate_half(&q)?.f_mul(&sin)?)?;
            let k = k.f_mul(&cos)?.f_add(&rotate_half(&k)?.f_mul(&sin)?)?;
            let (k, v) = match cache.as_ref().and_then(|c| c.layers.get(li)) {
                Some((pk, pv)) => (Tensor::f_cat(&[pk, &k], 2)?, Tensor::f_cat(&[pv, &v], 2)?),
                None => (k, v),
            };
            if cache.is_some() {
                new_cache.push((k.shallow_clone(), v.shallow_clone()));
            }
            let expand = |x: &Tensor| -> Result<Tensor> {
                if rep == 1 {
                    return Ok(x.shallow_clone());
                }
                Ok(x.f_unsqueeze(2)?.f_expand([b, nkv, rep, s, d], false)?.f_reshape([b, nh, s, d])?)
            };
            let (ke, ve) = (expand(&k)?, expand(&v)?);
            let scores = q.f_matmul(&ke.f_transpose(-2, -1)?)?.f_mul_scalar(scale)?.f_to_kind(Kind::Float)?;
            let scores = scores.f_masked_fill(&blocked, f64::from(f32::MIN))?;
            let probs = scores.f_softmax(-1, Kind::Float)?.f_to_kind(kind)?;
            let attn = probs.f_matmul(&ve)?.f_transpose(1, 2)?.f_reshape([b, t, nh * d])?;
            x = x.f_add(&layer.o.apply(&attn)?)?;
            let h = rms_norm(&x, &layer.post_norm, cfg.rms_norm_eps)?;
            let g = layer.gate.apply(&h)?.f_silu()?;
            let m = layer.down.apply(&g.f_mul(&layer.up.apply(&h)?)?)?;
            x = x.f_add(&m)?;
        }
        if let Some(c) = cache.as_mut() {
            c.layers = new_cache;
            c.len = s;
            c.batch = b;
        }
        rms_norm(&x, &self.norm, cfg.rms_norm_eps)
    }

    /// Greedy decoding of a left-padded batch with the KV cache: `max_new_tokens` new tokens
    /// per row (no stop token), `[B, max_new_tokens]` Int64, as transformers'
    /// `generate(do_sample=False)` with no `eos_token_id`. Runs without gradient.
    ///
    /// # Errors
    /// [`HfError::InvalidParameter`] for `max_new_tokens < 1`, and what
    /// [`forward`](Self::forward) returns.
    pub fn generate_greedy(&self, input_ids: &Tensor, attention_mask: &Tensor, max_new_tokens: i64) -> Result<Tensor> {
        if max_new_tokens < 1 {
            return Err(HfError::InvalidParameter {
                name: "max_new_tokens".into(),
                value: max_new_tokens.to_string(),
                reason: "must be >= 1".into(),
            });
        }
        tch::no_grad(|| {
            let mut cache = KvCache::new();
            let mut mask = attention_mask.f_to_device(self.device())?;
            let mut ids = input_ids.shallow_clone();
            let mut out = Vec::with_capacity(max_new_tokens as usize);
            for _ in 0..max_new_tokens {
                let last = self.last_logits(&ids, &mask, &mut cache)?;
                let next = last.f_argmax(-1, true)?;
                mask = Tensor::f_cat(&[&mask, &next.f_ones_like()?], 1)?;
                out.push(next.shallow_clone());
                ids = next;
            }
            Ok(Tensor::f_cat(&out, 1)?)
        })
    }
}

impl HfModel {
    /// The weight `[out, in]` of projection `t` of layer `l`.
    pub(crate) fn base_weight(&self, l: i64, t: LoraTarget) -> Result<&Tensor> {
        let layer = usize::try_from(l)
            .ok()
            .and_then(|l| self.layers.get(l))
            .ok_or_else(|| input_err("layer", format!("0 <= layer < {}", self.layers.len()), l))?;
        Ok(&layer.linear(t).w)
    }

    /// Names and shapes `A` `[r, in]`, `B` `[out, r]` of an adapter (base-model names).
    fn lora_shapes(&self, params: &LoraParams) -> Result<BTreeMap<String, Vec<i64>>> {
        let mut out = BTreeMap::new();
        for l in 0..self.config.num_hidden_layers {
            for t in &params.targets {
                let base = format!("model.layers.{l}.{}", t.path());
                let w = self.base_weight(l, *t)?;
                let [o, i] = w.size()[..] else {
                    return Err(input_err(&base, "a [out, in] weight", format!("{:?}", w.size())));
                };
                out.insert(format!("{base}.lora_A.weight"), vec![params.r, i]);
                out.insert(format!("{base}.lora_B.weight"), vec![o, params.r]);
            }
        }
        Ok(out)
    }

    /// The attached LoRA adapter's parameters, if any.
    #[must_use]
    pub fn lora(&self) -> Option<&LoraParams> {
        self.lora.as_ref().map(|s| &s.params)
    }

    /// The variables an optimiser should train: the adapter's `A` and `B` matrices when one is
    /// attached (the base weights are frozen then), otherwise every parameter
    /// ([`var_store`](Self::var_store)). Names follow the base model's
    /// (`model.layers.0.self_attn.q_proj.lora_A.weight`).
    #[must_use]
    pub fn trainable_var_store(&self) -> &nn::VarStore {
        self.lora.as_ref().map_or(&self.vs, |s| &s.vs)
    }

    /// Attaches a fresh LoRA adapter to the projections `params.targets` of every layer,
    /// initialised as PEFT does by default (`A` uniform in `±1/√in`, `B = 0`, so the model
    /// computes what it did before; drawn from a ChaCha8 stream of `seed`), and freezes the
    /// base weights.
    ///
    /// # Errors
    /// [`HfError::InvalidParameter`] (`lora`) when an adapter is already attached; libtorch
    /// failures.
    pub fn add_lora(&mut self, params: &rl_core::Valid<LoraParams>, seed: u64) -> Result<()> {
        let shapes = self.lora_shapes(params)?;
        let tensors = lora::init(&shapes, seed)?;
        self.attach_lora((**params).clone(), &tensors)
    }

    /// Attaches the PEFT adapter saved in `dir` (`adapter_config.json` read by
    /// [`LoraParams::from_peft_file`], `adapter_model.safetensors` checked tensor by tensor:
    /// names, F32/BF16/F16, shapes `[r, in]` and `[out, r]` for every targeted projection of
    /// every layer, nothing else) and freezes the base weights.
    ///
    /// # Errors
    /// The config errors of [`LoraParams::from_peft_file`]; [`HfError::MissingFile`],
    /// [`HfError::Corrupt`], [`HfError::MissingTensor`], [`HfError::UnexpectedTensors`],
    /// [`HfError::TensorShape`], [`HfError::TensorDtype`] for the weights;
    /// [`HfError::InvalidParameter`] (`lora`) when an adapter is already attached.
    pub fn load_adapter(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let params = LoraParams::from_peft_file(dir.join(ADAPTER_CONFIG_FILE))?;
        let shapes = self.lora_shapes(&params)?;
        let peft_shapes: BTreeMap<String, Vec<i64>> =
            shapes.iter().map(|(n, s)| (lora::to_peft_name(n), s.clone())).collect();
        let read = crate::weights::read_file_checked(&dir.join(ADAPTER_WEIGHTS_FILE), &peft_shapes)?;
        let mut tensors = BTreeMap::new();
        for (name, t) in read {
            let base = lora::from_peft_name(&name).unwrap_or(&name).to_owned();
            tensors.insert(base, t);
        }
        self.attach_lora(params, &tensors)
    }

    fn attach_lora(&mut self, params: LoraParams, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        if self.lora.is_some() {
            return Err(HfError::InvalidParameter {
                name: "lora".into(),
                value: "a second adapter".into(),
                reason: "an adapter is already attached (merge_lora first)".into(),
            });
        }
        let vs = nn::VarStore::new(self.device());
        {
            let root = vs.root();
            for (name, t) in tensors {
                var_copy_dotted(&root, name, &t.f_to_kind(Kind::Float)?)?;
            }
        }
        let vars = vs.variables();
        let scale = params.scale();
        let mut pairs = Vec::new();
        for l in 0..self.layers.len() {
            for t in &params.targets {
                let base = format!("model.layers.{l}.{}", t.path());
                let get = |m: &str| -> Result<Tensor> {
                    let name = format!("{base}.{m}.weight");
                    vars.get(&name)
                        .map(Tensor::shallow_clone)
                        .ok_or(HfError::MissingTensor { path: "<adapter>".into(), name })
                };
                pairs.push((l, *t, LoraPair { a: get("lora_A")?, b: get("lora_B")?, scale }));
            }
        }
        for (l, t, pair) in pairs {
            if let Some(layer) = self.layers.get_mut(l) {
                layer.linear_mut(t).lora = Some(pair);
            }
        }
        self.vs.freeze();
        self.lora = Some(LoraState { params, vs });
        Ok(())
    }

    /// Writes the attached adapter in PEFT's layout: `adapter_config.json` (with
    /// `base_model_name_or_path` when given) and `adapter_model.safetensors` (f32, PEFT's
    /// names `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`, ...), which
    /// PEFT's `PeftModel.from_pretrained` loads.
    ///
    /// # Errors
    /// [`HfError::InvalidParameter`] (`lora`) when no adapter is attached; I/O and libtorch
    /// failures.
    pub fn save_adapter(&self, dir: impl AsRef<Path>, base_model: Option<&str>) -> Result<()> {
        let dir = dir.as_ref();
        let state = self.lora.as_ref().ok_or_else(no_adapter)?;
        std::fs::create_dir_all(dir)?;
        let tensors: BTreeMap<String, Tensor> =
            state.vs.variables().into_iter().map(|(n, t)| (lora::to_peft_name(&n), t)).collect();
        crate::weights::write_file(&dir.join(ADAPTER_WEIGHTS_FILE), &tensors, Kind::Float)?;
        let cfg = serde_json::to_string_pretty(&state.params.to_peft_json(base_model))?;
        let path = dir.join(ADAPTER_CONFIG_FILE);
        let tmp = path.with_extension("tmp-rl-hf");
        std::fs::write(&tmp, cfg)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// The model's weights (transformers' names, detached) with the attached adapter merged
    /// in (`W + s·BA` in the model dtype, as PEFT's `merge_and_unload`); the plain weights
    /// without one.
    ///
    /// # Errors
    /// libtorch failures.
    pub fn merged_tensors(&self) -> Result<BTreeMap<String, Tensor>> {
        let mut out = BTreeMap::new();
        for (name, t) in self.vs.variables() {
            out.insert(name, t.f_detach()?);
        }
        if let Some(state) = &self.lora {
            tch::no_grad(|| -> Result<()> {
                for (l, layer) in self.layers.iter().enumerate() {
                    for t in &state.params.targets {
                        let lin = layer.linear(*t);
                        if let Some(pair) = &lin.lora {
                            let merged = lin.w.f_detach()?.f_add(&pair.delta(lin.w.kind())?)?;
                            out.insert(format!("model.layers.{l}.{}.weight", t.path()), merged);
                        }
                    }
                }
                Ok(())
            })?;
        }
        Ok(out)
    }

    /// Folds the attached adapter into the base weights (`W ← W + s·BA`), removes it and makes
    /// the base weights trainable again: PEFT's `merge_and_unload`.
    ///
    /// # Errors
    /// [`HfError::InvalidParameter`] (`lora`) when no adapter is attached; libtorch failures.
    pub fn merge_lora(&mut self) -> Result<()> {
        let state = self.lora.take().ok_or_else(no_adapter)?;
        tch::no_grad(|| -> Result<()> {
            for layer in &mut self.layers {
                for t in &state.params.targets {
                    let lin = layer.linear_mut(*t);
                    if let Some(pair) = lin.lora.take() {
                        let delta = pair.delta(lin.w.kind())?;
                        let _ = lin.w.f_add_(&delta)?;
                    }
                }
            }
            Ok(())
        })?;
        self.vs.unfreeze();
        Ok(())
    }
}

/// A variable named `name` (dots: nested paths, `model.layers.0.mlp.up_proj.weight`) under
/// `root`, holding a copy of `src`.
fn var_copy_dotted(root: &nn::Path<'_>, name: &str, src: &Tensor) -> Result<()> {
    let parts: Vec<&str> = name.split('.').collect();
    let Some((last, dirs)) = parts.split_last() else { return Ok(()) };
    let mut p = root.clone();
    for d in dirs {
        p = p.sub(*d);
    }
    let _var = p.f_var_copy(last, src)?;
    Ok(())
}

fn no_adapter() -> HfError {
    HfError::InvalidParameter {
        name: "lora".into(),
        value: "none".into(),
        reason: "no LoRA adapter is attached".into(),
    }
}

/// Left-pads `prompts` with `pad_id` into `(input_ids, attention_mask)`, both `[B, T]` Int64
/// on `device`.
///
/// # Errors
/// [`HfError::Input`] for no prompts or an empty prompt.
pub fn left_pad(prompts: &[Vec<i64>], pad_id: i64, device: Device) -> Result<(Tensor, Tensor)> {
    if prompts.is_empty() {
        return Err(input_err("prompts", "at least one prompt", "none"));
    }
    if let Some(row) = prompts.iter().position(Vec::is_empty) {
        return Err(input_err("prompts", "non-empty prompts", format!("row {row} is empty")));
    }
    let t = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let mut ids = Vec::with_capacity(prompts.len() * t);
    let mut mask = Vec::with_capacity(prompts.len() * t);
    for p in prompts {
        let pad = t - p.len();
        ids.extend(std::iter::repeat_n(pad_id, pad).chain(p.iter().copied()));
        mask.extend(std::iter::repeat_n(0i64, pad).chain(std::iter::repeat_n(1i64, p.len())));
    }
    let shape = [prompts.len() as i64, t as i64];
    Ok((
        Tensor::f_from_slice(&ids)?.f_view(shape)?.f_to_device(device)?,
        Tensor::f_from_slice(&mask)?.f_view(shape)?.f_to_device(device)?,
    ))
}
