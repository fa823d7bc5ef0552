"""ipywidgets views of the workbench: they edit a scenario and show what the backend returns.

Widgets never compute estimates; they call ``workbench`` (through ``widgets.state``).
``widgets.app.App`` composes the panels (``widgets.panels``) and charts (``widgets.charts``).
"""
