//! The decoder-only transformer and its KV cache, built from `rl_nn::layers` (its blocks are
//! [`rl_nn::layers::TransformerBlock`]s with a fused `attn.qkv`, its final norm a
//! [`rl_nn::layers::LayerNorm`]).

use rand::Rng;
use rl_nn::init::{self, Init};
use rl_nn::layers::{BlockConfig, BlockInit, LayerNorm, QkvLayout, TransformerBlock};
use tch::nn::{Path, VarStore};
use tch::{Device, Kind, Tensor};

use crate::config::LmConfig;
use crate::error::{LmError, Result};

/// Additive attention bias for masked keys. Finite (not `-inf`) so that a query whose keys are
/// all masked (a left-padding position) gets a uniform, finite softmax instead of NaN; its output
/// is never used.
const MASKED: f64 = -1e9;

/// Creates the variable `dotted` (e.g. `"tok_emb.weight"`: dots make sub-paths) under `root`,
/// drawn from `rng` (never libtorch's global generator).
fn var<R: Rng + ?Sized>(root: &Path<'_>, dotted: &str, dims: &[i64], init: Init, rng: &mut R) -> Result<Tensor> {
    Ok(init::var(root, dotted, dims, init, rng)?)
}

/// The block configuration of `cfg`: fused `attn.qkv`, GPT-2's initialisation (normal with std
/// `init_std`, residual projections scaled by `1/√(2·n_layers)`, biases 0), no dropout.
fn block_config(cfg: &LmConfig) -> Result<rl_core::Valid<BlockConfig>> {
    let init = BlockInit::Normal {
        std: cfg.init_std,
        // GPT-2: residual projections scaled by 1/sqrt(2 n_layers).
        residual_std: cfg.init_std / (2.0 * cfg.n_layers as f64).sqrt(),
    };
    Ok(rl_core::Params::check(
        BlockConfig::new(cfg.d_model, cfg.n_heads, cfg.d_ff)
            .qkv(QkvLayout::Fused)
            .init(init)
            .layer_norm_eps(cfg.layer_norm_eps),
    )?)
}

/// Per-layer key/value tensors of the tokens seen so far, for incremental decoding.
///
/// Made by [`TransformerLm::new_cache`] and filled by [`TransformerLm::forward_cached`], which
/// appends each call's keys and values (`[B, n_heads, len, head_dim]` per layer) together with
/// the attention mask of the cached tokens and the per-row count of real (unmasked) tokens, from
/// which the next positions are computed. A failed call leaves the cache unchanged.
#[derive(Debug)]
pub struct KvCache {
    batch: i64,
    len: i64,
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// `[B, len]` float mask of the cached tokens.
    mask: Option<Tensor>,
    /// `[B, 1]` int64 number of real tokens cached per row.
    count: Option<Tensor>,
}

