"""Hooks: the spark-submit command of a driver, and its detached launch."""
