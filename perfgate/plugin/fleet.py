"""The fleet plan lives in :mod:`perfgate.profiles.fleet` (it needs no pytest); its names stay importable here for
perfgate's own tests."""

from perfgate.profiles.fleet import Cell, ConfigCost, config_costs, matrix, plan, shard_keys, totals

__all__ = ["Cell", "ConfigCost", "config_costs", "matrix", "plan", "shard_keys", "totals"]
