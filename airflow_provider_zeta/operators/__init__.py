"""Operators: the deploy task, the completed point, the delayed cleanup and the sweep."""