impl KvCache {
    /// Number of rows.
    pub fn batch_size(&self) -> i64 {
        self.batch
    }
    /// Number of cached positions (including padding).
    pub fn len(&self) -> i64 {
        self.len
    }
    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A decoder-only transformer language model (GPT-2 style, pre-LayerNorm).
///
/// ```text
/// x_0 = E_tok[ids] + E_pos[positions]                       positions = cumsum(mask) - 1
/// x   = x + Wo · softmax(QKᵀ/√d_h + causal + padding) V      on LN1(x), per head
/// x   = x + W2 · gelu(W1 · LN2(x))
/// logits = LN_f(x) · E_tokᵀ      (or a separate head when `tie_embeddings = false`)
/// ```
///
/// Positions count only unmasked tokens, so a left-padded prompt gets the same positions (and
/// logits) as the unpadded one. The model owns its [`VarStore`]; build an optimizer on
/// [`var_store`](Self::var_store). Parameters are drawn from the caller's generator
/// (`rl_nn::init`, never libtorch's process-wide one: two models built from the same seed in
/// two threads are bit-identical) and created on the given device (use
/// [`rl_nn::default_device`] for CUDA when present).
///
/// Variable names (what [`save`](Self::save) writes): `tok_emb.weight`, `pos_emb.weight`,
/// `blocks.{i}.{ln1,ln2}.{weight,bias}`, `blocks.{i}.attn.{qkv,proj}.{weight,bias}`,
/// `blocks.{i}.mlp.{fc1,fc2}.{weight,bias}`, `ln_f.{weight,bias}`, and `lm_head.weight` when
/// untied.
///
/// ```
/// use rl_lm::{LmConfig, TransformerLm};
/// use tch::{Device, Tensor};
/// let mut rng = rl_core::rng_from_seed(0);
/// let lm = TransformerLm::new(&LmConfig::new(16, 32).d_model(32).n_layers(2), Device::Cpu, &mut rng)?;
/// let ids = Tensor::from_slice(&[1i64, 5, 7, 2]).view([1, 4]);
/// let logits = lm.forward(&ids, None)?;
/// assert_eq!(logits.size(), [1, 4, 16]);
/// # Ok::<(), rl_lm::LmError>(())
/// ```
#[derive(Debug)]
pub struct TransformerLm {
    cfg: LmConfig,
    vs: VarStore,
    tok_emb: Tensor,
    pos_emb: Tensor,
    blocks: Vec<TransformerBlock>,
    ln_f: LayerNorm,
    head: Option<Tensor>,
}

impl TransformerLm {
    /// Builds a freshly initialised model on `device`, its weights drawn from `rng` (GPT-2's
    /// initialisation: normal with std `init_std`, residual projections scaled by
    /// `1/√(2·n_layers)`, layer norms at 1 and 0, biases 0).
    ///
    /// # Errors
    /// [`LmError::InvalidConfig`] from the config's [`validate`](rl_core::Params::validate); libtorch errors (e.g. out of memory).
    pub fn new<R: Rng + ?Sized>(cfg: &LmConfig, device: Device, rng: &mut R) -> Result<Self> {
        rl_core::Params::validate(cfg)?;
        let vs = VarStore::new(device);
        let root = vs.root();
        let (v, d) = (cfg.vocab_size, cfg.d_model);
        let w = Init::Normal { mean: 0.0, std: cfg.init_std };
        let tok_emb = var(&root, "tok_emb.weight", &[v, d], w, rng)?;
        let pos_emb = var(&root, "pos_emb.weight", &[cfg.max_len, d], w, rng)?;
        let blocks_path = root.sub("blocks");
        let block_cfg = block_config(cfg)?;
        let blocks = (0..cfg.n_layers)
            .map(|i| Ok(TransformerBlock::new(&blocks_path.sub(i), &block_cfg, rng)?))
            .collect::<Result<Vec<_>>>()?;
        let ln_f = LayerNorm::new(&root, "ln_f", d, cfg.layer_norm_eps, rng)?;
        let head = if cfg.tie_embeddings { None } else { Some(var(&root, "lm_head.weight", &[v, d], w, rng)?) };
        Ok(Self { cfg: cfg.clone(), vs, tok_emb, pos_emb, blocks, ln_f, head })
    }

    /// The model's configuration.
    pub fn config(&self) -> &LmConfig {
        &self.cfg
    }
    /// The device holding the parameters.
    pub fn device(&self) -> Device {
        self.vs.device()
    }
    /// The variable store (build optimizers on it).
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }
    /// The variable store, mutably (freeze, copy weights between models).
    pub fn var_store_mut(&mut self) -> &mut VarStore {
        &mut self.vs
    }
    /// Total number of parameters.
    pub fn num_parameters(&self) -> i64 {
        self.vs.variables().values().map(Tensor::numel).map(|n| n as i64).sum()
    }

    /// An empty KV cache for a batch of `batch` rows.
    pub fn new_cache(&self, batch: i64) -> KvCache {
        KvCache { batch, len: 0, keys: Vec::new(), values: Vec::new(), mask: None, count: None }
    }

