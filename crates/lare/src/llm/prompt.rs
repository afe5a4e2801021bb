//! The prompts: LaRe's structure (task description, observation form, role instruction; a
//! summarising turn; an error turn), worded here for Rhai encoders.
//!
//! LaRe (`thu-rllab/LaRe:mujoco/reward_model/prompt_template.py`, `chat_with_gpt.py`) sends one
//! user message `TASK: …\nOBSERVATION FORM: …\nROLE INSTRUCTION: …`, asks for a JSON answer with
//! the keys Understand, Analyze and Functions, then — with several candidates — asks the model
//! to summarise them into one function, and feeds execution errors back as
//! `There is an error in your previous answer. Error: …`. The texts below follow that
//! structure in our own words. Differences (documented in `docs/lare.md`): the function is
//! Rhai for one step instead of numpy for a batch (with a short syntax primer); the
//! observation form lists named fields; an `ACTION FORM` is included by default (LaRe's
//! template defines one but does not send it: `include_action_form = false` reproduces that).

use serde::{Deserialize, Serialize};

use crate::encoder::{Layout, StateSource};
use crate::script::ENTRY_POINT;

/// What the model is asked to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum PromptMode {
    /// Several latent reward factors (LaRe).
    #[default]
    Factors,
    /// One reward value (LaRe's `--direct_generate` ablation).
    Direct,
}

/// A task as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPrompt {
    /// Task identifier (e.g. `Pendulum-v1`).
    pub task: String,
    /// What the agent must achieve and what is rewarded (LaRe's hand-written descriptions).
    pub description: String,
    /// The observation's named fields.
    pub obs_layout: Layout,
    /// What the action is.
    pub action_description: String,
    /// Action width.
    pub act_dim: usize,
    /// Which state the function receives as `obs`.
    pub state_source: StateSource,
    /// Factors or a direct reward.
    pub mode: PromptMode,
    /// Send the `ACTION FORM` line (LaRe's template has it but does not send it).
    pub include_action_form: bool,
}

/// The Rhai primer appended to the role instruction.
pub const RHAI_PRIMER: &str = "RHAI IN BRIEF: `let x = 1.0;` declares a variable; integers and \
floats mix freely in arithmetic. Arrays: `[a, b]`, `arr[i]`, `arr.len()`, `arr.push(x)`. Control: \
`if c { .. } else { .. }`, `for i in 0..n { .. }`, `while c { .. }`. Functions: `fn name(a, b) { .. }`; \
a function cannot read variables declared outside it, and its last expression (or `return x;`) is \
its value. Maps: `obs.field`. Math: abs, sqrt, sin, cos, tan, atan(y, x), exp, ln, floor, ceil, \
min(a, b), max(a, b). Helpers: norm(arr), dot(a, b), sum(arr), mean(arr), clip(x, lo, hi), \
dist2d(x1, y1, x2, y2), safe_div(a, b) (0 when b is 0), sq(x). There is no I/O, no import and \
no eval; runaway loops are stopped.";

/// The summarising turn after several candidates.
pub const SUMMARY_INSTRUCTION: &str = "You have written several evaluation functions. Combine them into one \
new evaluation function that covers all of their evaluation factors, and add any other important \
factor you see. Answer with the same JSON format.";

/// The error turn (LaRe's wording, followed by the error message).
pub fn error_message(error: &str) -> String {
    format!("There is an error in your previous answer. Error: {error}")
}

impl TaskPrompt {
    /// The observation form: the fields and their meaning.
    pub fn observation_form(&self) -> String {
        let which = match self.state_source {
            StateSource::Current => "the current observation",
            StateSource::Next => "the observation reached after the step",
        };
        format!(
            "The function receives {which} as `obs`, a map of {} named fields ({} numbers in all):\n{}",
            self.obs_layout.fields.len(),
            self.obs_layout.dim,
            self.obs_layout.describe()
        )
    }

