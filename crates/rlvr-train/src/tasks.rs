//! The training and held-out prompt pools, tokenized once, with the solver's solutions for the
//! warm start.

use rlvr_tasks::{CharTokenizer, MalformedReason, Outcome, PoolRequest, PromptPool, RewardParams, Task, Verdict};

use crate::policy::Policy;

use crate::config::TaskConfig;
use crate::error::{Result, TrainError};

/// One side of the task set: prompts with their token ids.
#[derive(Debug, Clone)]
pub struct PoolSide {
    pool: PromptPool,
    tokens: Vec<Vec<i64>>,
}

impl PoolSide {
    fn new(pool: PromptPool, tok: &CharTokenizer) -> Result<Self> {
        let tokens = pool.iter().map(|p| p.encode(tok)).collect::<rlvr_tasks::Result<Vec<_>>>()?;
        Ok(Self { pool, tokens })
    }

    /// Number of prompts.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the side is empty.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The pool.
    pub fn pool(&self) -> &PromptPool {
        &self.pool
    }

    /// `<bos>` + prompt tokens of the prompt at `index`.
    pub fn tokens(&self, index: usize) -> Option<&[i64]> {
        self.tokens.get(index).map(Vec::as_slice)
    }

    /// The task at `index`.
    pub fn task(&self, index: usize) -> Option<&Task> {
        self.pool.prompts().get(index).map(|p| &p.task)
    }

    /// The difficulty level at `index`.
    pub fn level(&self, index: usize) -> Option<usize> {
        self.pool.prompts().get(index).map(|p| p.level)
    }

    /// `"<family>/<level>"` of the prompt at `index` (`"countdown/2"`, `"arithmetic/1"`): the
    /// key of per-level figures.
    pub fn level_label(&self, index: usize) -> Option<String> {
        self.pool.prompts().get(index).map(level_label)
    }
}

/// Training pool (ids `0..n`, which are also indices) and held-out pool, disjoint by
/// construction: no held-out problem appears in the training pool, not even with its numbers
/// reordered ([`rlvr_tasks::PromptKey`]).
#[derive(Debug, Clone)]
pub struct TaskSet {
    /// The tokenizer.
    pub tokenizer: CharTokenizer,
    /// Training prompts; prompt id = index.
    pub train: PoolSide,
    /// Held-out prompts: never trained on, and no training prompt poses one of their problems.
    pub eval: PoolSide,
    /// The reward of a verdict.
    pub rewards: RewardParams,
}

impl TaskSet {
    /// Generates both pools from the config: the held-out pool first (from `eval_seed`, an
    /// unbiased sample of the generator), then the training pool from the problems the
    /// held-out pool did not take ([`PromptPool::generate_disjoint`]).
    ///
    /// # Errors
    /// Generator parameters out of range; [`rlvr_tasks::TaskError::NotEnoughPrompts`] when the
    /// two pools ask a level for more distinct prompts than it can produce.
    pub fn new(cfg: &TaskConfig) -> Result<Self> {
        let tokenizer = CharTokenizer::new();
        // (params, train n, held-out params, held-out n) of the primary pool and each mixed one.
        let mut parts = vec![(
            cfg.pool.clone().first_id(0),
            cfg.train_prompts,
            cfg.pool.clone().first_id(0).seed(cfg.eval_seed),
            cfg.eval_prompts,
        )];
        for (j, m) in cfg.mix.iter().enumerate() {
            let eval_seed = rl_core::derive_seed(cfg.eval_seed, j as u64 + 1);
            parts.push((
                m.pool.clone().first_id(0),
                m.train_prompts,
                m.pool.clone().first_id(0).seed(eval_seed),
                m.eval_prompts,
            ));
        }
        // Every held-out pool first (unbiased samples of their generators), then the training ones.
        let mut requests: Vec<PoolRequest<'_>> =
            parts.iter().map(|(_, _, e, n)| PoolRequest { name: "held-out", params: e, n: *n }).collect();
        requests.extend(parts.iter().map(|(t, n, _, _)| PoolRequest { name: "train", params: t, n: *n }));
        let pools = PromptPool::generate_disjoint(&requests)?;
        let (evals, trains) = pools.split_at(parts.len());
        let concat = |ps: &[PromptPool]| {
            PromptPool::from_prompts(
                ps.iter()
                    .flat_map(|p| p.iter().cloned())
                    .enumerate()
                    .map(|(i, p)| rlvr_tasks::Prompt { id: i as u64, ..p })
                    .collect(),
            )
        };
        let (train, eval) = (concat(trains), concat(evals));
        Ok(Self {
            train: PoolSide::new(train, &tokenizer)?,
            eval: PoolSide::new(eval, &tokenizer)?,
            tokenizer,
            rewards: cfg.rewards,
        })
    }