    /// Logits `[B, T, vocab]` of a batch of token ids `[B, T]` (int64, on any device), with
    /// gradient unless called under `tch::no_grad`.
    ///
    /// `attention_mask` (`[B, T]`, 1 = real token, 0 = padding; any numeric kind) defaults to all
    /// ones. Padding may be on either side: masked tokens are never attended to, and positions
    /// count only real tokens. Logits at masked positions are meaningless.
    ///
    /// # Errors
    /// [`LmError::EmptyBatch`], [`LmError::Shape`] (rank, kind, mask shape),
    /// [`LmError::SequenceTooLong`] when `T > max_len`, [`LmError::TokenOutOfRange`].
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let (ids, mask) = self.check_inputs(input_ids, attention_mask, 0)?;
        let t = ids.size()[1];
        let positions = (mask.f_cumsum(1, Kind::Int64)? - 1).f_clamp_min(0)?;
        let bias = self.attention_bias(&mask, t, t)?;
        let (logits, _) = self.run(&ids, &positions, &bias, None)?;
        Ok(logits)
    }

    /// Logits `[B, S, vocab]` of `S` new tokens per row given everything already in `cache`,
    /// appending their keys and values to it.
    ///
    /// Feeding a sequence in pieces (a prompt, then one token at a time) gives the same logits
    /// as [`forward`](Self::forward) on the whole sequence with the concatenated mask (tested to
    /// 1e-5). `attention_mask` (`[B, S]`) marks the new tokens as real (1) or padding (0).
    ///
    /// # Errors
    /// As [`forward`](Self::forward); [`LmError::Shape`] when `B` differs from the cache's
    /// batch size; [`LmError::SequenceTooLong`] when the cache would exceed `max_len`. On error
    /// the cache is unchanged.
    pub fn forward_cached(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (ids, mask) = self.check_inputs(input_ids, attention_mask, cache.len)?;
        let (b, s) = (ids.size()[0], ids.size()[1]);
        if b != cache.batch {
            return Err(LmError::Shape {
                what: "input_ids (vs cache)".into(),
                expected: format!("[{}, S] (the cache's batch size)", cache.batch),
                got: ids.size(),
            });
        }
        let count = match &cache.count {
            Some(c) => c.shallow_clone(),
            None => Tensor::f_zeros([b, 1], (Kind::Int64, ids.device()))?,
        };
        let positions = (mask.f_cumsum(1, Kind::Int64)? + &count - 1).f_clamp_min(0)?;
        let full_mask = match &cache.mask {
            Some(m) => Tensor::f_cat(&[m, &mask], 1)?,
            None => mask.shallow_clone(),
        };
        let k_len = cache.len + s;
        let bias = self.attention_bias(&full_mask, s, k_len)?;
        let past = if cache.keys.is_empty() { None } else { Some((&cache.keys[..], &cache.values[..])) };
        let (logits, new_kv) = self.run(&ids, &positions, &bias, past)?;
        let new_count = count + mask.f_sum_dim_intlist(1, true, Kind::Int64)?;
        // Commit only after everything succeeded.
        let (keys, values): (Vec<Tensor>, Vec<Tensor>) = new_kv.into_iter().unzip();
        cache.keys = keys;
        cache.values = values;
        cache.mask = Some(full_mask);
        cache.count = Some(new_count);
        cache.len = k_len;
        Ok(logits)
    }

    /// Validates ids/mask; returns int64 ids and a float mask on the model's device.
    fn check_inputs(&self, ids: &Tensor, mask: Option<&Tensor>, offset: i64) -> Result<(Tensor, Tensor)> {
        let size = ids.size();
        if size.len() != 2 {
            return Err(LmError::Shape { what: "input_ids".into(), expected: "[B, T]".into(), got: size });
        }
        let (b, t) = (size[0], size[1]);
        if b == 0 {
            return Err(LmError::EmptyBatch);
        }
        if t == 0 {
            return Err(LmError::EmptySequence { row: 0 });
        }
        if offset + t > self.cfg.max_len {
            return Err(LmError::SequenceTooLong { len: offset + t, max_len: self.cfg.max_len });
        }
        match ids.kind() {
            Kind::Int64 | Kind::Int | Kind::Int16 | Kind::Int8 | Kind::Uint8 => {}
            other => {
                return Err(LmError::Shape {
                    what: format!("input_ids (kind {other:?})"),
                    expected: "an integer tensor".into(),
                    got: size,
                })
            }
        }
        let device = self.device();
        let ids = ids.f_to_kind(Kind::Int64)?.f_to_device(device)?;
        check_token_range(&ids, self.cfg.vocab_size)?;
        let mask = match mask {
            Some(m) => {
                if m.size() != [b, t] {
                    return Err(LmError::Shape {
                        what: "attention_mask".into(),
                        expected: format!("[{b}, {t}] (as input_ids)"),
                        got: m.size(),
                    });
                }
                m.f_to_device(device)?.f_to_kind(Kind::Float)?
            }
            None => Tensor::f_ones([b, t], (Kind::Float, device))?,
        };
        Ok((ids, mask))
    }

    /// `[B, 1, S, K]` additive bias: causal (query i sits at absolute index K - S + i) plus
    /// key padding from `key_mask` `[B, K]`.
    fn attention_bias(&self, key_mask: &Tensor, s: i64, k: i64) -> Result<Tensor> {
        let device = key_mask.device();
        let causal = Tensor::f_ones([s, k], (Kind::Float, device))?.f_tril(k - s)?;
        let causal_bias = ((causal - 1.0) * (-MASKED)).f_view([1, 1, s, k])?;
        let pad_bias = ((key_mask - 1.0) * (-MASKED)).f_view([-1, 1, 1, k])?;
        Ok(causal_bias + pad_bias)
    }

    /// The transformer proper. `past` holds per-layer cached keys/values; returns the logits and
    /// the per-layer keys/values including the new tokens.
    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        bias: &Tensor,
        past: Option<(&[Tensor], &[Tensor])>,
    ) -> Result<(Tensor, Vec<(Tensor, Tensor)>)> {
        let mut x = Tensor::f_embedding(&self.tok_emb, ids, -1, false, false)?
            + Tensor::f_embedding(&self.pos_emb, positions, -1, false, false)?;
        let mut kv = Vec::with_capacity(self.blocks.len());
        for (i, blk) in self.blocks.iter().enumerate() {
            let layer_past = match past {
                Some((pk, pv)) => match (pk.get(i), pv.get(i)) {
                    (Some(k), Some(v)) => Some((k, v)),
                    _ => {
                        return Err(LmError::Shape {
                            what: "KV cache (layers)".into(),
                            expected: format!("{} layers", self.blocks.len()),
                            got: vec![pk.len() as i64, pv.len() as i64],
                        })
                    }
                },
                None => None,
            };
            let out = blk.forward(&x, bias, layer_past, None)?;
            x = out.hidden;
            kv.push((out.keys, out.values));
        }
        let x = self.ln_f.forward(&x)?;
        let head = self.head.as_ref().unwrap_or(&self.tok_emb);
        let logits = x.f_linear::<Tensor>(head, None)?;
        Ok((logits, kv))
    }
}

/// Errors with the first id outside `[0, vocab)` of an int64 `[B, T]` tensor.
pub(crate) fn check_token_range(ids: &Tensor, vocab: i64) -> Result<()> {
    let bad = ids.f_lt(0)?.f_logical_or(&ids.f_ge(vocab)?)?;
    if bad.f_any()?.f_int64_value(&[])? == 0 {
        return Ok(());
    }
    let t = ids.size()[1];
    let flat = bad.f_flatten(0, -1)?.f_to_kind(Kind::Int64)?.f_argmax(0, false)?.f_int64_value(&[])?;
    let (row, position) = (flat / t, flat % t);
    let id = ids.f_int64_value(&[row, position])?;
    Err(LmError::TokenOutOfRange { row: row as usize, position: position as usize, id, vocab_size: vocab })
}
