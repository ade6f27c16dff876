"""Reporting a run: report.json (`summaries`), report.md (`render`: `summary`, `cell_tables`, `study_tables`, `paper`,
`glossary`, `settings_table`, in `names`' words and `text`'s formats) and the figures (`figures`, `plots`, `style`)."""
