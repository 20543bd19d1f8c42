"""PySpark applications the provider ships and submits itself (never imported by a worker or a driver)."""
