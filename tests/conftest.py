"""Shared pytest plugins; each one lives in tests/support/."""

pytest_plugins = [
    "tests.support.dynamodb_fixtures",
    "tests.support.provider_fixtures",
    "tests.support.example_plugin",
    "tests.support.stores",
    "tests.support.world_fixtures",
    "tests.support.app_fixtures",
    "tests.support.scoping",
]
