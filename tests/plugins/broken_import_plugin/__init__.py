"""A plugin whose import fails: it needs a package that is not installed."""
import privboard_dependency_that_is_not_installed  # noqa: F401
