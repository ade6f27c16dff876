"""What to run: the cell settings and experiment spec (`settings`), a grid's settings and their checks (`grid_settings`), cell-method names (`registry`). Light: nothing here loads a model library."""
