"""frugal_rl: frugal-rl's tch-free Rust crates for Python.

- :class:`Selector` - DPS, MoPPS, uniform, history resampling, DAPO dynamic sampling, the online
  difficulty filter, DRM and GDRM behind one interface (``select`` / ``observe``).
- :class:`ReplayBuffer` - POPO's prioritized group replay.
- :func:`advantages` - every outcome-reward advantage estimator of rlvr-core (GRPO, Dr.GRPO,
  RLOO, REINFORCE++, MaxRL, Pass@k, OPO, batch-std, ReMax, GPG) with the effectiveness rule.
- :func:`classify` - the effectiveness rule on one group.
- ``frugal_rl.trl`` / ``frugal_rl.verl`` - plug-ins for TRL 1.16 and verl 0.9.1 (import them
  explicitly; they need those packages).

Every error raised by the Rust side is a :class:`FrugalError` (a ``ValueError``) subclass that
keeps the Rust message. See docs/python.md.
"""

from ._native import (  # noqa: F401
    ESTIMATORS,
    KINDS,
    AdvantageError,
    BatchSizeError,
    FrugalError,
    IdError,
    InvalidParameterError,
    OracleError,
    OutcomeError,
    ReplayBuffer,
    ReplayBufferError,
    Selector,
    ShapeError,
    StateError,
    __version__,
    advantages,
    classify,
)

__all__ = [
    "ESTIMATORS",
    "KINDS",
    "AdvantageError",
    "BatchSizeError",
    "FrugalError",
    "IdError",
    "InvalidParameterError",
    "OracleError",
    "OutcomeError",
    "ReplayBuffer",
    "ReplayBufferError",
    "Selector",
    "ShapeError",
    "StateError",
    "__version__",
    "advantages",
    "classify",
]