    /// A task set of your own pools. Training prompts are renumbered `0..n` (their position:
    /// the ids the selectors see); held-out prompts keep their ids.
    ///
    /// # Errors
    /// [`TrainError::InvalidConfig`] (`tasks.train` / `tasks.eval`) for an empty pool or a pool
    /// that repeats a problem, and when a held-out problem is also a training problem (by
    /// [`rlvr_tasks::PromptKey`]); [`rlvr_tasks::TaskError::UnknownChar`] for text the
    /// tokenizer cannot encode.
    pub fn from_pools(train: PromptPool, eval: PromptPool, rewards: RewardParams) -> Result<Self> {
        for (name, pool) in [("tasks.train", &train), ("tasks.eval", &eval)] {
            if pool.is_empty() {
                return Err(crate::error::invalid(name, 0, "the pool is empty"));
            }
            let dup = pool.duplicates();
            if dup > 0 {
                return Err(crate::error::invalid(name, dup, "prompts repeat a problem of the same pool"));
            }
        }
        let shared = eval.overlap(&train);
        if shared > 0 {
            return Err(crate::error::invalid(
                "tasks.eval",
                shared,
                "held-out prompts pose problems of the training pool (by canonical form)",
            ));
        }
        rl_core::Params::validate(&rewards)?;
        let train = PromptPool::from_prompts(
            train
                .into_prompts()
                .into_iter()
                .enumerate()
                .map(|(i, p)| rlvr_tasks::Prompt { id: i as u64, ..p })
                .collect(),
        );
        let tokenizer = CharTokenizer::new();
        Ok(Self {
            train: PoolSide::new(train, &tokenizer)?,
            eval: PoolSide::new(eval, &tokenizer)?,
            tokenizer,
            rewards,
        })
    }

    /// Held-out prompts whose problem ([`rlvr_tasks::PromptKey`]) is also in the training
    /// pool: 0 by construction (the demo prints it next to the accuracy).
    pub fn overlap(&self) -> usize {
        self.eval.pool.overlap(&self.train.pool)
    }

    /// The training prompt with id `id` (its index).
    ///
    /// # Errors
    /// [`TrainError::UnknownPrompt`].
    pub fn train_index(&self, id: u64) -> Result<usize> {
        let n = self.train.len();
        usize::try_from(id).ok().filter(|&i| i < n).ok_or(TrainError::UnknownPrompt { id, n })
    }

    /// Judges a generated response of the character tokenizer (ids up to and including
    /// `<eos>`; a response without one is malformed and earns 0).
    pub fn judge(&self, task: &Task, response: &[i64]) -> Verdict {
        task.verify_tokens(&self.tokenizer, response, &self.rewards)
    }

    /// Judges a completion text, or the reason a generation has none
    /// ([`Policy::completion_text`](crate::Policy::completion_text)), which earns 0.
    pub fn judge_text(&self, task: &Task, text: std::result::Result<String, MalformedReason>) -> Verdict {
        match text {
            Ok(t) => task.verify(&t, &self.rewards),
            Err(reason) => Verdict::new(Outcome::Malformed(reason), &self.rewards),
        }
    }

    /// The same pools with every prompt encoded by `policy` ([`Policy::encode_prompt`]):
    /// what the trainer samples from (the pools of [`TaskSet::new`] are encoded with the
    /// character tokenizer, which `rl-lm`'s policy also uses).
    ///
    /// # Errors
    /// Prompt text the policy cannot encode.
    pub fn encoded_for(mut self, policy: &dyn Policy) -> Result<Self> {
        for side in [&mut self.train, &mut self.eval] {
            side.tokens = side.pool.iter().map(|p| policy.encode_prompt(&p.text())).collect::<Result<Vec<_>>>()?;
            if let Some(i) = side.tokens.iter().position(Vec::is_empty) {
                return Err(crate::error::invalid(
                    "policy.encode_prompt",
                    format!("prompt {i}"),
                    "encodes to no tokens",
                ));
            }
        }
        Ok(self)
    }

    /// The solver's solution of every training prompt, tokenized with `<eos>` by the
    /// character tokenizer (warm-start targets of `rl-lm`'s policy).
    ///
    /// # Errors
    /// [`TrainError::Unsolvable`] when the solver finds no solution (generated pools are
    /// solvable by construction).
    pub fn solutions(&self) -> Result<Vec<Vec<i64>>> {
        self.solution_texts()?.iter().map(|text| Ok(self.tokenizer.encode_completion(text)?)).collect()
    }

    /// The solver's solution text of every training prompt.
    ///
    /// # Errors
    /// [`TrainError::Unsolvable`] when the solver finds no solution.
    pub fn solution_texts(&self) -> Result<Vec<String>> {
        self.train
            .pool
            .iter()
            .map(|p| p.task.solve().map_err(|source| TrainError::Unsolvable { id: p.id, source }))
            .collect()
    }
}

/// `"<family>/<level>"` of a prompt.
pub(crate) fn level_label(p: &rlvr_tasks::Prompt) -> String {
    let family = match p.task.family() {
        rlvr_tasks::Family::Countdown => "countdown",
        rlvr_tasks::Family::Arithmetic => "arithmetic",
    };
    format!("{family}/{}", p.level)
}
