//! Safetensors checkpoints and loading weights by name.

use std::collections::BTreeMap;
use std::path::Path;

use rl_nn::checkpoint::{read_tensors, LoadMode};
use rl_nn::RlNnError;
use serde::{Deserialize, Serialize};
use tch::{Device, Tensor};

use crate::config::LmConfig;
use crate::error::Result;
use crate::model::TransformerLm;

/// File name of the weights written by [`TransformerLm::save_pretrained`].
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// File name of the config written by [`TransformerLm::save_pretrained`].
pub const CONFIG_FILE: &str = "config.json";

/// How [`TransformerLm::load_weights`] maps file tensors to model variables.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `prefix` | `""` | a file tensor `prefix + name` fills the model variable `name` (e.g. `"policy."`) |
/// | `mode` | `Strict` | `Strict`: tensors in the file that fill no variable are an error; `AllowExtra`: ignored |
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WeightLoad {
    /// Name prefix of the model's tensors in the file.
    pub prefix: String,
    /// Whether extra tensors are allowed.
    #[serde(with = "mode_serde")]
    pub mode: LoadMode,
}

mod mode_serde {
    use rl_nn::checkpoint::LoadMode;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(m: &LoadMode, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if *m == LoadMode::Strict { "strict" } else { "allow_extra" })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LoadMode, D::Error> {
        match String::deserialize(d)?.as_str() {
            "strict" => Ok(LoadMode::Strict),
            "allow_extra" => Ok(LoadMode::AllowExtra),
            other => Err(serde::de::Error::unknown_variant(other, &["strict", "allow_extra"])),
        }
    }
}

impl TransformerLm {
    /// Writes every parameter to a safetensors file (via [`rl_nn::checkpoint::save`]), under
    /// the names listed on [`TransformerLm`].
    ///
    /// # Errors
    /// I/O or libtorch failures.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        rl_nn::checkpoint::save(self.var_store(), path)?;
        Ok(())
    }

    /// Loads a file written by [`save`](Self::save) for the same architecture (strict: every
    /// variable present with its shape, nothing extra).
    ///
    /// # Errors
    /// [`LmError::Nn`](crate::LmError::Nn) wrapping [`RlNnError::MissingTensor`], [`RlNnError::TensorShape`],
    /// [`RlNnError::UnexpectedTensors`], [`RlNnError::MissingFile`], [`RlNnError::CorruptCheckpoint`] or
    /// [`RlNnError::NonFiniteTensor`] (a NaN or infinite value, with the tensor named); on error no
    /// parameter has been modified.
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        rl_nn::checkpoint::load(self.var_store(), path, LoadMode::Strict)?;
        Ok(())
    }

    /// Loads weights by name from any safetensors file: the tensor `opts.prefix + name` fills
    /// the variable `name`, converted to the variable's kind and device.
    ///
    /// Everything is checked before anything is copied, so a failed load leaves the model
    /// untouched.
    ///
    /// ```
    /// use rl_lm::{LmConfig, TransformerLm, WeightLoad};
    /// let dir = tempfile::tempdir()?;
    /// let file = dir.path().join("m.safetensors");
    /// let cfg = LmConfig::new(16, 16).d_model(16).n_layers(1).n_heads(2).d_ff(32);
    /// let a = TransformerLm::new(&cfg, tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// a.save(&file)?;
    /// let mut b = TransformerLm::new(&cfg, tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// b.load_weights(&file, &WeightLoad::default())?;
    /// // A model with another width is refused with the offending tensor named.
    /// let mut c = TransformerLm::new(&cfg.clone().d_model(32), tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// assert!(c.load_weights(&file, &WeightLoad::default()).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`LmError::Nn`](crate::LmError::Nn) wrapping [`RlNnError::MissingTensor`] (first missing name, sorted),
    /// [`RlNnError::TensorShape`], [`RlNnError::UnexpectedTensors`] (strict mode; all extra
    /// names, sorted), [`RlNnError::MissingFile`], [`RlNnError::CorruptCheckpoint`] or
    /// [`RlNnError::NonFiniteTensor`] (any floating-point tensor of the file, used or not, with
    /// a NaN or an infinity: refused by [`read_tensors`], naming it).
    pub fn load_weights(&mut self, path: impl AsRef<Path>, opts: &WeightLoad) -> Result<()> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = read_tensors(path)?;
        let vars: BTreeMap<String, Tensor> = self.var_store().variables().into_iter().collect();
        let mut matched: BTreeMap<&str, &Tensor> = BTreeMap::new();
        for (name, var) in &vars {
            let key = format!("{}{name}", opts.prefix);
            let t =
                file.get(&key).ok_or_else(|| RlNnError::MissingTensor { path: shown.clone(), name: key.clone() })?;
            if t.size() != var.size() {
                return Err(RlNnError::TensorShape {
                    path: shown.clone(),
                    name: key,
                    expected: var.size(),
                    got: t.size(),
                }
                .into());
            }
            matched.insert(name, t);
        }
        if opts.mode == LoadMode::Strict {
            let extra: Vec<String> = file
                .keys()
                .filter(|k| k.strip_prefix(&opts.prefix).is_none_or(|n| !vars.contains_key(n)))
                .cloned()
                .collect();
            if !extra.is_empty() {
                return Err(RlNnError::UnexpectedTensors { path: shown, names: extra }.into());
            }
        }
        tch::no_grad(|| -> Result<()> {
            for (name, var) in &vars {
                if let Some(t) = matched.get(name.as_str()) {
                    let mut v = var.shallow_clone();
                    v.f_copy_(&t.f_to_kind(var.kind())?.f_to_device(var.device())?)?;
                }
            }
            Ok(())
        })
    }

    /// Writes `config.json` and `model.safetensors` into `dir` (created if needed).
    ///
    /// # Errors
    /// I/O, JSON or libtorch failures.
    pub fn save_pretrained(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(CONFIG_FILE), serde_json::to_string_pretty(self.config())?)?;
        self.save(dir.join(WEIGHTS_FILE))
    }

    /// Builds a model from a directory written by [`save_pretrained`](Self::save_pretrained),
    /// on `device`.
    ///
    /// ```
    /// use rl_lm::{LmConfig, TransformerLm};
    /// let dir = tempfile::tempdir()?;
    /// let lm = TransformerLm::new(&LmConfig::new(16, 16).d_model(16).n_layers(1), tch::Device::Cpu, &mut rl_core::rng_from_seed(0))?;
    /// lm.save_pretrained(dir.path())?;
    /// let back = TransformerLm::from_pretrained(dir.path(), tch::Device::Cpu)?;
    /// assert_eq!(back.config(), lm.config());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// I/O and JSON errors for `config.json`, [`LmError::InvalidConfig`](crate::LmError::InvalidConfig), and the errors of
    /// [`load`](Self::load).
    pub fn from_pretrained(dir: impl AsRef<Path>, device: Device) -> Result<Self> {
        let dir = dir.as_ref();
        let cfg: LmConfig = serde_json::from_str(&std::fs::read_to_string(dir.join(CONFIG_FILE))?)?;
        // Weights are overwritten by the file: any generator will do.
        let mut lm = Self::new(&cfg, device, &mut rl_core::rng_from_seed(0))?;
        lm.load(dir.join(WEIGHTS_FILE))?;
        Ok(lm)
    }
}
