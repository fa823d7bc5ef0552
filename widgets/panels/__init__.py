"""ipywidgets panels that edit one section of the scenario document each."""
