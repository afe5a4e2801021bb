//! Element-wise activation functions, shared by the layers ([`crate::mlp`]) and the
//! initialisers' gains ([`crate::init::calculate_gain`]).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::Result;

/// Element-wise activation functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// `x`.
    Identity,
    /// `max(x, 0)`.
    #[default]
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// Gaussian error linear unit (exact erf form).
    Gelu,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x` for `x > 0`, `exp(x) - 1` otherwise.
    Elu,
    /// `x` for `x > 0`, `0.01 x` otherwise.
    LeakyRelu,
}

impl Activation {
    /// Applies the activation.
    ///
    /// # Errors
    /// libtorch failures (e.g. an integer tensor).
    pub fn f_apply(self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Activation::Identity => x.shallow_clone(),
            Activation::Relu => x.f_relu()?,
            Activation::Tanh => x.f_tanh()?,
            Activation::Sigmoid => x.f_sigmoid()?,
            Activation::Gelu => x.f_gelu("none")?,
            Activation::Silu => x.f_silu()?,
            Activation::Mish => x.f_mish()?,
            Activation::Elu => x.f_elu()?,
            Activation::LeakyRelu => x.f_leaky_relu()?,
        })
    }
}
