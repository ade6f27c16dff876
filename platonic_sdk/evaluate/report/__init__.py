"""Reporting a run: report.json and report.md (`render`) and the figures (`plots`)."""
