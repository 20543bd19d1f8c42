"""Sensors: ready-to-close and checkpoint freshness."""
