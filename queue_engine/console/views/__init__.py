"""One module per console page; each view checks access itself (see `access`)."""
