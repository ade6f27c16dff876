"""The `platonic` command: parsing (`parser`), each command's checks before any model loads (`checks`, `values`),
the model commands (`commands`), the experiment commands (`grid`, `demo`) and the entry point (`main`)."""
