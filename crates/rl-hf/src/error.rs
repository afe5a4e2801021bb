//! The error type of `rl-hf`.

/// Errors returned by `rl-hf`. Every variant names the file, field or tensor at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HfError {
    /// `config.json` has a `model_type` this crate does not implement.
    #[error("{path}: model_type `{model_type}` is not supported (supported: qwen2, qwen3, llama)")]
    UnknownModelType {
        /// The config file.
        path: String,
        /// The value found.
        model_type: String,
    },
    /// `config.json` has a field (or a value of a field) that would change the model in a way
    /// this crate does not implement. It is never ignored.
    #[error("{path}: unsupported field `{field}` = {value}: {reason}")]
    UnsupportedField {
        /// The config file.
        path: String,
        /// The field, dotted for nested ones (`rope_parameters.rope_type`).
        field: String,
        /// Its value, as JSON.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A required field of `config.json` is absent.
    #[error("{path}: missing field `{field}`")]
    MissingField {
        /// The config file.
        path: String,
        /// The field.
        field: String,
    },
    /// A field of `config.json` has the wrong type or is out of range.
    #[error("{path}: invalid field `{field}` = {value}: {reason}")]
    InvalidField {
        /// The config file.
        path: String,
        /// The field.
        field: String,
        /// Its value, as JSON.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A file the model directory must contain is absent.
    #[error("missing file {path}")]
    MissingFile {
        /// The path looked for.
        path: String,
    },
    /// A safetensors file or a shard index is not valid (header, offsets, JSON).
    #[error("corrupt file {path}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor the config requires is in no weights file.
    #[error("{path}: missing tensor `{name}`")]
    MissingTensor {
        /// The model directory.
        path: String,
        /// The tensor name (first missing one, sorted).
        name: String,
    },
    /// Tensors in the weights files that the config does not use.
    #[error("{path}: unexpected tensors {names:?}")]
    UnexpectedTensors {
        /// The model directory.
        path: String,
        /// All unexpected names, sorted.
        names: Vec<String>,
    },
    /// A tensor has another shape than the config implies.
    #[error("{path}: tensor `{name}` has shape {got:?}, expected {expected:?}")]
    TensorShape {
        /// The weights file.
        path: String,
        /// The tensor name.
        name: String,
        /// The shape the config implies.
        expected: Vec<i64>,
        /// The shape in the file.
        got: Vec<i64>,
    },
    /// A tensor is stored in a dtype other than F32, BF16 or F16.
    #[error("{path}: tensor `{name}` has dtype {dtype}, expected F32, BF16 or F16")]
    TensorDtype {
        /// The weights file.
        path: String,
        /// The tensor name.
        name: String,
        /// The dtype found.
        dtype: String,
    },
    /// A parameter passed by the caller is invalid.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: String,
        /// Value, formatted.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A tensor passed by the caller has the wrong rank, shape, kind or device.
    #[error("`{what}`: expected {expected}, got {got}")]
    Input {
        /// Which argument.
        what: String,
        /// What was expected.
        expected: String,
        /// What was passed.
        got: String,
    },
    /// A token id is negative or not below the vocabulary size.
    #[error("token id {id} at row {row}, position {position} is outside the vocabulary [0, {vocab_size})")]
    TokenOutOfRange {
        /// Row of the batch.
        row: i64,
        /// Position in the row.
        position: i64,
        /// The offending id.
        id: i64,
        /// The model's vocabulary size.
        vocab_size: i64,
    },
    /// The tokenizer failed on an input (encode or decode).
    #[error("tokenizer: {reason}")]
    Tokenizer {
        /// The tokenizer's message.
        reason: String,
    },
    /// The chat template is absent, does not compile, or failed while rendering (including a
    /// template's own `raise_exception(message)`).
    #[error("chat template: {reason}")]
    ChatTemplate {
        /// What failed.
        reason: String,
    },
    /// An error from `rl-nn` (devices).
    #[error(transparent)]
    Nn(#[from] rl_nn::RlNnError),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// I/O failure.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON serialisation failure.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// `Result` with [`HfError`].
pub type Result<T, E = HfError> = std::result::Result<T, E>;

pub(crate) fn input_err(what: &str, expected: impl ToString, got: impl ToString) -> HfError {
    HfError::Input { what: what.to_owned(), expected: expected.to_string(), got: got.to_string() }
}
