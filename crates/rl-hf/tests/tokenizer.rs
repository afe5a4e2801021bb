//! The fixture tokenizer (byte-level BPE trained by `scripts/hf_fixtures.py`) against
//! transformers' `PreTrainedTokenizerFast` (tokenizers 0.23.3 in Python).

use std::path::PathBuf;

use rl_hf::{ChatMessage, HfError, HfTokenizer};
use tch::Device;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer")
}

fn reference() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("reference.json")).unwrap()).unwrap()
}

#[test]
fn encode_and_decode_match_transformers() {
    let tok = HfTokenizer::from_dir(dir()).unwrap();
    let r = reference();
    assert_eq!(tok.vocab_size(), r["vocab_size"].as_i64().unwrap());
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for c in cases {
        let text = c["text"].as_str().unwrap();
        let want: Vec<i64> = c["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        let ids = tok.encode(text, false).unwrap();
        assert_eq!(ids, want, "{text:?}");
        assert_eq!(tok.decode(&ids, false).unwrap(), c["decoded"].as_str().unwrap(), "{text:?}");
        assert_eq!(tok.decode(&ids, true).unwrap(), c["decoded_skip_special"].as_str().unwrap(), "{text:?}");
    }
}

#[test]
fn special_tokens_and_chat_template_are_read() {
    let tok = HfTokenizer::from_dir(dir()).unwrap();
    let r = reference();
    let sp = &r["special_tokens"];
    assert_eq!(tok.eos(), Some(("<|im_end|>", sp["<|im_end|>"].as_i64().unwrap())));
    assert_eq!(tok.pad(), Some(("<|endoftext|>", sp["<|endoftext|>"].as_i64().unwrap())));
    assert_eq!(tok.bos(), None);
    assert_eq!(tok.token_to_id("<|im_start|>"), sp["<|im_start|>"].as_i64());
    let tpl = std::fs::read_to_string(dir().join("chat_template.jinja")).unwrap();
    assert_eq!(tok.chat_template(), Some(tpl.as_str()));
    assert!(tpl.contains("add_generation_prompt"));
}

#[test]
fn left_padded_batch_uses_the_pad_token() {
    let tok = HfTokenizer::from_dir(dir()).unwrap();
    let (ids, mask) = tok.encode_left_padded(&["The answer is 7.", "12+30=42."], 99, Device::Cpu).unwrap();
    let a = tok.encode("The answer is 7.", false).unwrap();
    let b = tok.encode("12+30=42.", false).unwrap();
    let t = a.len().max(b.len()) as i64;
    assert_eq!(ids.size(), [2, t]);
    let row1: Vec<i64> = Vec::try_from(ids.get(1)).unwrap();
    let pad = (t as usize) - b.len();
    assert!(row1[..pad].iter().all(|&x| x == 0), "pad token <|endoftext|> is id 0");
    assert_eq!(&row1[pad..], &b[..]);
    assert_eq!(mask.sum(tch::Kind::Int64).int64_value(&[]), (a.len() + b.len()) as i64);
}

#[test]
fn bad_tokenizer_inputs_are_typed_errors() {
    let tok = HfTokenizer::from_dir(dir()).unwrap();
    let v = tok.vocab_size();
    assert!(matches!(tok.decode(&[1, v], false), Err(HfError::TokenOutOfRange { position: 1, .. })));
    assert!(matches!(tok.decode(&[-1], false), Err(HfError::TokenOutOfRange { position: 0, .. })));
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(HfTokenizer::from_dir(empty.path()), Err(HfError::MissingFile { .. })));
    std::fs::write(empty.path().join("tokenizer.json"), "{\"model\": 3}").unwrap();
    assert!(matches!(HfTokenizer::from_dir(empty.path()), Err(HfError::Corrupt { .. })));
    // A special token that is not in the vocabulary.
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(dir().join("tokenizer.json"), d.path().join("tokenizer.json")).unwrap();
    std::fs::write(d.path().join("tokenizer_config.json"), r#"{"eos_token": "</s>"}"#).unwrap();
    assert!(matches!(HfTokenizer::from_dir(d.path()), Err(HfError::Corrupt { .. })));
    std::fs::write(
        d.path().join("tokenizer_config.json"),
        r#"{"eos_token": {"content": "<|im_end|>"}, "chat_template": "x"}"#,
    )
    .unwrap();
    let t = HfTokenizer::from_dir(d.path()).unwrap();
    assert_eq!((t.eos().map(|e| e.1), t.chat_template()), (tok.eos().map(|e| e.1), Some("x")));
}

#[test]
fn chat_template_renders_as_transformers() {
    let tok = HfTokenizer::from_dir(dir()).unwrap();
    let r = reference();
    let chat = &r["chat"];
    let messages = chat["messages"].as_array().unwrap();
    let out = tok.apply_chat_template(messages, chat["add_generation_prompt"].as_bool().unwrap()).unwrap();
    assert_eq!(out, chat["rendered"].as_str().unwrap());
    let without = tok.apply_chat_template(messages, false).unwrap();
    assert_eq!(format!("{without}<|im_start|>assistant\n"), out);
}

#[test]
fn chat_template_errors_are_typed() {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(dir().join("tokenizer.json"), d.path().join("tokenizer.json")).unwrap();
    let msgs = [serde_json::json!({"role": "user", "content": "hi"})];
    let none = HfTokenizer::from_dir(d.path()).unwrap();
    assert!(matches!(none.apply_chat_template(&msgs, true), Err(HfError::ChatTemplate { .. })));
    let tpl =
        "{% for m in messages %}{% if m.role == 'user' %}{{ raise_exception('no users here') }}{% endif %}{% endfor %}";
    std::fs::write(d.path().join("chat_template.jinja"), tpl).unwrap();
    let t = HfTokenizer::from_dir(d.path()).unwrap();
    match t.apply_chat_template(&msgs, true) {
        Err(HfError::ChatTemplate { reason }) => assert!(reason.contains("no users here"), "{reason}"),
        other => panic!("{other:?}"),
    }
    std::fs::write(d.path().join("chat_template.jinja"), "{% for %}").unwrap();
    let t = HfTokenizer::from_dir(d.path()).unwrap();
    assert!(matches!(t.apply_chat_template(&msgs, true), Err(HfError::ChatTemplate { .. })));
    // tojson, loop controls and trim/lstrip blocks as transformers sets them.
    let tpl = "{% for m in messages %}\n  {% if loop.index > 1 %}{% break %}{% endif %}\n{{ m | tojson }}{% endfor %}{{ eos_token }}";
    std::fs::write(d.path().join("chat_template.jinja"), tpl).unwrap();
    std::fs::write(d.path().join("tokenizer_config.json"), r#"{"eos_token": "<|im_end|>"}"#).unwrap();
    let t = HfTokenizer::from_dir(d.path()).unwrap();
    let two = [ChatMessage::new("user", "hi"), ChatMessage::new("assistant", "x")];
    let out = t.apply_chat_template(&two, false).unwrap();
    // Python's json.dumps of {"role": "user", "content": "hi"}.
    assert_eq!(out, "{\"role\": \"user\", \"content\": \"hi\"}<|im_end|>");
}
