pytest_plugins = [
    "tests.fix_world",
    "tests.fix_pg",
    "tests.fix_proxy",
    "tests.fix_engine",
    "tests.fix_process_state",
]
