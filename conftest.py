# Loads perfgate's pytest plugin for perftests/ (the suite users run) and tests/ (perfgate's own).
pytest_plugins = ["perfgate.plugin"]
