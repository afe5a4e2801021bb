# frugal-rl: the two commands of the README, plus lint and bench.
#   make test   provision what is missing, then run every test of the workspace
#   make demo   provision, then run the end-to-end RLVR demo in release mode
#   make lint   rustfmt --check, clippy -D warnings on all targets, rustdoc with warnings denied
# Provisioning (scripts/provision.sh) installs torch==2.11.0 from PyPI into a venv under
# $(FRUGAL_CACHE) (default ~/.cache/frugal-rl) once and links it as `.libtorch`; nothing else is
# needed by hand. `make provision-mujoco` adds mujoco==3.17.0 + gymnasium for the `mujoco` feature
# (rl-envs' MuJoCo environments); `make test` and `make lint` provision it too (about 30 MB).
SHELL := bash
FRUGAL_CACHE ?= $(HOME)/.cache/frugal-rl
export FRUGAL_CACHE
CARGO ?= cargo

.PHONY: all provision provision-mujoco test test-examples demo lint bench clean-cache

all: test

provision:
	@scripts/provision.sh

provision-mujoco:
	@scripts/provision.sh mujoco

test: provision provision-mujoco
	$(CARGO) test --workspace --features full
	@# rl-envs' MuJoCo environments (locomotion, MuJoCo point maze) against their golden rollouts
	$(CARGO) test -p rl-envs --features mujoco
	@# the tch-free crates must build and pass without libtorch features
	$(CARGO) test -p rlvr-core -p rlvr-select -p rlvr-replay --no-default-features
	@# the facade gives DPS/MoPPS + POPO + every advantage estimator without libtorch
	$(CARGO) build --no-default-features --features rlvr-select,rlvr-replay
	@# rl-core, rl-envs, rlvr-core's core, rlvr-replay and the tch-free facade features must not link libtorch
	@for c in rl-core rl-envs rlvr-replay; do if $(CARGO) tree -p $$c -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "$$c depends on tch"; exit 1; fi; done
	@if $(CARGO) tree -p rlvr-core --no-default-features -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "rlvr-core --no-default-features depends on tch"; exit 1; fi
	@if $(CARGO) tree --no-default-features --features rlvr-select,rlvr-replay -e normal | grep -qE '(^| )(tch|torch-sys) v'; then echo "facade rlvr-select,rlvr-replay depends on tch"; exit 1; fi
	@$(MAKE) --no-print-directory test-examples

# Every example at a tiny size, so CI keeps them working.
test-examples: provision
	$(CARGO) run --quiet --features full --example mlp_fit -- --steps 60 --points 64
	$(CARGO) run --quiet --features full --example rlvr_losses
	$(CARGO) run --quiet --features full --example popo_replay -- 6
	$(CARGO) run --quiet --features full --example select_compare -- --seeds 1 --n-prompts 200 --steps 40
	$(CARGO) run --quiet --features full --example sinusoid_tasks -- --iters 20 --seeds 1 --test-tasks 50
	$(CARGO) run --quiet --features full --example select_neural -- --n-prompts 200 --steps 20
	$(CARGO) run --quiet --features full --example embed_trainer
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --out target/rlvr-demo-tiny
	$(CARGO) run --quiet --features full --example sac_pendulum -- --steps 400 --random-steps 200 --hidden 16 --eval-every 200 --quiet --out target/sac-pendulum-tiny
	$(CARGO) run --quiet --features full --example ppo_cartpole -- --steps 1024 --eval-every 512 --quiet --out target/ppo-cartpole-tiny
	$(CARGO) run --quiet --features full --example agents_speed -- --seconds 0.05 --hidden 16,16 --batch 32
	$(CARGO) run --quiet --features full --example robust_dr -- --iters 3 --seeds 1 --batch 2 --hidden 16 --test-grid 2 --eval-every 3 --out target/robust-dr-tiny
	$(CARGO) run --quiet --features full,mujoco --example hopper -- --steps 300 --random-steps 200 --hidden 16 --eval-every 300 --checkpoint-every 300 --quiet --out target/hopper-tiny
	$(CARGO) run --quiet --features full --example rlvr_demo -- --quiet --config examples/configs/tiny.toml --out target/rlvr-demo-tiny-compare \
		--compare --seeds 1 --steps 4 --report target/rlvr-demo-tiny-compare/report.md

# The end-to-end RLVR run: warm start, DPS selection, POPO replay (examples/rlvr_demo.rs).
demo: provision
	$(CARGO) run --release --features rlvr-train --example rlvr_demo

lint: provision provision-mujoco
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features full -- -D warnings
	$(CARGO) clippy -p rl-envs --all-targets --features mujoco -- -D warnings
	$(CARGO) clippy -p rlvr-core -p rlvr-select -p rlvr-replay --all-targets --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --features full
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -p rl-envs --no-deps --features mujoco

bench: provision
	$(CARGO) bench --workspace --features full

clean-cache:
	rm -rf "$(FRUGAL_CACHE)" .libtorch .mujoco
