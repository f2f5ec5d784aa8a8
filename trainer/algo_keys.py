"""The `algo.*` keys: which schema each `algo.name` takes, which of its keys each algorithm reads, and
the checks of their values that span several keys (a key's own range or choices is on its field).

Each algorithm belongs to one config family, whose dataclass in trainer/config.py is the schema of its
`algo` section (conf/algo/NAME.yaml names it in its defaults list), so a key means one thing per
family: `beta` is a KL coefficient for policy_gradient and ppo and DPO's temperature for dpo, and
natural_gradient has none. A key of another family is not in the schema: Hydra would refuse it at
composition with a message of several lines, so `rlvr train` checks its command line first
(`refuse_foreign_overrides`) and says in one line whose key it is. Within a family, a key that the
chosen algorithm never reads (`algo=reinforce algo.mu=4`, `algo=npg algo.line_search_steps=3`) is
refused by `unread_algo_keys` once composed. Which family an algorithm belongs to and which keys it does not
read are columns of its row in trainer/algos/table.py ALGORITHMS; nothing here lists algorithms.
"""

from __future__ import annotations

from dataclasses import fields

from omegaconf import OmegaConf

from rlvr.errors import ConfigError
from rlvr.trainer.algos.table import ALGORITHMS
from rlvr.trainer.config import ALGO_SCHEMAS
from rlvr.trainer.field_rules import check_fields


def schema_of(name: str):
    """The dataclass of algorithm `name`'s `algo` section."""
    if name not in ALGORITHMS:
        raise ConfigError(f"algo.name={name!r} is not available; choose one of {', '.join(ALGORITHMS)}")
    return ALGO_SCHEMAS[ALGORITHMS[name].family]


def _keys(family: str) -> set[str]:
    return {f.name for f in fields(ALGO_SCHEMAS[family])}


def _members(family: str) -> list[str]:
    return [name for name, algorithm in ALGORITHMS.items() if algorithm.family == family]


def _family_of(name: str, default: str) -> str:
    return ALGORITHMS[name].family if name in ALGORITHMS else default


def _families_with(key: str) -> list[str]:
    return [f"algo={'|'.join(_members(family))}" for family in ALGO_SCHEMAS
            if key in _keys(family)]


def refuse_foreign_overrides(overrides: list[str], default: str = "grpo") -> None:
    """Before composition: each `algo.KEY=...` on the command line must be a key of the chosen algorithm's
    family (`algo=NAME`, else `default`), and `algo.name=` must stay in that family."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - Hydra reports a malformed override itself, in its own words
        return
    name = next((str(o.value()) for o in parsed if o.key_or_group == "algo" and not o.is_delete()), default)
    if name not in ALGORITHMS:
        return  # an unknown group option: Hydra names the options there are
    family = ALGORITHMS[name].family
    for override in parsed:
        key = override.key_or_group
        if not key.startswith("algo.") or override.is_delete():
            continue
        field = key.split(".", 2)[1]
        if field == "name" and _family_of(str(override.value()), family) != family:
            raise ConfigError(f"algo.name={override.value()} is not of algo={name}'s family ({family}): choose it "
                              f"with algo={override.value()}")
        if field not in _keys(family):
            owners = _families_with(field)
            raise ConfigError(f"{key} is not a key of algo={name} (family {family}, trainer/config.py "
                              f"{ALGO_SCHEMAS[family].__name__}); "
                              + (f"it is read by {' and '.join(owners)}" if owners else "no algorithm reads it"))


def unread_algo_keys(algo) -> list[str]:
    """'algo.KEY=VALUE is read by algo=A|B' for each key of the family, set away from the family's
    default, that `algo.name` never reads."""
    family = ALGORITHMS[algo.name].family
    defaults = ALGO_SCHEMAS[family]()
    problems = []
    for key in ALGORITHMS[algo.name].unread:
        if key in algo and algo[key] != getattr(defaults, key):
            readers = [n for n in _members(family) if key not in ALGORITHMS[n].unread]
            problems.append(f"algo.{key}={algo[key]!r} is read by algo={'|'.join(readers)}")
    return problems


def validate_algo(cfg) -> None:
    """The schema check, then the row's checks of `algo.*` values that span several keys (`check_keys`). A key's
    own range or choices is on its field in trainer/config.py, checked before this by `check_fields`."""
    algo = cfg.algo

    def need(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(message)

    schema = schema_of(algo.name)  # an unknown name is refused, naming the ones there are
    need(OmegaConf.get_type(algo) in (schema, dict),
         f"algo.name={algo.name} takes the {schema.__name__} schema, not {OmegaConf.get_type(algo).__name__}: "
         f"choose the algorithm with algo={algo.name}")
    if OmegaConf.get_type(algo) is dict:  # no schema attached, so the walk saw none of the family's fields' rules
        check_fields(algo, schema, "algo.")
    check_keys = ALGORITHMS[algo.name].check_keys  # the family's checks across keys (trainer/algos/key_checks.py)
    if check_keys is not None:
        check_keys(cfg)
