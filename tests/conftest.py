import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

pytest_plugins = ["pytester", "tests.wheelenv"]


def pytest_collection_modifyitems(config, items):
    """perfgate's own tests treat every warning as an error (perftests/ on a GPU box do not)."""
    import pytest

    here = str(config.rootpath / "tests")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.filterwarnings("error"), append=False)
