"""Running an experiment: `Experiment` from settings (`experiment`), the runner (`runner`), its guarded run folder, worker processes and ranks."""