    /// The role instruction.
    pub fn role_instruction(&self) -> String {
        let (what, returns) = match self.mode {
            PromptMode::Factors => (
                "an evaluation function that returns several factors, each scoring the current status from one aspect",
                "an array of numbers, one per factor, always the same number of factors",
            ),
            PromptMode::Direct => {
                ("a reward function that scores the current status", "an array with exactly one number, the reward")
            }
        };
        format!(
            "ROLE INSTRUCTION: You understand control tasks well and write correct code. First describe the exact \
observation and action form of this task. Then, guided by its goal, reason step by step about which good and bad \
behaviours or statuses can be read from the observation and the action. Finally write {what}.\n\
Rules: 1. Use only the information given above. 2. Keep to the most relevant factors and read as few observation \
entries as you can. 3. The code must be general and complete, with nothing left out. 4. Never divide by zero (use \
safe_div). 5. Write the function in Rhai for ONE step: `fn {ENTRY_POINT}(obs, act)` receives `obs` as the map \
described above and `act` as an array of {} numbers, and returns {returns}.\n\
{RHAI_PRIMER}\n\
Answer with one JSON object and nothing else, with the keys \"understand\" (your reading of the task), \
\"analyze\" (your step-by-step analysis of positive and negative behaviours and where they show in the \
observation and action) and \"functions\" (the Rhai source as one string).",
            self.act_dim
        )
    }

    /// The first user message.
    pub fn user_message(&self) -> String {
        let mut s = format!("TASK: {}\nOBSERVATION FORM: {}\n", self.description, self.observation_form());
        if self.include_action_form {
            s.push_str(&format!("ACTION FORM: {}\n", self.action_description));
        }
        s.push_str(&self.role_instruction());
        s
    }
}

/// The parts of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The model's reading of the task.
    pub understand: String,
    /// Its analysis.
    pub analyze: String,
    /// The function source.
    pub functions: String,
}

fn strip_fences(s: &str) -> &str {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.split_once('\n').map_or("", |(_, r)| r);
        return rest.trim_end().strip_suffix("```").unwrap_or(rest).trim();
    }
    t
}

/// Reads an answer: a JSON object (possibly inside a code fence or surrounded by text) with a
/// `functions` key (any case; LaRe's is `Functions`) holding the source (fences stripped).
///
/// # Errors
/// A message for the model, in the words the repair turn sends back.
pub fn parse_answer(content: &str) -> std::result::Result<Answer, String> {
    let body = strip_fences(content);
    let (start, end) = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if b > a => (a, b),
        _ => return Err("The answer is not a JSON object.".into()),
    };
    let v: serde_json::Value =
        serde_json::from_str(&body[start..=end]).map_err(|e| format!("The answer is not valid JSON: {e}."))?;
    let obj = v.as_object().ok_or("The answer is not a JSON object.")?;
    let get = |key: &str| -> Option<String> {
        obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let functions = get("functions").ok_or("The JSON answer has no \"functions\" key with the Rhai source.")?;
    Ok(Answer {
        understand: get("understand").unwrap_or_default(),
        analyze: get("analyze").unwrap_or_default(),
        functions: strip_fences(&functions).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> TaskPrompt {
        TaskPrompt {
            task: "Pendulum-v1".into(),
            description: "Swing up.".into(),
            obs_layout: Layout::new().scalar("cos_theta", "cosine of the angle"),
            action_description: "torque".into(),
            act_dim: 1,
            state_source: StateSource::Current,
            mode: PromptMode::Factors,
            include_action_form: true,
        }
    }

    #[test]
    fn message_has_lares_structure() {
        let m = prompt().user_message();
        assert!(m.starts_with("TASK: Swing up.\nOBSERVATION FORM: "));
        assert!(m.contains("`cos_theta` (number, index 0): cosine of the angle"));
        assert!(m.contains("ACTION FORM: torque\nROLE INSTRUCTION: "));
        assert!(m.contains("fn evaluation_func(obs, act)"));
        let mut p = prompt();
        p.include_action_form = false;
        p.mode = PromptMode::Direct;
        let m = p.user_message();
        assert!(!m.contains("ACTION FORM"));
        assert!(m.contains("exactly one number"));
        assert_eq!(error_message("boom"), "There is an error in your previous answer. Error: boom");
    }

    #[test]
    fn answers_parse_leniently_and_fail_with_messages() {
        let a = parse_answer(
            "```json\n{\"Understand\": \"u\", \"Analyze\": \"a\", \"Functions\": \"```rhai\\nfn f() {}\\n```\"}\n```",
        )
        .unwrap();
        assert_eq!((a.understand.as_str(), a.functions.as_str()), ("u", "fn f() {}"));
        let b = parse_answer("Sure! {\"functions\": \"x\"} Hope it helps.").unwrap();
        assert_eq!(b.functions, "x");
        assert!(parse_answer("no json").unwrap_err().contains("not a JSON object"));
        assert!(parse_answer("{\"understand\": 1}").unwrap_err().contains("functions"));
        assert!(parse_answer("{bad json}").unwrap_err().contains("not valid JSON"));
    }
}
