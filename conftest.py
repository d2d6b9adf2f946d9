"""Loaded by every pytest run in this repository, of notebooks and of tests alike.

Its one job: stop at once, with one message, when the run needs Fashion-MNIST and there is none
(see tests/data_check.py). The tests' fixtures are in tests/conftest.py.
"""

pytest_plugins = ["tests.data_check"]
